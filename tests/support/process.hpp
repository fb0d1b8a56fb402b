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

// Prints what a process that hangs is doing, and its children (to stderr): state and tracer
// (a traced `t` state with a child of its own is LeakSanitizer's exit check, which gdb then
// cannot attach to: its tracer child's stack is the one that tells), and every thread's
// stack (gdb). So that a hang seen once in CI can be diagnosed from the log.
inline void print_stacks(pid_t pid) {
  const std::string p = std::to_string(pid);
  std::string cmd = "for p in " + p + " $(pgrep -P " + p + "); do echo \"process $p: $(tr '\\0' ' ' </proc/$p/cmdline)\"; "
                    "grep -E '^(State|TracerPid)' /proc/$p/status; "
                    "timeout 60 gdb -p $p -batch -nx -ex 'thread apply all bt' 2>&1 | grep -E '^(Thread|#|ptrace|Could)'; "
                    "done >&2";
  if (std::system(cmd.c_str()) == -1) std::fprintf(stderr, "(no report on %d: cannot run a shell)\n", pid);
}

}  // namespace dblock::test
