#include "bench/scenarios/shapes.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/scenarios/contended.hpp"  // CorrectnessViolation
#include "bench/support/proc.hpp"

namespace dblock_bench {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// As in the contended scenario: far above any healthy wait, so a timeout shows as a count.
constexpr std::chrono::milliseconds kGenerousWait{60'000};
constexpr int kProcesses = 2;  // 8 workers = 2 processes x 4 threads: contention crosses processes

// Who holds the name right now, across the worker processes: a file mapped MAP_SHARED and
// changed only with the __atomic builtins (lock-free on every platform the bench runs on).
// A holder counts itself in after its grant and out before its release, so with a correct
// lock the counts never show holders that may not hold together.
struct Occupancy {
  std::int64_t readers;
  std::int64_t exclusive;  // writers, exclusive lockers, a semaphore's holders
  std::uint64_t max_fence;  // the highest fence any holder has been granted
};
static_assert(__atomic_always_lock_free(sizeof(std::int64_t), nullptr), "the map's counters need lock-free atomics");

class OccupancyMap {
 public:
  OccupancyMap(const std::string& path, bool create) {
    Fd f(open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0), 0600));
    if (f.fd < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    if (create && ftruncate(f.fd, sizeof(Occupancy)) != 0)
      throw std::runtime_error(fmt::format("cannot size {}: {}", path, std::strerror(errno)));
    void* p = mmap(nullptr, sizeof(Occupancy), PROT_READ | PROT_WRITE, MAP_SHARED, f.fd, 0);
    if (p == MAP_FAILED) throw std::runtime_error(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
    occ_ = static_cast<Occupancy*>(p);  // ftruncate zero-filled it: no holders, fence 0
  }
  ~OccupancyMap() { munmap(occ_, sizeof(Occupancy)); }
  OccupancyMap(const OccupancyMap&) = delete;
  OccupancyMap& operator=(const OccupancyMap&) = delete;
  Occupancy* get() const { return occ_; }

 private:
  Occupancy* occ_ = nullptr;
};

std::int64_t load(const std::int64_t& v) { return __atomic_load_n(&v, __ATOMIC_SEQ_CST); }

void raise_max_fence(Occupancy* occ, std::uint64_t fence) {
  std::uint64_t seen = __atomic_load_n(&occ->max_fence, __ATOMIC_SEQ_CST);
  while (seen < fence &&
         !__atomic_compare_exchange_n(&occ->max_fence, &seen, fence, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
}

struct ThreadResult {
  char role = 'x';  // 's': a reader; 'x': an exclusive locker, a writer or a semaphore's holder
  std::uint64_t grants = 0, timeouts = 0;
  std::vector<double> waits_us, releases_us;
  std::vector<std::string> violations;  // the first few
  std::uint64_t violation_count = 0;
  std::string error;
  void violation(std::string what) {
    if (++violation_count <= 3) violations.push_back(std::move(what));
  }
};

double micros_1dp(Clock::duration d) {
  return std::round(std::chrono::duration<double, std::micro>(d).count() * 10) / 10;
}

// Counts the holder in and checks what may hold beside it. The increment comes before the
// look at the other count, on both sides (seq_cst), so two holders that overlap cannot both
// miss each other.
void check_in(ThreadResult& out, Occupancy* occ, std::uint32_t permits, std::uint64_t fence) {
  if (out.role == 's') {
    __atomic_add_fetch(&occ->readers, 1, __ATOMIC_SEQ_CST);
    if (auto x = load(occ->exclusive); x > 0)
      out.violation(fmt::format("a reader (fence {}) held beside {} exclusive holder(s)", fence, x));
  } else {
    auto n = __atomic_add_fetch(&occ->exclusive, 1, __ATOMIC_SEQ_CST);
    if (n > static_cast<std::int64_t>(permits))
      out.violation(fmt::format("{} exclusive holders at once (fence {}), permits {}", n, fence, permits));
    if (auto r = load(occ->readers); r > 0)
      out.violation(fmt::format("an exclusive holder (fence {}) held beside {} reader(s)", fence, r));
    // A writer's fence is above every fence granted before it; a semaphore's holders record
    // theirs concurrently, so among them only the count is checked.
    if (auto seen = __atomic_load_n(&occ->max_fence, __ATOMIC_SEQ_CST); permits == 1 && fence <= seen)
      out.violation(fmt::format("fence {} granted to an exclusive holder after fence {}", fence, seen));
  }
  raise_max_fence(occ, fence);
}

void check_out(const ThreadResult& out, Occupancy* occ) {
  __atomic_sub_fetch(out.role == 's' ? &occ->readers : &occ->exclusive, 1, __ATOMIC_SEQ_CST);
}

void shape_thread(dblock::Lock lock, std::uint32_t permits, Occupancy* occ, Clock::time_point until,
                  std::chrono::milliseconds hold, ThreadResult& out) {
  try {
    while (Clock::now() < until) {
      auto asked = Clock::now();
      std::optional<dblock::Lease> lease =
          out.role == 's' ? lock.try_acquire_shared(kGenerousWait) : lock.try_acquire(kGenerousWait);
      auto held = Clock::now();
      if (!lease) {
        ++out.timeouts;
        continue;
      }
      out.waits_us.push_back(micros_1dp(held - asked));
      check_in(out, occ, permits, lease->fence());
      if (hold.count() > 0) std::this_thread::sleep_for(hold);
      check_out(out, occ);
      auto releasing = Clock::now();
      lease->release();  // throws LockLostError if the lease was gone meanwhile
      out.releases_us.push_back(micros_1dp(Clock::now() - releasing));
      ++out.grants;
    }
  } catch (const std::exception& e) {
    out.error = e.what();
  }
}

}  // namespace

// argv: --shape-worker STRATEGY NAME ROLES PERMITS MILLIS HOLD_MS MAP_FILE TABLE
// NOTIFICATIONS(0|1) AUTO_MIGRATE(-|0|1); ROLES has one letter per thread, `s` (a reader) or
// `x` (exclusive); the URL in $DBLOCK_BENCH_WORKER_URL.
int shape_worker_main(int argc, char** argv) {
  return report_worker([&] {
    if (argc != 12)
      throw std::runtime_error("usage: --shape-worker STRATEGY NAME ROLES PERMITS MILLIS HOLD_MS FILE TABLE N M");
    const char* url = worker_url();
    const std::string name = argv[3], roles = argv[4];
    dblock::LockOptions lock_options;
    lock_options.strategy = dblock::parse_strategy(argv[2]);
    lock_options.permits = static_cast<std::uint32_t>(std::stoul(argv[5]));
    const std::chrono::milliseconds run_for(std::stoll(argv[6])), hold(std::stoll(argv[7]));
    OccupancyMap map(argv[8], false);
    dblock::ClientOptions options;
    options.table = argv[9];
    options.notifications = std::string(argv[10]) == "1";
    if (std::string(argv[11]) != "-") options.auto_migrate = std::string(argv[11]) == "1";

    // Opened one after the other on this thread, as in the contended workers: the MySQL
    // driver's first connect is not thread-safe, and the setup is not what is measured.
    std::vector<std::shared_ptr<dblock::Client>> clients;
    std::vector<dblock::Lock> locks;
    for (std::size_t i = 0; i < roles.size(); ++i) {
      clients.push_back(dblock::Client::open(url, options));
      locks.push_back(clients.back()->lock(name, lock_options));
    }
    worker_ready_then_wait();

    const auto start = Clock::now(), until = start + run_for;
    std::vector<ThreadResult> results(roles.size());
    std::vector<std::thread> pool;
    for (std::size_t i = 0; i < roles.size(); ++i) {
      results[i].role = roles[i];
      pool.emplace_back(shape_thread, locks[i], lock_options.permits, map.get(), until, hold, std::ref(results[i]));
    }
    for (auto& t : pool) t.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

    json out = {{"elapsed_s", elapsed}, {"threads", json::array()}};
    for (const auto& r : results)
      out["threads"].push_back({{"role", std::string(1, r.role)},
                                {"grants", r.grants},
                                {"timeouts", r.timeouts},
                                {"waits_us", r.waits_us},
                                {"releases_us", r.releases_us},
                                {"violations", r.violations},
                                {"violation_count", r.violation_count},
                                {"error", r.error}});
    return out;
  });
}

namespace {

// One contender line-up, its samples pooled over the rounds.
struct ShapeSeries {
  std::string scenario;  // the rows' scenario: exclusive, shared, semaphore
  std::string key;       // in the lock's name
  std::string roles;     // one letter per worker, kShapeWorkers / kProcesses per process
  std::uint32_t permits = 1;
  std::vector<std::uint64_t> grants = std::vector<std::uint64_t>(kShapeWorkers);  // per worker
  std::vector<double> waits_us[2], releases_us[2];  // [0]: readers, [1]: exclusive holders
  double elapsed_s = 0;  // summed over the rounds (each: its longest worker's run)
  std::uint64_t timeouts = 0;
};

ShapeSeries make_series(std::string scenario, std::string key, std::string roles, std::uint32_t permits) {
  ShapeSeries s;
  s.scenario = std::move(scenario);
  s.key = std::move(key);
  s.roles = std::move(roles);
  s.permits = permits;
  return s;
}

int role_index(char role) { return role == 's' ? 0 : 1; }

void run_round(ShapeSeries& series, const std::string& label, const std::string& url,
               const dblock::ClientOptions& options, dblock::Strategy strategy, const std::string& name,
               double seconds, std::chrono::milliseconds hold, const std::string& map_path) {
  OccupancyMap map(map_path, true);
  const std::size_t per_process = series.roles.size() / kProcesses;
  std::vector<std::vector<std::string>> argvs;
  for (int p = 0; p < kProcesses; ++p)
    argvs.push_back({"dblock-bench", kShapeWorkerFlag, std::string(dblock::to_string(strategy)), name,
                     series.roles.substr(static_cast<std::size_t>(p) * per_process, per_process),
                     std::to_string(series.permits), std::to_string(static_cast<long long>(seconds * 1000)),
                     std::to_string(hold.count()), map_path, options.table, options.notifications ? "1" : "0",
                     options.auto_migrate ? (*options.auto_migrate ? "1" : "0") : "-"});
  std::string failure;
  auto outputs = run_workers(argvs, url, failure);

  double elapsed = 0;
  std::size_t slot = 0;
  for (const auto& w : outputs) {
    if (!failure.empty()) break;
    json j = json::parse(w.line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      failure = fmt::format("worker {} gave no result (exit status {})", w.pid, w.status);
      break;
    }
    if (j.contains("error")) {
      failure = j["error"].get<std::string>();
      break;
    }
    elapsed = std::max(elapsed, j["elapsed_s"].get<double>());
    for (const auto& t : j["threads"]) {
      if (const auto& e = t["error"].get<std::string>(); !e.empty() && failure.empty()) failure = e;
      if (t["violation_count"].get<std::uint64_t>() > 0)
        throw CorrectnessViolation(fmt::format("CORRECTNESS VIOLATION in {} on lock '{}': {} violation(s), first: {}",
                                               label, name, t["violation_count"].get<std::uint64_t>(),
                                               t["violations"].at(0).get<std::string>()));
      const int r = role_index(t["role"].get<std::string>().at(0));
      series.grants.at(slot++) += t["grants"].get<std::uint64_t>();
      series.timeouts += t["timeouts"].get<std::uint64_t>();
      for (const auto& v : t["waits_us"]) series.waits_us[r].push_back(v.get<double>());
      for (const auto& v : t["releases_us"]) series.releases_us[r].push_back(v.get<double>());
    }
  }
  if (!failure.empty()) throw std::runtime_error(fmt::format("{}: worker failed: {}", label, failure));
  if (auto* occ = map.get(); load(occ->readers) != 0 || load(occ->exclusive) != 0)
    throw std::runtime_error(fmt::format("{}: the holders' counts did not return to 0", label));
  series.elapsed_s += elapsed;
}

// The row of the workers of `series` with role `role` (both roles: all of them).
Row row_of(const std::string& backend, const std::string& strategy, const ShapeSeries& series, char role,
           std::string holders) {
  const int r = role_index(role);
  std::vector<std::uint64_t> grants;
  for (std::size_t i = 0; i < series.roles.size(); ++i)
    if (series.roles[i] == role) grants.push_back(series.grants[i]);
  const auto total = std::accumulate(grants.begin(), grants.end(), std::uint64_t{0});
  Row row{backend, strategy, series.scenario, static_cast<int>(grants.size()), summarize(series.waits_us[r]), {}};
  row.s.ops_per_s = series.elapsed_s > 0 ? static_cast<double>(total) / series.elapsed_s : 0;
  row.min_grants = grants.empty() ? 0 : *std::min_element(grants.begin(), grants.end());
  row.max_grants = grants.empty() ? 0 : *std::max_element(grants.begin(), grants.end());
  row.release_p50_us = summarize(series.releases_us[r]).p50_us;
  row.holders = std::move(holders);
  row.own_table = true;
  return row;
}

// Which selected shapes `strategy` offers, asked of the library itself (a UsageError before
// anything is sent, for a shape it lacks); `why` gets the refusals.
struct Offered {
  bool shared = false, semaphore = false;
  std::string why;
};

Offered offered_shapes(dblock::Client& admin, dblock::Strategy strategy, const std::string& probe_name,
                       bool want_shared, bool want_semaphore) {
  Offered o;
  dblock::LockOptions lo;
  lo.strategy = strategy;
  auto refused = [&](const dblock::UsageError& e) { o.why += fmt::format("{}{}", o.why.empty() ? "" : "; ", e.what()); };
  if (want_shared) {
    try {
      auto lease = admin.lock(probe_name, lo).try_acquire_shared();
      if (lease) lease->release();
      o.shared = true;
    } catch (const dblock::UsageError& e) {
      refused(e);
    }
  }
  if (want_semaphore) {
    try {
      lo.permits = kShapePermits;
      (void)admin.lock(probe_name, lo);
      o.semaphore = true;
    } catch (const dblock::UsageError& e) {
      refused(e);
    }
  }
  return o;
}

std::size_t shape_rounds(const Options& opt) { return opt.quick ? 1 : 3; }
double shape_seconds_per_round(const Options& opt) { return opt.quick ? 0.3 : 1.0; }

}  // namespace

BackendReport run_shape_scenarios(const std::string& backend, const std::string& url,
                                  const dblock::ClientOptions& options,
                                  const std::vector<dblock::Strategy>& strategies, const Options& opt) {
  BackendReport rep;
  const bool want_shared = opt.wants_scenario("shared"), want_semaphore = opt.wants_scenario("semaphore");
  if (!want_shared && !want_semaphore) return rep;
  std::string dir = "/tmp/dblock-bench-shapes.XXXXXX";  // the occupancy maps
  if (!mkdtemp(dir.data())) throw std::runtime_error(fmt::format("mkdtemp {}: {}", dir, std::strerror(errno)));
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};

  dblock::ClientOptions worker_options = options;
  if (opt.shape_polling) worker_options.notifications = false;
  auto admin = dblock::Client::open(url, options);
  const std::chrono::milliseconds hold(opt.shape_hold_ms);
  std::string skipped, timeouts;
  for (auto strategy : strategies) {
    const std::string s(dblock::to_string(strategy));
    const Offered offered =
        offered_shapes(*admin, strategy, fmt::format("bench-shape-{}-probe", s), want_shared, want_semaphore);
    if (!offered.shared && !offered.semaphore) {
      fmt::print(stderr, "dblock-bench: {}/{}: shared and semaphore scenarios skipped: {}\n", backend, s,
                 offered.why);
      skipped += fmt::format("{}{} ({})", skipped.empty() ? "" : ", ", s, offered.why);
      continue;
    }
    std::vector<ShapeSeries> series;
    series.push_back(make_series("exclusive", "exclusive", "xxxxxxxx", 1));
    if (offered.shared) {
      series.push_back(make_series("shared", "readers", "ssssssss", 1));
      series.push_back(make_series("shared", "mixed", "xsssssss", 1));  // the writer: thread 0 of process 0
    }
    if (offered.semaphore) series.push_back(make_series("semaphore", "semaphore", "xxxxxxxx", kShapePermits));
    for (const auto& se : series) admin->force_release(fmt::format("bench-shape-{}-{}", s, se.key));

    const std::size_t rounds = shape_rounds(opt);
    fmt::print(stderr, "dblock-bench: {}/{} shapes: {} series x {} round(s) of {:.1f} s, {} workers ({} processes), "
               "hold {} ms{}\n", backend, s, series.size(), rounds, shape_seconds_per_round(opt), kShapeWorkers,
               kProcesses, hold.count(), worker_options.notifications ? "" : ", notifications off");
    for (std::size_t round = 0; round < rounds; ++round)
      for (std::size_t k = 0; k < series.size(); ++k) {
        auto& se = series[(round + k) % series.size()];
        const std::string label = fmt::format("{}/{} {} ({})", backend, s, se.scenario, se.key);
        run_round(se, label, url, worker_options, strategy, fmt::format("bench-shape-{}-{}", s, se.key),
                  shape_seconds_per_round(opt), hold, fmt::format("{}/map-{}-{}", dir, s, se.key));
      }

    std::vector<Row> rows;
    for (const auto& se : series) {
      if (se.key == "exclusive") rows.push_back(row_of(backend, s, se, 'x', kShapeHolders[0]));
      if (se.key == "readers") rows.push_back(row_of(backend, s, se, 's', kShapeHolders[1]));
      if (se.key == "mixed") {
        rows.push_back(row_of(backend, s, se, 's', kShapeHolders[2]));
        rows.push_back(row_of(backend, s, se, 'x', kShapeHolders[3]));
      }
      if (se.key == "semaphore") rows.push_back(row_of(backend, s, se, 'x', kShapeHolders[4]));
      if (se.timeouts)
        timeouts += fmt::format("{}{} {}: {}", timeouts.empty() ? "" : ", ", s, se.key, se.timeouts);
    }
    const Row baseline = rows.front();
    for (auto& row : rows) {
      Compared c;
      c.baseline = s + " exclusive";
      c.ratio = baseline.s.ops_per_s > 0 ? row.s.ops_per_s / baseline.s.ops_per_s : 0;
      row.vs.push_back(c);
      fmt::print(stderr,
                 "dblock-bench: {}/{} {}: {:.0f} grants/s ({:.2f}x 8 exclusive), wait p50 {:.1f} us, p99 {:.1f} us, "
                 "release p50 {:.1f} us, grants per worker {}..{}\n",
                 backend, s, row.holders, row.s.ops_per_s, c.ratio, row.s.p50_us, row.s.p99_us,
                 row.release_p50_us.value_or(0), row.min_grants, row.max_grants);
      rep.rows.push_back(std::move(row));
    }
  }
  if (!skipped.empty())
    rep.notes.push_back(fmt::format("{}: shared and semaphore scenarios skipped for {}", backend, skipped));
  if (!timeouts.empty())
    rep.notes.push_back(fmt::format("{} shape waits that timed out after {} s (not counted as grants): {}", backend,
                                    kGenerousWait.count() / 1000, timeouts));
  return rep;
}

void print_shapes_table(const std::vector<Row>& rows, const Options& opt) {
  auto is_shape = [](const Row& r) {
    return r.scenario == "exclusive" || r.scenario == "shared" || r.scenario == "semaphore";
  };
  if (std::none_of(rows.begin(), rows.end(), is_shape)) return;
  fmt::print(
      "\n## Lock shapes: 8 workers on one name, exclusive vs read/write vs semaphore\n\n"
      "- {} workers = {} worker processes x {} threads, each thread with its own Client, loop on acquire "
      "(wait up to {} s), hold {} ms, release{}, on ONE name per line-up: `8 exclusive` (try_acquire: the "
      "baseline), `8 readers` (try_acquire_shared), `7 readers + 1 writer` (the writer is one worker looping on "
      "try_acquire; a row each for the readers and the writer) and `8 on {} permits` (LockOptions::permits = "
      "{}). A strategy's line-ups run in {} round(s) of {:.1f} s, the order rotated each round. grants/s = the "
      "row's grants / the rounds' time; wait = from asking to holding (us); release = the release() call (us). "
      "ratio = grants/s / the same strategy's `8 exclusive` grants/s. Every holder counted itself in a shared "
      "map while it held (no reader beside a writer, at most N permit holders, a writer's fence above every "
      "fence before it): every row passed (a failure stops the run with exit status 1)\n\n",
      kShapeWorkers, kProcesses, kShapeWorkers / kProcesses, kGenerousWait.count() / 1000, opt.shape_hold_ms,
      opt.shape_polling ? " (--shape-polling: every Client opened with notifications = false, waiters poll)" : "",
      kShapePermits, kShapePermits, shape_rounds(opt), shape_seconds_per_round(opt));
  fmt::print("| backend | strategy | holders | grants/s | p50 wait us | p99 wait us | p50 release us | grants/worker min..max | ratio |\n");
  fmt::print("|---|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    if (!is_shape(r)) continue;
    fmt::print("| {} | {} | {} | {:.0f} | {:.1f} | {:.1f} | {:.1f} | {}..{} | {} |\n", r.backend, r.strategy,
               r.holders, r.s.ops_per_s, r.s.p50_us, r.s.p99_us, r.release_p50_us.value_or(0), r.min_grants,
               r.max_grants, r.vs.empty() ? std::string("-") : fmt::format("{:.2f}", r.vs.front().ratio));
  }
  std::string lines;
  for (const auto& r : rows)
    if (r.scenario == "shared" && r.holders == kShapeHolders[1] && !r.vs.empty())
      lines += fmt::format("- {} {}: 8 readers {:.0f} grants/s = {:.2f}x 8 exclusive lockers: {}\n", r.backend,
                           r.strategy, r.s.ops_per_s, r.vs.front().ratio, r.vs.front().ratio >= 4 ? "met" : "NOT met");
  if (!lines.empty())
    fmt::print("\n### Readers alone: 8 readers' grants/s / 8 exclusive lockers' (target: at least 4x)\n\n{}", lines);
  std::fflush(stdout);
}

}  // namespace dblock_bench
