// The torture run: N worker processes x M threads take one lock name over and over and do a
// racy read-modify-write on a fenced resource (resource.hpp), while the parent injects chaos:
// SIGKILL of the current holder, SIGSTOP of the holder past its TTL, and server restarts.
// It reports grants, violations (must be 0), fence regressions and lost increments (must be
// 0), stale writes the fence rejected, late loss reports (session locks: superseded while the
// lease looked valid, the loss reported within one renewal interval, see resource.hpp), grants
// per second and recovery times after each fault, as one JSON line.
//
// With --shape shared, a quarter of the sections are a read/write lock's writers (doing the
// fenced update above) and the rest its readers; with --shape permits=N every section is one
// of a semaphore's N holders. Then every entry is also checked against the shape's rule (a
// writer alone, readers with no writer, at most N holders) by counting the live holders
// inside (occupancy.hpp), and the report adds entries, the most inside at once and the
// entries that broke the rule.
//
//   dblock_torture --url URL --strategy S [--table T] [--processes 3] [--threads 2]
//                  [--seconds 10] [--grants N] [--ttl 1000ms] [--kill-every 0ms]
//                  [--stop-every 0ms] [--restart-every 0ms --restart-cmd CMD] [--dir DIR]
//                  [--shape exclusive | shared | permits=N] [--allow-hung yes] [--allow-violations yes]
//   dblock_torture worker URL TABLE STRATEGY NAME THREADS TTL_MS RESOURCE STOP_FILE SHAPE OCCUPANCY
//
// Exit 0 when the run had grants and no violation (unless allowed), fence regression, lost
// increment, broken shape rule or failed restart, 1 otherwise, 64 on bad arguments. Only the
// public API is used, as a service would.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dblock/duration.hpp"  // the CLI's duration syntax (1000ms, 2s)
#include "dblock/dblock.hpp"
#include "support/process.hpp"
#include "torture/occupancy.hpp"
#include "torture/resource.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// A restart (--restart-cmd) taking longer is stopped and reported: far above a healthy one
// (a MariaDB failover with a replica rebuilt from a dump: 5 s), and well below the test's
// 600 s timeout, so that the run still ends and prints what the command printed. A restart
// that fails or is stopped fails the run: the fault it was to inject did not happen as meant,
// and what it left (a replica not following, say) would fail the next test instead.
constexpr std::chrono::seconds kRestartLimit{180};

// "exclusive" -> 1 with shared false; "shared" -> 1 with shared true; "permits=N" -> N.
struct Shape {
  bool shared = false;
  std::uint32_t permits = 1;
  bool exclusive() const { return !shared && permits == 1; }
};

Shape parse_shape(const std::string& v) {
  if (v == "exclusive") return Shape{};
  if (v == "shared") return Shape{true, 1};
  if (v.rfind("permits=", 0) == 0) {
    auto n = std::stoul(v.substr(8));
    if (n >= 2 && n <= 64) return Shape{false, static_cast<std::uint32_t>(n)};
  }
  throw dblock::UsageError("--shape takes exclusive, shared or permits=N (2..64), not " + v);
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// One worker process: THREADS threads loop until STOP_FILE appears.
int worker(const std::vector<std::string>& a) {
  const std::string &url = a[1], &table = a[2], &name = a[4], &resource_path = a[7], &stop = a[8];
  const auto strategy = dblock::parse_strategy(a[3]);
  const Shape shape = parse_shape(a[9]);
  const std::string& occupancy_path = a[10];
  const int threads = std::stoi(a[5]);
  const milliseconds ttl{std::stol(a[6])};
  dblock::ClientOptions co;
  co.table = table;
  co.statement_timeout = 2s;
  co.connect_timeout = 2s;
  std::shared_ptr<dblock::Client> client;
  while (!client) {  // the server may be restarting when a replacement worker starts
    try {
      client = dblock::Client::open(url, co);
    } catch (const dblock::Error&) {
      if (exists(stop)) return 0;
      std::this_thread::sleep_for(100ms);
    }
  }
  dblock::LockOptions lo;
  lo.strategy = strategy;
  lo.ttl = ttl;
  lo.permits = shape.permits;
  auto lock = client->lock(name, lo);
  const bool session_lock = strategy == dblock::Strategy::for_update || strategy == dblock::Strategy::advisory;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      dblock::torture::Resource resource(resource_path);
      dblock::torture::Occupancy occupancy(occupancy_path);
      std::mt19937 rng(std::random_device{}() + t);
      while (!exists(stop)) {
        try {
          // A writer (the fenced update below), or a reader or semaphore holder (counted only).
          const bool writer = shape.exclusive() || (shape.shared && rng() % 4 == 0);
          // Exclusive grants only: their fences are the ones each new holder must see rise.
          const auto max_before = shape.exclusive() ? resource.granted_max() : 0;
          auto lease = shape.shared && !writer ? lock.try_acquire_shared(500ms) : lock.try_acquire(500ms);
          if (!lease) continue;
          if (shape.exclusive()) resource.granted(lease->fence(), max_before);
          // Every section is slow enough to widen the race; one in 16 takes 20 ms and is
          // published, so that the chaos catches a process while it holds the lock.
          const bool slow = rng() % 16 == 0;
          auto lost = [&] { return lease->lost(); };
          bool superseded = false;
          int slot = -1;
          if (!shape.exclusive()) {
            const auto left = lease->remaining();
            if (left <= milliseconds{0}) continue;  // lost already: not inside
            slot = occupancy.enter(writer, shape.permits, Clock::now() + left, slow);
          }
          if (!writer) {
            std::this_thread::sleep_for(std::chrono::microseconds(slow ? 20'000 : rng() % 500));
          } else if (resource.enter(lease->fence(), lost, slow, &superseded)) {
            auto v = resource.read_counter();
            std::this_thread::sleep_for(std::chrono::microseconds(slow ? 20'000 : rng() % 500));
            // Written even when the lease was lost meanwhile: the fence must reject it then.
            resource.write_counter(lease->fence(), v + 1, lost, &superseded);
          }
          if (slot >= 0) occupancy.leave(slot);
          if (superseded && session_lock) {
            // Someone else was granted the lock while ours looked valid: for a session lock,
            // the server may have dropped our connection (a restart, a killed backend) and
            // freed it at once. The promise: the loss is reported at the next renewal ping
            // (every renew_every), and never later than the lease's local deadline (one TTL
            // after the last renewal). Kept, it is a late loss report; else a violation.
            const auto seen = Clock::now();
            while (!lease->lost() && Clock::now() < seen + ttl + 500ms) std::this_thread::sleep_for(2ms);
            if (lease->lost())
              resource.excuse(std::chrono::duration_cast<milliseconds>(Clock::now() - seen).count());
          }
          try {
            lease->release();
          } catch (const dblock::LockLostError&) {  // paused past its TTL: expected under chaos
          }
        } catch (const dblock::Error&) {  // the server restarting or unreachable: try again
          std::this_thread::sleep_for(50ms);
        }
      }
    });
  for (auto& t : pool) t.join();
  return 0;
}

struct Args {
  std::string url, table = "dblock_torture", strategy, dir, restart_cmd;
  int processes = 3, threads = 2;
  milliseconds seconds{10'000}, ttl{1000}, kill_every{0}, stop_every{0}, restart_every{0};
  long grants = 0;  // > 0: run until this many grants (or 10x --seconds)
  bool allow_hung = false;  // a worker that does not stop is reported, not a failure
  // Violations (two live holders) reported, not a failure: for a topology that can lose
  // acknowledged grants by design (Redis with asynchronous replicas). Fence regressions and
  // lost increments still fail.
  bool allow_violations = false;
  std::string shape = "exclusive";
};

milliseconds duration_arg(const std::string& v) {
  return dblock::parse_duration(v);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) throw dblock::UsageError("missing value after " + k);
    std::string v = argv[++i];
    if (k == "--url") a.url = v;
    else if (k == "--table") a.table = v;
    else if (k == "--strategy") a.strategy = v;
    else if (k == "--dir") a.dir = v;
    else if (k == "--processes") a.processes = std::stoi(v);
    else if (k == "--threads") a.threads = std::stoi(v);
    else if (k == "--grants") a.grants = std::stol(v);
    else if (k == "--seconds") a.seconds = milliseconds{std::stol(v) * 1000};
    else if (k == "--ttl") a.ttl = duration_arg(v);
    else if (k == "--kill-every") a.kill_every = duration_arg(v);
    else if (k == "--stop-every") a.stop_every = duration_arg(v);
    else if (k == "--restart-every") a.restart_every = duration_arg(v);
    else if (k == "--restart-cmd") a.restart_cmd = v;
    else if (k == "--allow-hung") a.allow_hung = v == "yes";
    else if (k == "--allow-violations") a.allow_violations = v == "yes";
    else if (k == "--shape") a.shape = v;
    else throw dblock::UsageError("unknown option " + k);
  }
  if (a.url.empty() || a.strategy.empty()) throw dblock::UsageError("--url and --strategy are required");
  dblock::parse_strategy(a.strategy);
  parse_shape(a.shape);
  if (a.processes < 1 || a.threads < 1) throw dblock::UsageError("--processes and --threads must be at least 1");
  if (a.restart_every.count() > 0 && a.restart_cmd.empty())
    throw dblock::UsageError("--restart-every needs --restart-cmd");
  return a;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string json_list(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(static_cast<long>(v[i]));
  return s + "]";
}

class Run {
 public:
  Run(Args a, std::string self) : a_(std::move(a)), self_(std::move(self)) {
    dir_ = a_.dir.empty() ? std::filesystem::temp_directory_path() /
                                ("dblock-torture-" + std::to_string(::getpid()))
                          : std::filesystem::path(a_.dir);
    std::filesystem::create_directories(dir_);
    resource_path_ = (dir_ / "resource").string();
    occupancy_path_ = (dir_ / "occupancy").string();
    stop_path_ = (dir_ / "stop").string();
    std::filesystem::remove(resource_path_);
    std::filesystem::remove(occupancy_path_);
    std::filesystem::remove(stop_path_);
    name_ = "torture-" + std::to_string(::getpid());
  }

  int go() {
    {
      dblock::ClientOptions co;  // the lock table must exist before the workers start
      co.table = a_.table;
      co.auto_migrate = true;
      dblock::Client::open(a_.url, co);
    }
    resource_ = std::make_unique<dblock::torture::Resource>(resource_path_);
    occupancy_ = std::make_unique<dblock::torture::Occupancy>(occupancy_path_);
    for (int p = 0; p < a_.processes; ++p) workers_.push_back(spawn_worker());
    const auto start = Clock::now();
    const auto end = start + (a_.grants > 0 ? a_.seconds * 10 : a_.seconds);
    auto next_kill = start + a_.kill_every, next_stop = start + a_.stop_every, next_restart = start + a_.restart_every;
    std::mt19937 rng(std::random_device{}());
    while (Clock::now() < end && (a_.grants == 0 || progress() < a_.grants)) {
      std::this_thread::sleep_for(20ms);
      auto now = Clock::now();
      if (a_.kill_every.count() > 0 && now >= next_kill) {
        chaos_kill();
        next_kill = Clock::now() + a_.kill_every;
      } else if (a_.stop_every.count() > 0 && now >= next_stop) {
        chaos_stop();
        next_stop = Clock::now() + a_.stop_every;
      } else if (a_.restart_every.count() > 0 && now >= next_restart) {
        chaos_restart();
        next_restart = Clock::now() + a_.restart_every;
      }
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    { std::FILE* f = std::fopen(stop_path_.c_str(), "w"); if (f) std::fclose(f); }
    int hung = 0;
    for (pid_t pid : workers_) hung += finish(pid) ? 0 : 1;
    auto s = resource_->read();
    auto o = occupancy_->read();
    long lost_increments = s.accepted - s.counter;
    std::printf(
        "{\"url_scheme\":\"%s\",\"strategy\":\"%s\",\"processes\":%d,\"threads\":%d,\"seconds\":%.1f,"
        "\"grants\":%lld,\"grants_per_second\":%.1f,\"violations\":%lld,\"fence_regressions\":%lld,"
        "\"lost_increments\":%ld,"
        "\"stale_rejected\":%lld,\"late_loss_reports\":%lld,\"late_loss_max_ms\":%lld,"
        "\"hung_workers\":%d,\"kills\":%zu,\"stops\":%zu,\"restarts\":%zu,\"failed_restarts\":%zu,"
        "\"recovery_ms\":{\"kill\":%s,\"stop_takeover\":%s,\"restart\":%s},"
        "\"recovery_median_ms\":{\"kill\":%.0f,\"stop_takeover\":%.0f,\"restart\":%.0f},"
        "\"shape\":\"%s\",\"entries\":%lld,\"max_inside\":%lld,\"shape_violations\":%lld}\n",
        a_.url.substr(0, a_.url.find(':')).c_str(), a_.strategy.c_str(), a_.processes, a_.threads, elapsed,
        static_cast<long long>(s.accepted), s.accepted / elapsed, static_cast<long long>(s.violations),
        static_cast<long long>(s.regressions), lost_increments, static_cast<long long>(s.stale),
        static_cast<long long>(s.late_losses),
        static_cast<long long>(s.late_loss_max_ms), hung, kill_ms_.size(), stops_, restart_ms_.size(), failed_restarts_,
        json_list(kill_ms_).c_str(), json_list(stop_ms_).c_str(), json_list(restart_ms_).c_str(), median(kill_ms_),
        median(stop_ms_), median(restart_ms_), a_.shape.c_str(), static_cast<long long>(o.entries),
        static_cast<long long>(o.max_inside), static_cast<long long>(o.over));
    std::filesystem::remove_all(dir_);
    const auto shape = parse_shape(a_.shape);
    const bool granted = shape.exclusive() ? s.accepted > 0 : o.entries > 0 && (shape.permits > 1 || s.accepted > 0);
    bool ok = granted && (s.violations == 0 || a_.allow_violations) && s.regressions == 0 && lost_increments == 0 &&
              o.over == 0 && (hung == 0 || a_.allow_hung) && failed_restarts_ == 0;
    return ok ? 0 : 1;
  }

 private:
  pid_t spawn_worker() {
    return dblock::test::spawn({self_, "worker", a_.url, a_.table, a_.strategy, name_, std::to_string(a_.threads),
                                std::to_string(a_.ttl.count()), resource_path_, stop_path_, a_.shape, occupancy_path_});
  }

  // Sections done so far: writes accepted, and shaped sections entered.
  std::int64_t progress() { return resource_->peek().accepted + occupancy_->peek().entries; }

  // Milliseconds from `since` until progress past `before` (30 s at most).
  double until_progress(std::int64_t before, Clock::time_point since, milliseconds limit = 30s) {
    while (progress() <= before && Clock::now() - since < limit) std::this_thread::sleep_for(2ms);
    return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
  }

  // A worker process inside the critical section (so holding the lock), waited for up to 2 s.
  std::vector<pid_t>::iterator holder() {
    for (auto until = Clock::now() + 2s; Clock::now() < until; std::this_thread::sleep_for(200us)) {
      for (auto pid : {resource_->peek().holder_pid, occupancy_->peek().holder_pid}) {
        auto it = std::find(workers_.begin(), workers_.end(), static_cast<pid_t>(pid));
        if (pid != 0 && it != workers_.end()) return it;
      }
    }
    return workers_.end();
  }

  void chaos_kill() {
    auto it = holder();
    if (it == workers_.end()) return;
    auto before = progress();
    occupancy_->killing(*it);
    ::kill(*it, SIGKILL);
    auto t0 = Clock::now();
    dblock::test::wait_exit(*it);
    *it = spawn_worker();
    kill_ms_.push_back(until_progress(before, t0));
  }

  // Pauses the holder for twice its TTL: the others must take over (leases after the TTL;
  // session locks stay with the paused process' connection, so none may), and the resumed
  // holder must find its lease lost and its write rejected.
  void chaos_stop() {
    auto it = holder();
    if (it == workers_.end()) return;
    auto before = progress();
    ::kill(*it, SIGSTOP);
    auto t0 = Clock::now();
    double took = until_progress(before, t0, a_.ttl * 2);
    std::this_thread::sleep_until(t0 + a_.ttl * 2);
    ::kill(*it, SIGCONT);
    ++stops_;
    if (took < std::chrono::duration<double, std::milli>(a_.ttl * 2).count()) stop_ms_.push_back(took);
  }

  // The restart command runs under kRestartLimit (a failover script that hangs would otherwise
  // hold the run up to the test's timeout, which says nothing); when it fails, is stopped or is
  // slow, what it printed goes to stderr.
  void chaos_restart() {
    auto before = progress();
    auto t0 = Clock::now();
    const auto log = (dir_ / "restart.log").string();
    // Through the environment: the command and the path go through no quoting.
    ::setenv("DBLOCK_TORTURE_RESTART_CMD", a_.restart_cmd.c_str(), 1);
    ::setenv("DBLOCK_TORTURE_RESTART_LOG", log.c_str(), 1);
    const int status = std::system(
        ("timeout -k 5 " + std::to_string(kRestartLimit.count()) + " sh -c \"$DBLOCK_TORTURE_RESTART_CMD\" >\"$DBLOCK_TORTURE_RESTART_LOG\" 2>&1").c_str());
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    if (status != 0) ++failed_restarts_;
    if (status != 0 || took > 30) {
      std::fprintf(stderr, "torture: restart %zu %s after %.1f s; it printed:\n", restart_ms_.size() + 1,
                   status == 0 ? "succeeded" : WEXITSTATUS(status) == 124 ? "was stopped" : "failed", took);
      std::ifstream in(log);
      std::cerr << in.rdbuf() << std::flush;
    }
    restart_ms_.push_back(until_progress(before, t0));
  }

  // Waits up to 60 s for a worker to stop after the stop file appeared (a thread may be in a
  // slow acquire or release under the sanitizers); kills it if it hangs.
  static bool finish(pid_t pid) {
    ::kill(pid, SIGCONT);
    for (auto until = Clock::now() + 60s; Clock::now() < until; std::this_thread::sleep_for(20ms)) {
      int status;
      if (::waitpid(pid, &status, WNOHANG) == pid) return true;
    }
    std::fprintf(stderr, "torture: worker %d did not stop within 60 s; its threads:\n", static_cast<int>(pid));
    dblock::test::print_stacks(pid);
    ::kill(pid, SIGKILL);
    dblock::test::wait_exit(pid);
    return false;
  }

  Args a_;
  std::string self_;
  std::filesystem::path dir_;
  std::string resource_path_, occupancy_path_, stop_path_, name_;
  std::unique_ptr<dblock::torture::Resource> resource_;
  std::unique_ptr<dblock::torture::Occupancy> occupancy_;
  std::vector<pid_t> workers_;
  std::vector<double> kill_ms_, stop_ms_, restart_ms_;  // stop_ms_: takeovers while paused
  std::size_t stops_ = 0;
  std::size_t failed_restarts_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> a(argv + 1, argv + argc);
    if (!a.empty() && a[0] == "worker") {
      if (a.size() != 11) throw dblock::UsageError("worker takes 10 arguments");
      return worker(a);
    }
    signal(SIGPIPE, SIG_IGN);
    std::string self = std::filesystem::canonical("/proc/self/exe").string();
    return Run(parse(argc, argv), self).go();
  } catch (const dblock::UsageError& e) {
    std::cerr << "dblock_torture: " << e.what() << "\n";
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "dblock_torture: " << e.what() << "\n";
    return 1;
  }
}
