// dblock run: hold a lock while a command runs.
//
// Signals: INT, TERM, HUP, QUIT, CHLD and USR1 are blocked in every thread (the renewal
// thread inherits the mask) and taken synchronously with sigtimedwait in the main thread.
// A lost lease makes the renewal thread raise USR1; the main thread then stops the command
// with SIGTERM, and SIGKILL after the grace period. The command dies with us even on
// SIGKILL (PR_SET_PDEATHSIG).
//
// The command runs in its own process group, so that stopping it stops what it started
// too (`sh -c 'a; b'` leaves b running if only sh is signalled): the protected work must
// end when the lease is lost. Stop signals dblock receives go to that group. When run from
// an interactive terminal, the group is given the terminal (as a shell does for a job) so
// Ctrl-C and reads from the terminal reach the command; dblock takes it back afterwards.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "cli/cli.hpp"
#include "dblock/duration.hpp"

namespace dblock::cli {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

timespec to_timespec(Clock::duration d) {
  auto ns = std::max<long long>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  return timespec{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

bool is_stop_signal(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT; }

// Takes a pending stop signal without waiting; 0 when none.
int pending_stop_signal(const sigset_t& set) {
  timespec zero{0, 0};
  siginfo_t info;
  for (;;) {
    int sig = sigtimedwait(&set, &info, &zero);
    if (sig <= 0 || is_stop_signal(sig)) return sig > 0 ? sig : 0;
  }
}

// Runs in the forked child of a multithreaded process: only async-signal-safe calls from
// here to exec (another thread may have held the allocator's lock at the fork, so even a
// malloc can hang forever), hence argv is built before the fork.
[[noreturn]] void exec_child(char* const* argv, pid_t parent, const sigset_t& old_mask, bool foreground) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(software);  // the parent died before prctl took effect
  setpgid(0, 0);
  if (foreground) tcsetpgrp(STDIN_FILENO, getpid());  // SIGTTOU is blocked here, so this works
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  execvp(argv[0], argv);
  int err = errno;
  const char* parts[] = {"dblock: cannot run '", argv[0], "': ", strerrordesc_np(err), "\n"};
  for (const char* p : parts)
    if (p) (void)!write(STDERR_FILENO, p, std::strlen(p));
  _exit(err == ENOENT ? 127 : 126);  // as shells do
}

}  // namespace

int run_command(const RunArgs& a) {
  LockOptions lo;
  if (!a.strategy.empty()) lo.strategy = parse_strategy(a.strategy);
  lo.ttl = parse_duration(a.ttl);
  if (!a.hold_at_least.empty()) lo.hold_at_least = parse_duration(a.hold_at_least);
  lo.permits = a.permits;
  lo.fair = !a.unfair;
  const Mode mode = a.shared ? Mode::shared : Mode::exclusive;
  auto grace = parse_duration(a.grace);
  std::optional<milliseconds> wait;
  if (a.no_wait) wait = milliseconds{0};
  else if (!a.wait.empty()) wait = parse_duration(a.wait);
  lo.on_lost = [](const std::string&, std::uint64_t) { kill(getpid(), SIGUSR1); };

  sigset_t set, old_mask;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1}) sigaddset(&set, s);
  sigset_t blocked = set;
  sigaddset(&blocked, SIGTTOU);  // so that handing the terminal back and forth cannot stop us
  pthread_sigmask(SIG_BLOCK, &blocked, &old_mask);

  auto client = Client::open(a.common.url, a.common.client_options());
  auto lock = client->lock(a.name, lo);

  // Wait in slices, so a stop signal ends the wait within a quarter second.
  std::optional<Lease> lease;
  auto deadline = wait ? Clock::now() + *wait : Clock::time_point::max();
  for (;;) {
    auto now = Clock::now();
    auto slice = std::min<Clock::duration>(milliseconds{250}, deadline - now);
    auto wait_ms = std::chrono::duration_cast<milliseconds>(std::max<Clock::duration>(slice, {}));
    lease = mode == Mode::shared ? lock.try_acquire_shared(wait_ms) : lock.try_acquire(wait_ms);
    if (lease) break;
    if (int sig = pending_stop_signal(set)) return 128 + sig;
    if (Clock::now() >= deadline) {
      if (wait->count() == 0) std::cerr << "dblock: lock '" << a.name << "' is busy\n";
      else std::cerr << "dblock: timed out after " << format_duration(*wait) << " waiting for lock '" << a.name << "'\n";
      return busy;
    }
  }

  setenv("DBLOCK_NAME", a.name.c_str(), 1);
  setenv("DBLOCK_FENCE", std::to_string(lease->fence()).c_str(), 1);
  setenv("DBLOCK_OWNER", lease->owner().c_str(), 1);
  bool foreground = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  std::vector<char*> argv;
  for (const auto& arg : a.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) throw InternalError(std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) exec_child(argv.data(), parent, old_mask, foreground);
  setpgid(child, child);  // also here, so the group exists whichever process runs first
  if (foreground) tcsetpgrp(STDIN_FILENO, child);

  bool lost = false;
  std::optional<Clock::time_point> kill_at;
  int status = 0;
  for (;;) {
    auto ts = to_timespec(kill_at ? *kill_at - Clock::now() : Clock::duration(std::chrono::seconds{1}));
    siginfo_t info{};
    int sig = sigtimedwait(&set, &info, &ts);
    if (waitpid(child, &status, WNOHANG) == child) break;
    if (kill_at && Clock::now() >= *kill_at) {
      kill(-child, SIGKILL);
      kill_at.reset();
    }
    if (sig == SIGUSR1 && !lost && lease->lost()) {
      lost = true;
      std::cerr << "dblock: lost lock '" << a.name << "' (fence " << lease->fence() << "): stopping the command\n";
      kill(-child, SIGTERM);
      kill_at = Clock::now() + grace;
    } else if (is_stop_signal(sig)) {
      kill(-child, sig);
    }
  }
  if (foreground) tcsetpgrp(STDIN_FILENO, getpgrp());
  if (lost) kill(-child, SIGKILL);  // whatever the command left behind must not run on unprotected
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  try {
    lease->release();
  } catch (const LockLostError& e) {
    if (!lost) std::cerr << "dblock: " << e.what() << "\n";
    lost = true;
  } catch (const Error& e) {
    std::cerr << "dblock: could not release lock '" << a.name << "' (it expires by its TTL): " << e.what() << "\n";
  }
  return lost ? Exit::lost : code;
}

}  // namespace dblock::cli
