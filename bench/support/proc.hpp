// Worker processes of the scenarios whose contention crosses processes (contended, shared,
// semaphore, peers): this binary started again with a hidden first argument, or (peers) a
// script that speaks the same protocol (bench/peers/peer_worker.py). Protocol: a worker
// opens its clients, prints "ready" on stdout, waits for EOF on stdin (the parent closes the
// start pipe once every worker is ready, so that they start together), runs, and prints one
// JSON line with its results ({"error": ...} on failure).
#pragma once

#include <nlohmann/json.hpp>
#include <sys/types.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace dblock_bench {

// The URL goes to the workers in the environment, not argv: argv is world-readable in
// /proc/PID/cmdline and a server URL may carry a password.
inline constexpr const char* kWorkerUrlVar = "DBLOCK_BENCH_WORKER_URL";

// A file descriptor closed when it goes.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    reset();
    fd = std::exchange(o.fd, -1);
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

// This process's open file descriptors (/proc/self/fd); with sockets_only, those that are
// sockets (one per TCP connection, leaving out the pipes and eventfds a client library keeps).
double open_fds(bool sockets_only);

// Worker side: the URL from the environment (throws std::runtime_error when unset).
const char* worker_url();
// Worker side: prints "ready" and blocks until the parent's start signal (EOF on stdin).
void worker_ready_then_wait();
// A worker's end: prints what `work` answers as its one JSON line, or {"error": ...} should it
// throw. The process's exit status: 0, or 70.
int report_worker(const std::function<nlohmann::json()>& work);

struct WorkerOutput {
  pid_t pid = -1;
  int status = 0;    // waitpid's
  std::string line;  // the result line (empty when the worker printed none)
};

// Parent side: starts one worker per command line (argv[0] first; run as `program`, by
// default this binary) with kWorkerUrlVar = url, waits until all are ready, starts them
// together and waits for them to exit; `on_ready`, if set, is called once every worker is ready,
// just before the start (a scenario reads the server's counters there, after the workers'
// connects). `failure` gets the first worker's complaint before it was ready (its line, or
// a note that it exited); the outputs are returned either way, in the order of `argvs`.
std::vector<WorkerOutput> run_workers(const std::vector<std::vector<std::string>>& argvs, const std::string& url,
                                      std::string& failure, const std::string& program = "/proc/self/exe",
                                      const std::function<void()>& on_ready = {});

}  // namespace dblock_bench
