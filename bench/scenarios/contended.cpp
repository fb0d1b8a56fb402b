#include "bench/scenarios/contended.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/support/proc.hpp"

namespace dblock_bench {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// A waiter gives up after this long; far above any wait a healthy run sees, so a timeout
// shows up as a count in the report rather than as lost throughput.
constexpr std::chrono::milliseconds kGenerousWait{60'000};

// The record every holder reads, bumps and writes back while it holds the lock: with a
// correct lock, `count` ends equal to the grants and each fence is above `last_fence`.
struct SharedRecord {
  std::uint64_t count = 0;
  std::uint64_t last_fence = 0;
};

// pread/pwrite on the file, not atomics: the read, +1, write is deliberately not atomic,
// so that two holders at once lose an increment and the count shows it.
SharedRecord read_record(int fd) {
  SharedRecord r;
  if (pread(fd, &r, sizeof r, 0) != static_cast<ssize_t>(sizeof r))
    throw std::runtime_error(fmt::format("cannot read the shared counter: {}", std::strerror(errno)));
  return r;
}

void write_record(int fd, const SharedRecord& r) {
  if (pwrite(fd, &r, sizeof r, 0) != static_cast<ssize_t>(sizeof r))
    throw std::runtime_error(fmt::format("cannot write the shared counter: {}", std::strerror(errno)));
}

// 1 = 1 process x 1 thread, 4 = 2 x 2, 16 = 4 x 4, 64 = 4 x 16 (other counts of --workers:
// 2 processes from 4 workers, 4 from 16, fewer where they do not divide the count): processes,
// so that contention crosses processes, but few of them, so that 64 workers fit on a small machine.
std::pair<int, int> processes_and_threads(int workers) {
  int procs = workers >= 16 ? 4 : workers >= 4 ? 2 : 1;
  while (workers % procs != 0) procs /= 2;
  return {procs, workers / procs};
}

struct WorkerResult {  // one worker thread's
  std::uint64_t grants = 0, timeouts = 0;
  std::vector<double> waits_us;
  std::vector<std::string> violations;  // fences that did not increase (the first few)
  std::uint64_t violation_count = 0;
  std::string error;
};

void worker_thread(dblock::Lock lock, int counter_fd, Clock::time_point until, WorkerResult& out) {
  try {
    while (Clock::now() < until) {
      auto asked = Clock::now();
      std::optional<dblock::Lease> lease = lock.try_acquire(kGenerousWait);
      auto held = Clock::now();
      if (!lease) {
        ++out.timeouts;
        continue;
      }
      out.waits_us.push_back(std::round(std::chrono::duration<double, std::micro>(held - asked).count() * 10) / 10);
      SharedRecord r = read_record(counter_fd);
      if (lease->fence() <= r.last_fence) {
        if (++out.violation_count <= 3)
          out.violations.push_back(fmt::format("fence {} granted after fence {}", lease->fence(), r.last_fence));
      }
      r.count += 1;
      r.last_fence = std::max(r.last_fence, lease->fence());
      write_record(counter_fd, r);
      lease->release();  // throws LockLostError if the lease was gone meanwhile
      ++out.grants;
    }
  } catch (const std::exception& e) {
    out.error = e.what();
  }
}

}  // namespace

// argv: --contended-worker STRATEGY NAME THREADS MILLIS COUNTER_FILE TABLE NOTIFICATIONS(0|1)
// AUTO_MIGRATE(-|0|1) FAIR(0|1); the URL in $DBLOCK_BENCH_WORKER_URL.
int contended_worker_main(int argc, char** argv) {
  return report_worker([&] {
    if (argc != 11) throw std::runtime_error("usage: --contended-worker STRATEGY NAME THREADS MILLIS FILE TABLE N M");
    const char* url = worker_url();
    dblock::LockOptions lock_options;
    lock_options.strategy = dblock::parse_strategy(argv[2]);
    const std::string name = argv[3];
    const int threads = std::stoi(argv[4]);
    const std::chrono::milliseconds run_for(std::stoll(argv[5]));
    dblock::ClientOptions options;
    options.table = argv[7];
    options.notifications = std::string(argv[8]) == "1";
    if (std::string(argv[9]) != "-") options.auto_migrate = std::string(argv[9]) == "1";
    lock_options.fair = std::string(argv[10]) != "0";
    int fd = open(argv[6], O_RDWR | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", argv[6], std::strerror(errno)));

    // Opened one after the other on this thread: the MySQL driver's first connect is not
    // thread-safe, and the setup is not what is measured.
    std::vector<std::shared_ptr<dblock::Client>> clients;
    std::vector<dblock::Lock> locks;
    for (int i = 0; i < threads; ++i) {
      clients.push_back(dblock::Client::open(url, options));
      locks.push_back(clients.back()->lock(name, lock_options));
    }
    worker_ready_then_wait();

    const auto start = Clock::now(), until = start + run_for;
    std::vector<WorkerResult> results(static_cast<std::size_t>(threads));
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i)
      pool.emplace_back(worker_thread, locks[static_cast<std::size_t>(i)], fd, until,
                        std::ref(results[static_cast<std::size_t>(i)]));
    for (auto& t : pool) t.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    close(fd);

    json out = {{"elapsed_s", elapsed}, {"threads", json::array()}};
    for (const auto& r : results)
      out["threads"].push_back({{"grants", r.grants},
                                {"timeouts", r.timeouts},
                                {"waits_us", r.waits_us},
                                {"violations", r.violations},
                                {"violation_count", r.violation_count},
                                {"error", r.error}});
    return out;
  });
}

namespace {

struct Point {
  std::vector<double> waits_us;
  std::vector<std::uint64_t> grants;  // per worker thread
  std::uint64_t timeouts = 0, counter = 0;
  double elapsed_s = 0;
};

Point run_point(const std::string& label, const std::string& url, const dblock::ClientOptions& options,
                dblock::Strategy strategy, const std::string& name, int workers, double seconds,
                const std::string& counter_path, bool fair) {
  {
    Fd f(open(counter_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (f.fd < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", counter_path, std::strerror(errno)));
    write_record(f.fd, SharedRecord{});
  }
  auto [procs, threads] = processes_and_threads(workers);
  const std::vector<std::string> args{
      "dblock-bench",
      kContendedWorkerFlag,
      std::string(dblock::to_string(strategy)),
      name,
      std::to_string(threads),
      std::to_string(static_cast<long long>(seconds * 1000)),
      counter_path,
      options.table,
      options.notifications ? "1" : "0",
      options.auto_migrate ? (*options.auto_migrate ? "1" : "0") : "-",
      fair ? "1" : "0"};
  std::string failure;
  auto outputs = run_workers(std::vector<std::vector<std::string>>(static_cast<std::size_t>(procs), args), url, failure);

  Point p;
  for (const auto& w : outputs) {
    if (!failure.empty()) continue;
    json j = json::parse(w.line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      failure = fmt::format("worker {} gave no result (exit status {})", w.pid, w.status);
      continue;
    }
    if (j.contains("error")) {
      failure = j["error"].get<std::string>();
      continue;
    }
    p.elapsed_s = std::max(p.elapsed_s, j["elapsed_s"].get<double>());
    for (const auto& t : j["threads"]) {
      if (const auto& e = t["error"].get<std::string>(); !e.empty() && failure.empty()) failure = e;
      if (t["violation_count"].get<std::uint64_t>() > 0)
        throw CorrectnessViolation(fmt::format("CORRECTNESS VIOLATION in {} on lock '{}': {} fence(s) did not increase, "
                                               "first: {}",
                                               label, name, t["violation_count"].get<std::uint64_t>(),
                                               t["violations"].at(0).get<std::string>()));
      p.grants.push_back(t["grants"].get<std::uint64_t>());
      p.timeouts += t["timeouts"].get<std::uint64_t>();
      for (const auto& w_us : t["waits_us"]) p.waits_us.push_back(w_us.get<double>());
    }
  }
  if (!failure.empty()) throw std::runtime_error(fmt::format("{}: worker failed: {}", label, failure));
  {
    Fd f(open(counter_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (f.fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", counter_path, std::strerror(errno)));
    p.counter = read_record(f.fd).count;
  }
  const auto total = std::accumulate(p.grants.begin(), p.grants.end(), std::uint64_t{0});
  if (p.counter != total)
    throw CorrectnessViolation(fmt::format(
        "CORRECTNESS VIOLATION in {} on lock '{}': {} grants, but the counter their holders bumped (read, +1, "
        "write) says {}: two holders held the lock at once",
        label, name, total, p.counter));
  return p;
}

}  // namespace

double jain(const std::vector<std::uint64_t>& x) {
  double sum = 0, squares = 0;
  for (auto v : x) sum += static_cast<double>(v), squares += static_cast<double>(v) * static_cast<double>(v);
  return squares > 0 ? sum * sum / (static_cast<double>(x.size()) * squares) : 0;
}

std::vector<int> contended_worker_counts(const Options& opt) {
  if (!opt.workers.empty()) return opt.workers;
  // --quick: 1 and 4 only, so that a --quick run of every backend stays under a minute.
  return opt.quick ? std::vector<int>{1, 4} : std::vector<int>{1, 4, 8, 16, 64};
}

// --quick: 0.3 s, enough for a few hundred grants on a fast backend; with the baselines every
// backend runs anyway, a --quick run of all six backends stays under a minute on 2 cores.
double contended_seconds(const Options& opt) { return opt.quick ? 0.3 : 3.0; }

BackendReport run_contended_scenario(const std::string& backend, const std::string& url,
                                     const dblock::ClientOptions& options,
                                     const std::vector<dblock::Strategy>& strategies, const Options& opt,
                                     const std::vector<Row>& earlier) {
  BackendReport rep;
  if (!opt.wants_scenario("contended")) return rep;
  // The counter files: a directory of our own under /tmp (the workers only need a path).
  std::string dir = "/tmp/dblock-bench-contended.XXXXXX";
  if (!mkdtemp(dir.data())) throw std::runtime_error(fmt::format("mkdtemp {}: {}", dir, std::strerror(errno)));
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};

  auto admin = dblock::Client::open(url, options);  // clears names a killed run may have left held
  std::string timeouts;
  for (auto strategy : strategies) {
    const std::string s(dblock::to_string(strategy));
    const Row* baseline = nullptr;
    for (const auto& r : earlier)
      if (r.backend == backend && r.strategy == s && r.scenario == "uncontended") baseline = &r;
    for (int workers : contended_worker_counts(opt)) {
      const std::string label = fmt::format("{}/{} contended", backend, s);
      const std::string name = fmt::format("bench-contended-{}-{}", s, workers);
      admin->force_release(name);
      auto [procs, threads] = processes_and_threads(workers);
      fmt::print(stderr, "dblock-bench: {}: {} workers ({} processes x {} threads), {:.1f} s{}\n", label,
                 workers, procs, threads, contended_seconds(opt), opt.unfair ? ", unfair (--unfair)" : "");
      Point p = run_point(label, url, options, strategy, name, workers, contended_seconds(opt),
                          fmt::format("{}/counter-{}-{}", dir, s, workers), !opt.unfair);
      const auto total = std::accumulate(p.grants.begin(), p.grants.end(), std::uint64_t{0});
      Row row{backend, s, "contended", workers, summarize(std::move(p.waits_us)), {}};
      row.s.ops_per_s = p.elapsed_s > 0 ? static_cast<double>(total) / p.elapsed_s : 0;
      row.fairness = jain(p.grants);
      row.min_grants = *std::min_element(p.grants.begin(), p.grants.end());
      row.max_grants = *std::max_element(p.grants.begin(), p.grants.end());
      row.own_table = true;
      if (baseline) row.vs.push_back(compare(row, *baseline));
      fmt::print(stderr,
                 "dblock-bench: {}: {} workers: {} grants (counter agrees), {:.0f} grants/s, wait p50 {:.1f} us, "
                 "p99 {:.1f} us, grants per worker {}..{}, Jain {:.3f}{}\n",
                 label, workers, total, row.s.ops_per_s, row.s.p50_us, row.s.p99_us, row.min_grants, row.max_grants,
                 *row.fairness, p.timeouts ? fmt::format(", {} waits timed out", p.timeouts) : "");
      if (p.timeouts)
        timeouts += fmt::format("{}{} {} workers: {}", timeouts.empty() ? "" : ", ", s, workers, p.timeouts);
      rep.rows.push_back(std::move(row));
    }
  }
  if (!timeouts.empty())
    rep.notes.push_back(fmt::format("{} contended waits that timed out after {} s (not counted as grants): {}",
                                    backend, kGenerousWait.count() / 1000, timeouts));
  return rep;
}

void print_contended_table(const std::vector<Row>& rows) {
  bool any = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.scenario == "contended"; });
  if (!any) return;
  fmt::print(
      "\n## Contended: N workers loop on acquire + release of one name\n\n"
      "- workers = threads spread over worker processes (1 = 1 x 1, 4 = 2 x 2, 16 = 4 x 4, 64 = 4 x 16), each "
      "thread with its own Client; each loops for a fixed time: try_acquire (wait up to {} s), then release at "
      "once. grants/s = all grants / the longest worker's run; wait = from asking to holding (us); grants per "
      "worker min..max, and Jain's fairness index of grants per worker (1 = equal shares, 1/workers = one "
      "worker got them all). ratio = wait p50 / the same strategy's uncontended acquire+release p50 (`-` when "
      "uncontended did not run). Every holder bumped a shared counter (read, +1, write) and checked that its "
      "fence was above the last one: every row passed (a failure stops the run with exit status 1)\n\n",
      kGenerousWait.count() / 1000);
  fmt::print("| backend | strategy | workers | grants/s | p50 wait us | p99 wait us | grants/worker min..max | fairness (Jain) | ratio |\n");
  fmt::print("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    if (r.scenario != "contended") continue;
    fmt::print("| {} | {} | {} | {:.0f} | {:.1f} | {:.1f} | {}..{} | {:.3f} | {} |\n", r.backend, r.strategy, r.workers,
               r.s.ops_per_s, r.s.p50_us, r.s.p99_us, r.min_grants, r.max_grants, r.fairness.value_or(0),
               r.vs.empty() ? std::string("-") : fmt::format("{:.2f}", r.vs.front().ratio));
  }
  std::fflush(stdout);
}

}  // namespace dblock_bench
