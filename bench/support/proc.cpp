#include "bench/support/proc.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

extern char** environ;

namespace dblock_bench {

namespace {

// Reads one line (without the newline) from fd; empty at EOF before any byte.
std::string read_line(int fd) {
  std::string line;
  char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') return line;
    line += c;
  }
}

struct Worker {
  pid_t pid = -1;
  Fd out;  // its stdout
};

Worker spawn_worker(const std::string& program, const std::vector<std::string>& args,
                    const std::vector<std::string>& env, int start_fd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe2: {}", std::strerror(errno)));
  Fd read_end(p[0]), write_end(p[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // dup2 clears O_CLOEXEC on the copies; every other pipe end stays out of the child.
  posix_spawn_file_actions_adddup2(&fa, start_fd, 0);
  posix_spawn_file_actions_adddup2(&fa, write_end.fd, 1);
  std::vector<char*> av, ev;
  for (const auto& a : args) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  for (const auto& e : env) ev.push_back(const_cast<char*>(e.c_str()));
  ev.push_back(nullptr);
  Worker w;
  int rc = posix_spawn(&w.pid, program.c_str(), &fa, nullptr, av.data(), ev.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error(fmt::format("posix_spawn {}: {}", program, std::strerror(rc)));
  w.out = std::move(read_end);
  return w;
}

}  // namespace

const char* worker_url() {
  const char* url = std::getenv(kWorkerUrlVar);
  if (!url) throw std::runtime_error(fmt::format("{} is not set", kWorkerUrlVar));
  return url;
}

void worker_ready_then_wait() {
  std::fputs("ready\n", stdout);
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
}

int report_worker(const std::function<nlohmann::json()>& work) {
  nlohmann::json out;
  int status = 0;
  try {
    out = work();
  } catch (const std::exception& e) {
    out = {{"error", e.what()}};
    status = 70;
  }
  std::fputs((out.dump() + "\n").c_str(), stdout);
  std::fflush(stdout);
  return status;
}

std::vector<WorkerOutput> run_workers(const std::vector<std::vector<std::string>>& argvs, const std::string& url,
                                      std::string& failure, const std::string& program,
                                      const std::function<void()>& on_ready) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, kWorkerUrlVar, std::strlen(kWorkerUrlVar)) != 0) env.emplace_back(*e);
  env.push_back(fmt::format("{}={}", kWorkerUrlVar, url));

  int sp[2];
  if (pipe2(sp, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe2: {}", std::strerror(errno)));
  Fd start_read(sp[0]), start_write(sp[1]);
  std::vector<Worker> ws;
  for (const auto& args : argvs) ws.push_back(spawn_worker(program, args, env, start_read.fd));
  start_read.reset();

  for (auto& w : ws)
    if (auto line = read_line(w.out.fd); line != "ready" && failure.empty())
      failure = line.empty() ? "a worker exited before it was ready" : line;
  // Every worker has its clients open (or failed): closing the pipe starts them together.
  if (on_ready && failure.empty()) on_ready();
  start_write.reset();

  std::vector<WorkerOutput> out;
  for (auto& w : ws) {
    WorkerOutput o;
    o.pid = w.pid;
    o.line = read_line(w.out.fd);
    while (waitpid(w.pid, &o.status, 0) < 0 && errno == EINTR) {
    }
    out.push_back(std::move(o));
  }
  return out;
}

double open_fds(bool sockets_only) {
  double n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) throw std::runtime_error("cannot list /proc/self/fd");
  const int own = dirfd(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.' || std::atoi(e->d_name) == own) continue;
    if (sockets_only) {
      char target[64] = {};
      std::string link = std::string("/proc/self/fd/") + e->d_name;
      if (readlink(link.c_str(), target, sizeof target - 1) < 0 || std::string(target).rfind("socket:", 0) != 0)
        continue;
    }
    ++n;
  }
  closedir(d);
  return n;
}

}  // namespace dblock_bench
