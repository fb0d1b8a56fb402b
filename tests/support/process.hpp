// Starting helper processes from tests (posix_spawn, no shell).
#pragma once

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace dblock::test {

inline pid_t spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    throw std::runtime_error("cannot start " + args[0]);
  return pid;
}

// The exit code, or 128 + signal.
inline int wait_exit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) throw std::runtime_error("waitpid failed");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Prints every thread's stack of a process that hangs (to stderr, with gdb, if installed),
// so that a hang seen once in CI can be diagnosed from the log.
inline void print_stacks(pid_t pid) {
  std::string cmd = "timeout 60 gdb -p " + std::to_string(pid) +
                    " -batch -nx -ex 'thread apply all bt' 2>/dev/null | grep -E '^(Thread|#)' >&2";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "(no stacks of %d: is gdb installed?)\n", static_cast<int>(pid));
}

}  // namespace dblock::test
