#include "bench/scenarios/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <thread>

#include <fmt/format.h>

#include "bench/scenarios/fill.hpp"

namespace dblock_bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kTable = "bench_sweep";
constexpr int kAcquirers = 4;                     // threads cycling names of their own meanwhile
constexpr std::int64_t kExpiredForMs = -60'000;  // valid_until a minute in the past
constexpr std::size_t kWarmCycles = 10;           // per thread, before the measured part starts
// After each cycle a thread pauses kPaceFactor times that cycle's duration (at most kMaxPause,
// so that a stalled cycle does not silence the thread for long), so the four keep the
// database busy well under half the time and what they see is the sweep, not each other:
// four tight loops saturate SQLite's single writer lock on their own, and its busy handler
// (not a queue) then starves one of them past the 5 s statement timeout.
constexpr int kPaceFactor = 8;
constexpr auto kMaxPause = std::chrono::milliseconds(20);

const dblock::Strategy kLeaseStrategies[] = {dblock::Strategy::insert, dblock::Strategy::optimistic};

struct Phase {
  std::vector<double> samples_us;  // granted cycles that overlapped the measured part (a stalled one counts)
  std::size_t misses = 0;          // try_acquire()s of an uncontended name that were not granted meanwhile
  double seconds = 0;              // how long the measured part took
};

// One try_acquire()+release(); false when the uncontended name was not granted. Unlike
// dblock_cycle that is counted, not fatal: a sweep can delete the row an optimistic acquire
// is about to take (a free row counts as expired), and how often that happens is a result.
std::function<bool()> counted_cycle(dblock::Lock lock) {
  auto last_fence = std::make_shared<std::uint64_t>(0);
  return [lock, last_fence]() mutable {
    std::optional<dblock::Lease> lease = lock.try_acquire();
    if (!lease) return false;
    if (lease->fence() <= *last_fence)
      throw std::runtime_error(fmt::format("lock '{}': fence {} after fence {}: fences must increase",
                                           lock.name(), lease->fence(), *last_fence));
    *last_fence = lease->fence();
    lease->release();
    return true;
  };
}

// Runs one thread per cycle until `during` returns (after every thread did kWarmCycles), and
// keeps the cycles that overlapped it. Rethrows what a thread threw.
Phase run_phase(std::vector<std::function<bool()>>& cycles, const std::function<void()>& during) {
  struct Span {
    Clock::time_point from, to;
  };
  std::atomic<bool> stop{false};
  std::vector<std::vector<Span>> spans(cycles.size());
  std::vector<std::vector<Clock::time_point>> missed(cycles.size());
  std::vector<std::atomic<std::size_t>> done(cycles.size());
  std::mutex error_m;
  std::exception_ptr error;
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < cycles.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        while (!stop.load()) {
          auto from = Clock::now();
          bool granted = cycles[i]();
          auto to = Clock::now();
          if (granted) spans[i].push_back({from, to});
          else missed[i].push_back(to);
          ++done[i];
          std::this_thread::sleep_for(std::min<Clock::duration>((to - from) * kPaceFactor, kMaxPause));
        }
      } catch (...) {
        std::lock_guard lk(error_m);
        if (!error) error = std::current_exception();
        stop = true;
      }
    });
  auto warm = [&] {
    for (auto& d : done)
      if (d.load() < kWarmCycles) return false;
    return true;
  };
  while (!warm() && !stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Phase p;
  Clock::time_point t0 = Clock::now(), t1 = t0;
  std::exception_ptr main_error;
  if (!stop.load()) {
    try {
      during();
    } catch (...) {
      main_error = std::current_exception();
    }
    t1 = Clock::now();
  }
  stop = true;
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  if (main_error) std::rethrow_exception(main_error);
  p.seconds = std::chrono::duration<double>(t1 - t0).count();
  for (const auto& per_thread : spans)
    for (const auto& s : per_thread)
      if (s.from < t1 && s.to > t0)
        p.samples_us.push_back(std::chrono::duration<double, std::micro>(s.to - s.from).count());
  for (const auto& per_thread : missed)
    p.misses += static_cast<std::size_t>(std::count_if(per_thread.begin(), per_thread.end(),
                                                       [&](Clock::time_point at) { return at >= t0 && at <= t1; }));
  return p;
}

// `misses`: a line for each phase in which an uncontended try_acquire() was not granted.
std::vector<Row> sweep_backend(const FillTarget& t, Filler& filler, const Options& opt, std::size_t n_expired,
                               std::vector<std::string>& misses) {
  std::vector<Row> rows;
  auto admin = dblock::Client::open(t.url, t.options);  // creates the table; runs the sweeps
  const auto idle_for = std::chrono::milliseconds(opt.quick ? 500 : 2000);
  for (auto strategy : kLeaseStrategies) {
    const std::string label = fmt::format("{}/{} sweep", t.backend, dblock::to_string(strategy));
    std::vector<std::shared_ptr<dblock::Client>> clients;  // outlive the threads' locks
    std::vector<std::function<bool()>> cycles;
    dblock::LockOptions lock_options;
    lock_options.strategy = strategy;
    for (int k = 0; k < kAcquirers; ++k) {
      clients.push_back(dblock::Client::open(t.url, t.options));
      cycles.push_back(counted_cycle(
          clients.back()->lock(fmt::format("bench-sweep-{}-{}", dblock::to_string(strategy), k), lock_options)));
    }
    auto t0 = Clock::now();
    auto added = filler.add(1, n_expired, kExpiredForMs);
    fmt::print(stderr, "dblock-bench: {}: {} expired rows put in {} in {:.1f} s\n", label, added, kTable,
               std::chrono::duration<double>(Clock::now() - t0).count());

    // The same threads on the same table (expired rows and all), first without a sweep.
    auto phase = [&](const char* what, const std::function<void()>& during) {
      try {
        return run_phase(cycles, during);
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("{} ({}): {}", label, what, e.what()));
      }
    };
    Phase idle = phase("without a sweep", [&] { std::this_thread::sleep_for(idle_for); });
    std::size_t removed = 0;
    Phase swept = phase("during the sweep", [&] { removed = admin->sweep(); });
    auto idle_sum = summarize(idle.samples_us), swept_sum = summarize(swept.samples_us);
    fmt::print(stderr,
               "dblock-bench: {}: removed {} rows in {:.2f} s ({:.0f} rows/s); {} acquirers: p50 {:.1f} / p99 {:.1f} "
               "us without a sweep ({} cycles), p50 {:.1f} / p99 {:.1f} us during it ({} cycles)\n",
               label, removed, swept.seconds, swept.seconds > 0 ? removed / swept.seconds : 0.0, kAcquirers,
               idle_sum.p50_us, idle_sum.p99_us, idle_sum.samples, swept_sum.p50_us, swept_sum.p99_us,
               swept_sum.samples);
    for (auto [what, ph] : {std::pair{"without a sweep", &idle}, std::pair{"during the sweep", &swept}})
      if (ph->misses > 0) {
        fmt::print(stderr, "dblock-bench: warning: {}: {} try_acquire() of an uncontended name not granted {}\n",
                   label, ph->misses, what);
        misses.push_back(fmt::format("{} {} {}", label, ph->misses, what));
      }
    if (removed < added)
      fmt::print(stderr, "dblock-bench: warning: {}: the sweep removed {} of {} expired rows\n", label, removed, added);

    const std::string idle_name = fmt::format("{} no-sweep", dblock::to_string(strategy));
    Row idle_row{t.backend, idle_name, "sweep", kAcquirers, idle_sum, {Compared{idle_name, 1.0}}};
    idle_row.s.ops_per_s = idle.seconds > 0 ? static_cast<double>(idle_sum.samples) / idle.seconds : 0;
    idle_row.table_rows = n_expired;
    Row swept_row{t.backend, std::string(dblock::to_string(strategy)), "sweep", kAcquirers, swept_sum, {}};
    swept_row.s.ops_per_s = swept.seconds > 0 ? static_cast<double>(removed) / swept.seconds : 0;
    swept_row.table_rows = n_expired;
    swept_row.vs = {Compared{idle_name, idle_sum.p99_us > 0 ? swept_sum.p99_us / idle_sum.p99_us : 0}};
    rows.push_back(std::move(idle_row));
    rows.push_back(std::move(swept_row));
  }
  return rows;  // the clients go before the table is dropped
}

}  // namespace

BackendReport run_sweep(const Options& opt) {
  BackendReport rep;
  const std::size_t n_expired = opt.quick ? 5'000 : 200'000;
  std::vector<std::string> misses;
  ScratchDir dir(opt.dir, "sweep");  // the SQLite file
  for (const auto& t : fill_targets(opt, kTable, dir.path(), true)) {
    auto filler = make_filler(t, "expired-");
    filler->clear();  // what a killed run may have left
    fmt::print(stderr, "dblock-bench: {} sweep: {} at {}\n", t.backend, kTable, t.url);
    try {
      auto rows = sweep_backend(t, *filler, opt, n_expired, misses);
      rep.rows.insert(rep.rows.end(), rows.begin(), rows.end());
    } catch (...) {
      try {
        filler->clear();  // best effort: the error that brought us here is the one to report
      } catch (...) {
      }
      throw;
    }
    filler->clear();
  }
  if (rep.rows.empty()) return rep;
  rep.notes.push_back(fmt::format(
      "sweep: {} expired rows (valid_until a minute ago, put in by one bulk INSERT ... SELECT) in a lock table of "
      "its own ({}, dropped at the end), then one Client::sweep() (default batch: 1000 rows, one short "
      "transaction each; SQLite caps a batch at 500 rows and pauses 10 ms between batches); ops/s of a `<strategy>` row = rows removed / sweep time. Meanwhile {} threads, each with its "
      "own Client, run try_acquire()+release() cycles with that strategy on names of their own, each pausing {} "
      "times its last cycle's duration (at most {} ms) between cycles (four tight loops saturate SQLite's one "
      "writer lock by themselves and starve each other past the statement timeout): p50 / p99 of the "
      "cycles that overlapped the sweep; the `<strategy> no-sweep` row is the same threads on the same table for "
      "{} ms without a sweep (its ops/s: their cycles/s). ratio of a sweep row = p99 during the sweep / p99 "
      "without (p99, not p50: a stall shows in the tail). redis, redlock, zookeeper: n/a (the server expires "
      "keys / ephemeral nodes go with their session)",
      n_expired, kTable, kAcquirers, kPaceFactor, kMaxPause.count(), opt.quick ? 500 : 2000));
  std::string joined;
  for (const auto& m : misses) joined += (joined.empty() ? "" : "; ") + m;
  rep.notes.push_back(fmt::format(
      "sweep: uncontended try_acquire()s that were not granted (left out of the latencies; with acquire() the "
      "client would have retried): {}",
      joined.empty() ? std::string("none") : joined));
  return rep;
}

void print_sweep_markdown(const std::vector<Row>& rows) {
  bool any = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.scenario == "sweep"; });
  if (!any) return;
  fmt::print(
      "\n## sweep: expired rows removed by Client::sweep(), and {} acquirers on other names meanwhile\n\n"
      "| backend | strategy | expired rows | swept rows/s | sweep s | acquirers p50 / p99 us without | during "
      "the sweep | p50 ratio | p99 ratio | cycles during |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      kAcquirers);
  for (const auto& r : rows) {
    if (r.scenario != "sweep" || r.vs.empty() || r.vs[0].baseline == r.strategy) continue;  // a no-sweep row
    const Row* idle = nullptr;
    for (const auto& b : rows)
      if (b.scenario == "sweep" && b.backend == r.backend && b.strategy == r.vs[0].baseline) idle = &b;
    // The CSV's ratio is on p99; the p50 one shows a stall that lasts the whole sweep.
    std::string p50_ratio = idle && idle->s.p50_us > 0 ? fmt::format("{:.2f}", r.s.p50_us / idle->s.p50_us) : "-";
    fmt::print("| {} | {} | {} | {:.0f} | {:.2f} | {} | {:.0f} / {:.0f} | {} | {:.2f} | {} |\n", r.backend,
               r.strategy, r.table_rows, r.s.ops_per_s,
               r.s.ops_per_s > 0 ? static_cast<double>(r.table_rows) / r.s.ops_per_s : 0,
               idle ? fmt::format("{:.0f} / {:.0f}", idle->s.p50_us, idle->s.p99_us) : std::string("-"), r.s.p50_us,
               r.s.p99_us, p50_ratio, r.vs[0].ratio, r.s.samples);
  }
  fmt::print("\nredis, redlock, zookeeper: n/a (the server expires keys / ephemeral nodes go with their session)\n");
  std::fflush(stdout);
}

}  // namespace dblock_bench
