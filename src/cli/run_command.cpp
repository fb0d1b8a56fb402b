// dblock run: hold a lock while a command runs.
//
// Signals: INT, TERM, HUP, QUIT, CHLD and USR1 are blocked in every thread (the renewal
// thread inherits the mask) and taken synchronously with sigtimedwait in the main thread.
// A lost lease makes the renewal thread raise USR1; the main thread then stops the command
// with SIGTERM, and SIGKILL after the grace period.
//
// The command runs in its own process group, so that stopping it stops what it started
// too (`sh -c 'a; b'` leaves b running if only sh is signalled): the protected work must
// end when the lease is lost. Stop signals dblock receives go to that group. The group's
// leader is a small process of dblock's own, the command's parent: it passes the command's
// exit status on, and when dblock dies, even by SIGKILL (PR_SET_PDEATHSIG), it kills the whole
// group, so nothing the command started runs on unprotected. When run from
// an interactive terminal, the group is given the terminal (as a shell does for a job) so
// Ctrl-C and reads from the terminal reach the command; dblock takes it back afterwards.
//
// What the command gets of dblock's: its lock's name, fence and owner in the environment, and
// nothing else. DBLOCK_URL (which may hold the password) is left out of its environment, and
// every descriptor dblock opened (the server connections, SQLite's files, the client
// libraries' own: libmariadb, hiredis and zookeeper_mt do not set close-on-exec) is closed at
// the exec; those dblock was started with are passed on, as a shell passes them.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <exception>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string_view>

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

// The descriptors above stderr open now: at the start of `run`, before dblock opened any,
// these are the ones it was started with.
std::vector<int> open_descriptors() {
  std::vector<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return fds;
  for (dirent* e; (e = readdir(dir)) != nullptr;) {
    int fd = std::atoi(e->d_name);
    if (fd > STDERR_FILENO && fd != dirfd(dir)) fds.push_back(fd);
  }
  closedir(dir);
  return fds;
}

// What the command's exec keeps: built before the fork (the child may not allocate).
struct ChildSetup {
  std::vector<std::string> env_text;
  std::vector<char*> argv, envp;
  std::vector<int> passed;  // descriptors dblock was started with
  int fd_limit = 0;         // the descriptor table's size, for a kernel without close_range
};

// Runs in the forked children of a multithreaded process: only async-signal-safe calls from
// the fork to the exec (another thread may have held the allocator's lock at the fork, so
// even a malloc can hang forever), hence argv and the environment are built before it.
[[noreturn]] void exec_command(const ChildSetup& c, const sigset_t& old_mask) {
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (close_range(STDERR_FILENO + 1, ~0U, CLOSE_RANGE_CLOEXEC) != 0)  // Linux before 5.11
    for (int fd = STDERR_FILENO + 1; fd < c.fd_limit; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
  for (int fd : c.passed) fcntl(fd, F_SETFD, 0);
  char* const* argv = c.argv.data();
  execvpe(argv[0], argv, c.envp.data());
  int err = errno;
  const char* parts[] = {"dblock: cannot run '", argv[0], "': ", strerrordesc_np(err), "\n"};
  for (const char* p : parts)
    if (p) (void)!write(STDERR_FILENO, p, std::strlen(p));
  _exit(err == ENOENT ? 127 : 126);  // as shells do
}

// The group leader (see the top of this file): starts the command and waits for it, its
// signal mask dblock's (stop signals blocked: they are meant for the command, and this
// process must outlive it to pass its status on).
[[noreturn]] void lead_group(const ChildSetup& c, pid_t parent, const sigset_t& old_mask, bool foreground) {
  struct sigaction orphaned {};
  orphaned.sa_handler = [](int) { kill(0, SIGKILL); };  // dblock died: the whole group goes
  sigaction(SIGUSR2, &orphaned, nullptr);
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  pthread_sigmask(SIG_UNBLOCK, &usr2, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGUSR2);
  if (getppid() != parent) _exit(software);  // dblock died before prctl took effect
  setpgid(0, 0);
  if (foreground) tcsetpgrp(STDIN_FILENO, getpid());  // SIGTTOU is blocked here, so this works
  const pid_t leader = getpid();
  pid_t command = _Fork();  // fork without the atfork handlers: the libraries' are not for this copy
  if (command < 0) _exit(software);
  if (command == 0) {
    signal(SIGUSR2, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != leader) _exit(software);
    exec_command(c, old_mask);
  }
  int status = 0;
  while (waitpid(command, &status, 0) < 0)
    if (errno != EINTR) _exit(software);
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  // Killed by a signal: die of the same one, so that dblock reports it as the command's.
  const int sig = WTERMSIG(status);
  signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  kill(leader, sig);
  _exit(128 + sig);
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

  ChildSetup child_setup;
  child_setup.passed = open_descriptors();
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  child_setup.fd_limit = static_cast<int>(std::min<rlim_t>(files.rlim_cur, 1 << 20));

  sigset_t set, old_mask;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1}) sigaddset(&set, s);
  sigset_t blocked = set;
  sigaddset(&blocked, SIGTTOU);  // so that handing the terminal back and forth cannot stop us
  pthread_sigmask(SIG_BLOCK, &blocked, &old_mask);

  // Bad input is refused before open() creates anything (a SQLite file, a lock table).
  const auto url = a.common.server_url();
  Client::check_lock(url, a.name, lo);
  const auto options = a.common.client_options();

  // The wait is one acquire call, on a thread of its own, while this thread waits for signals.
  // (A wait cut into slices, to notice a stop signal, asked the server again and rejoined the
  // queue every slice: 24 commits a second per waiting process on PostgreSQL, against 4 for
  // one call.) The thread wakes this one with SIGCHLD: no child runs yet. A stop signal ends
  // the process at once, and what the wait held on the server (its place in the queue, its
  // connections) ends as a killed waiter's does.
  const auto deadline = wait ? Clock::now() + *wait : Clock::time_point::max();
  std::shared_ptr<Client> client;
  std::optional<Lease> lease;
  std::exception_ptr failed;
  std::atomic<bool> done{false};
  const pthread_t waiting_for_signals = pthread_self();
  std::thread waiter([&] {
    try {
      milliseconds full_pause{125};
      for (;;) {
        try {
          if (!client) client = Client::open(url, options);  // MySQL asks the server's version here
          auto lock = client->lock(a.name, lo);
          if (!wait) {
            lease = mode == Mode::shared ? lock.acquire_shared() : lock.acquire();
          } else {
            auto left = std::chrono::duration_cast<milliseconds>(
                std::max<Clock::duration>(deadline - Clock::now(), Clock::duration::zero()));
            lease = mode == Mode::shared ? lock.try_acquire_shared(left) : lock.try_acquire(left);
          }
          break;
        } catch (const ServerFullError&) {
          // No connection slot free on the server (to open the Client, or to acquire): a slot
          // frees when another client leaves, so the wait goes on (it ends with this error if the server is still full at its end),
          // with pauses that grow to a second, so that a fleet of waiters does not flood the
          // server with connection attempts.
          if (Clock::now() >= deadline) throw;
          full_pause = std::min(full_pause * 2, milliseconds{1000});
          std::this_thread::sleep_for(std::min<Clock::duration>(full_pause, deadline - Clock::now()));
        }
      }
    } catch (...) {
      failed = std::current_exception();
    }
    done = true;
    pthread_kill(waiting_for_signals, SIGCHLD);
  });
  while (!done) {
    siginfo_t info;
    int sig = sigwaitinfo(&set, &info);
    if (!done && sig > 0 && is_stop_signal(sig)) {
      std::cerr.flush();
      std::_Exit(128 + sig);
    }
  }
  waiter.join();
  if (failed) std::rethrow_exception(failed);
  if (!lease) {
    if (wait->count() == 0) std::cerr << "dblock: lock '" << a.name << "' is busy\n";
    else std::cerr << "dblock: timed out after " << format_duration(*wait) << " waiting for lock '" << a.name << "'\n";
    return busy;
  }

  // The command's environment: ours without DBLOCK_URL (nor the variables set below, which
  // a dblock run inside another's command would find set to its parent's lock).
  auto& env = child_setup.env_text;
  for (char** e = environ; *e; ++e) {
    std::string_view var(*e);
    auto name = var.substr(0, var.find('='));
    if (name != "DBLOCK_URL" && name != "DBLOCK_NAME" && name != "DBLOCK_FENCE" && name != "DBLOCK_OWNER")
      env.emplace_back(var);
  }
  env.push_back("DBLOCK_NAME=" + a.name);
  env.push_back("DBLOCK_FENCE=" + std::to_string(lease->fence()));
  env.push_back("DBLOCK_OWNER=" + lease->owner());
  for (auto& var : env) child_setup.envp.push_back(var.data());
  child_setup.envp.push_back(nullptr);
  for (const auto& arg : a.command) child_setup.argv.push_back(const_cast<char*>(arg.c_str()));
  child_setup.argv.push_back(nullptr);
  bool foreground = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) throw InternalError(std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) lead_group(child_setup, parent, old_mask, foreground);
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
