#include "bench/support/run.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "bench/floors/floor.hpp"
#include "bench/scenarios/contended.hpp"
#include "bench/scenarios/handoff_tally.hpp"
#include "bench/scenarios/resources.hpp"
#include "bench/scenarios/shapes.hpp"

namespace dblock_bench {

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

void run_untimed(Series& s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) s.cycle();
}

void run_timed(Series& s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    s.cycle();
    auto t1 = Clock::now();
    s.samples.push_back(micros(t1 - t0));
  }
}

}  // namespace

std::function<void()> dblock_cycle(dblock::Lock lock) {
  auto last_fence = std::make_shared<std::uint64_t>(0);
  return [lock, last_fence]() mutable {
    std::optional<dblock::Lease> lease = lock.try_acquire();
    if (!lease)
      throw std::runtime_error(fmt::format("try_acquire of uncontended lock '{}' did not acquire it", lock.name()));
    if (lease->fence() <= *last_fence)
      throw std::runtime_error(fmt::format("lock '{}': fence {} after fence {}: fences must increase",
                                           lock.name(), lease->fence(), *last_fence));
    *last_fence = lease->fence();
    lease->release();
  };
}

std::size_t interleaved_rounds(const Options& opt) {
  return std::max(opt.rounds, (opt.iterations + kBlock - 1) / kBlock);
}

std::size_t handoff_warmup(const Options& opt) { return std::clamp<std::size_t>(opt.handoffs / 10, 8, 40); }

std::size_t run_interleaved(const std::string& backend, std::vector<Series>& series, const Options& opt) {
  for (auto& s : series) {
    fmt::print(stderr, "dblock-bench: warm-up {}/{}: {} cycles\n", backend, s.strategy, opt.warmup);
    run_untimed(s, opt.warmup);
    s.samples.reserve(opt.iterations);
  }
  // Blocks are short because the kind of noise that matters here (fsync latency that flips
  // between regimes every few seconds) is slow, not per-cycle.
  const std::size_t rounds = interleaved_rounds(opt);
  const std::size_t report_every = std::max<std::size_t>(1, rounds / 5);
  for (std::size_t r = 0; r < rounds; ++r) {
    std::size_t n = opt.iterations / rounds + (r < opt.iterations % rounds ? 1 : 0);
    for (std::size_t k = 0; k < series.size(); ++k) {
      auto& s = series[(r + k) % series.size()];
      run_untimed(s, kRewarm);  // the first cycle after another connection wrote is not timed
      run_timed(s, n);
    }
    if ((r + 1) % report_every != 0 && r + 1 != rounds) continue;
    std::string line;
    for (auto& s : series) line += fmt::format(", {} p50 {:.1f} us", s.strategy, summarize(s.samples).p50_us);
    fmt::print(stderr, "dblock-bench: {} round {}/{}{}\n", backend, r + 1, rounds, line);
  }
  for (auto& s : series) {
    auto sum = summarize(s.samples);
    fmt::print(stderr, "dblock-bench: {}/{}: {} cycles, p50 {:.1f} us, p99 {:.1f} us\n", backend, s.strategy,
               sum.samples, sum.p50_us, sum.p99_us);
  }
  return rounds;
}

namespace {

// What the handoff workers share beyond the tally; every field under `m`.
struct Shared : HandoffTally {
  using HandoffTally::HandoffTally;
  Clock::time_point timed_from, timed_to;
  int holder = -1, prev_holder = -1;  // the worker that has (had) the lease, and the one before it
  std::size_t back_to_prev = 0;      // timed hand-offs won by the holder before last
  std::vector<std::size_t> wins = std::vector<std::size_t>(kHandoffWorkers);  // timed hand-offs per worker
};

// A thread that runs what it is handed, one job at a time, built as a Client's event thread
// is (a queue under a mutex, a condition variable): the `handoff-hop` series times its grants
// there.
class Hop {
 public:
  Hop() : thread_([this] { run(); }) {}
  ~Hop() {
    {
      std::lock_guard lk(m_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard lk(m_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void run() {
    std::unique_lock lk(m_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lk.unlock();
      job();
      lk.lock();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is
};

void handoff_worker(int id, dblock::Lock lock, Shared& sh, std::size_t warmup, std::size_t n,
                    std::chrono::milliseconds hold, HandoffWait wait) {
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  std::size_t released_grant = none;  // the grant this thread gave back last
  std::optional<Hop> hop;
  if (wait == HandoffWait::hop) hop.emplace();
  try {
    for (;;) {
      {
        // No barging: after its release, a thread contends again only once the lock has
        // gone to another one, so each hand-off measures a waiter getting it.
        std::unique_lock lk(sh.m);
        sh.cv.wait(lk, [&] { return sh.stop || sh.grants != released_grant; });
        if (sh.stop) return;
      }
      // Bounded, so that a stop is seen within a second; it waits like acquire() does.
      std::optional<dblock::Lease> lease;
      Clock::time_point got;
      if (wait == HandoffWait::async) {
        // Timed when the completion runs on the Client's event thread, as a service's callback
        // would be: this thread only waits there for it, a hop no service makes.
        std::promise<std::optional<dblock::Lease>> done;
        auto result = done.get_future();
        lock.async_acquire(
            [&](std::exception_ptr error, std::optional<dblock::Lease> l) {
              got = Clock::now();
              if (error) done.set_exception(error);
              else done.set_value(std::move(l));
            },
            std::chrono::seconds(1));
        lease = result.get();
      } else if (wait == HandoffWait::hop) {
        // The async series' path with a blocking acquire: the grant handed to another thread,
        // timed there, and this thread waiting for it.
        lease = lock.try_acquire(std::chrono::seconds(1));
        std::promise<void> done;
        auto timed = done.get_future();
        hop->post([&] {
          got = Clock::now();
          done.set_value();
        });
        timed.get();
      } else {
        lease = lock.try_acquire(std::chrono::seconds(1));
        got = Clock::now();
      }
      if (!lease) continue;
      bool quit = false;
      {
        std::lock_guard lk(sh.m);
        quit = sh.stop;
        if (!quit) {
          if (sh.granted(lease->fence(), got, warmup, n)) {
            if (sh.samples.size() == 1) sh.timed_from = sh.released_at;
            sh.timed_to = got;
            if (id == sh.prev_holder) ++sh.back_to_prev;
            ++sh.wins[static_cast<std::size_t>(id)];
          }
          sh.prev_holder = sh.holder;
          sh.holder = id;
          released_grant = sh.grants;
        }
      }
      if (quit) {
        lease->release();
        return;
      }
      if (hold.count() > 0) std::this_thread::sleep_for(hold);  // the waiters wait (and back off) meanwhile
      {
        std::lock_guard lk(sh.m);
        sh.released_at = Clock::now();
      }
      lease->release();
    }
  } catch (...) {
    sh.fail(std::current_exception());
  }
}

}  // namespace

HandoffResult run_handoff(const std::string& backend, const std::string& url, const dblock::ClientOptions& options,
                          dblock::Strategy strategy, const std::string& name, std::size_t warmup, std::size_t n,
                          std::chrono::milliseconds hold, bool fair, HandoffWait wait) {
  const std::string label = fmt::format("{}/{} {}", backend, dblock::to_string(strategy),
                                        wait == HandoffWait::async ? "handoff-async"
                                        : wait == HandoffWait::hop ? "handoff-hop"
                                        : options.notifications    ? "handoff"
                                                                   : "handoff-polling");
  fmt::print(stderr, "dblock-bench: {}: {} threads, {} + {} warm-up hand-offs, hold {} ms\n", label, kHandoffWorkers, n,
             warmup, hold.count());
  std::vector<std::shared_ptr<dblock::Client>> clients;  // outlive the threads
  std::vector<dblock::Lock> locks;
  dblock::LockOptions lock_options;
  lock_options.strategy = strategy;  // ttl 30s: renewals are rare and hold-independent
  lock_options.fair = fair;
  for (int i = 0; i < kHandoffWorkers; ++i) {
    clients.push_back(dblock::Client::open(url, options));
    locks.push_back(clients.back()->lock(name, lock_options));
  }
  clients.front()->force_release(name);  // a run killed on a kept --dir may have left it held

  Shared sh(label);
  sh.samples.reserve(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < kHandoffWorkers; ++i)
    threads.emplace_back(handoff_worker, i, locks[static_cast<std::size_t>(i)], std::ref(sh), warmup, n, hold, wait);
  sh.await(threads, n);

  HandoffResult r;
  r.grants = sh.grants;
  r.samples_us = std::move(sh.samples);
  auto span = std::chrono::duration<double>(sh.timed_to - sh.timed_from).count();
  r.handoffs_per_s = span > 0 ? static_cast<double>(r.samples_us.size()) / span : 0;
  r.back_to_prev =
      r.samples_us.empty() ? 0 : static_cast<double>(sh.back_to_prev) / static_cast<double>(r.samples_us.size());
  r.winners = static_cast<int>(std::count_if(sh.wins.begin(), sh.wins.end(), [](std::size_t w) { return w > 0; }));
  auto sum = summarize(r.samples_us);
  fmt::print(stderr,
             "dblock-bench: {}: {} hand-offs, p50 {:.1f} us, p99 {:.1f} us, {:.0f} hand-offs/s; {} of {} threads "
             "won one, {:.0f}% went back to the holder before last\n",
             label, sum.samples, sum.p50_us, sum.p99_us, r.handoffs_per_s, r.winners, kHandoffWorkers,
             100 * r.back_to_prev);
  return r;
}

std::vector<std::vector<double>> alternating_handoffs(const std::string& label, const std::vector<Setup>& sides,
                                                      const dblock::ClientOptions& options, dblock::Strategy strategy,
                                                      const std::string& name, const Options& opt) {
  std::vector<std::vector<double>> samples(sides.size());
  const std::size_t half = std::max<std::size_t>(opt.handoffs / 2, 1);
  for (int round = 0; round < 2; ++round)
    for (std::size_t side = 0; side < sides.size(); ++side) {
      auto h = run_handoff(fmt::format("{} {}", label, sides[side].label), sides[side].url, options, strategy, name,
                           handoff_warmup(opt), half, std::chrono::milliseconds(opt.hold_ms), !opt.unfair);
      samples[side].insert(samples[side].end(), h.samples_us.begin(), h.samples_us.end());
    }
  return samples;
}

// One more hold of a lock the thread already holds, given back at once (a re-entrant
// lock()+unlock() under an outer hold): one statement each way on the lease strategies (the
// count the server shows is written), a ping on the session strategies. One strategy after
// the other, each with only its own outer hold: a for-update hold keeps a transaction open,
// which on PostgreSQL keeps the lease rows' dead versions from being pruned and slowed every
// UPDATE of a lease strategy timed beside it.
std::vector<Row> run_reentrant_scenario(const std::string& backend, const std::string& url,
                                        const dblock::ClientOptions& options,
                                        const std::vector<dblock::Strategy>& strategies, const Options& opt,
                                        const std::vector<Row>& baselines) {
  std::vector<Row> rows;
  for (auto strategy : strategies) {
    auto client = dblock::Client::open(url, options);
    dblock::LockOptions lock_options;
    lock_options.strategy = strategy;
    auto lock = client->lock(fmt::format("bench-reentrant-{}", dblock::to_string(strategy)), lock_options);
    client->force_release(lock.name());
    auto outer = lock.try_acquire(std::chrono::seconds(10)).value();
    const auto fence = outer.fence();
    std::vector<Series> series{{std::string(dblock::to_string(strategy)), [lock, fence]() mutable {
                                  auto inner = lock.try_acquire();
                                  if (!inner || inner->fence() != fence)
                                    throw std::runtime_error(fmt::format(
                                        "lock '{}': a re-entry did not share the outer hold's fence", lock.name()));
                                  inner->release();
                                }, {}}};
    run_interleaved(backend + " reentrant", series, opt);
    Row row{backend, series[0].strategy, "reentrant", 1, summarize(series[0].samples), {}};
    for (const auto& b : baselines) row.vs.push_back(compare(row, b));
    rows.push_back(std::move(row));
  }
  return rows;
}

BackendReport run_handoff_scenarios(const std::string& backend, const std::string& url,
                                    const dblock::ClientOptions& options,
                                    const std::vector<dblock::Strategy>& strategies, const Options& opt,
                                    const std::vector<Row>& baselines, const ServerCounters& counters,
                                    const std::vector<HandoffFloor>& floors) {
  const bool notified = opt.wants_scenario("handoff"), polling = opt.wants_scenario("handoff-polling");
  const bool async = notified && opt.wants_scenario("handoff-async");
  const std::size_t warmup = handoff_warmup(opt);
  const auto hold = std::chrono::milliseconds(opt.hold_ms);
  dblock::ClientOptions polling_options = options;
  polling_options.notifications = false;
  BackendReport rep;
  std::string back_to_prev;  // the note on who won the hand-offs
  std::string per_handoff;   // the note on server counters per hand-off
  if (opt.wants_scenario("reentrant")) rep.rows = run_reentrant_scenario(backend, url, options, strategies, opt, baselines);

  // One strategy's series in a scenario, over one or more runs of run_handoff.
  struct Tally {
    std::vector<double> samples, counted;  // counted: the server counters' deltas, summed
    double span_s = 0, back_to_prev = 0;   // back_to_prev: timed hand-offs won by the holder before last
    std::size_t grants = 0;
    int winners = kHandoffWorkers;  // the fewest threads that won one, over the runs
  };
  auto run_into = [&](Tally& t, dblock::Strategy strategy, const char* scenario, const dblock::ClientOptions& o,
                      std::size_t n) {
    auto name = fmt::format("bench-{}-{}", scenario, dblock::to_string(strategy));
    std::vector<double> before;
    if (counters.read) before = counters.read();
    const std::string sc = scenario;
    auto h = run_handoff(backend, url, o, strategy, name, warmup, n, hold, !opt.unfair,
                         sc == "handoff-async" ? HandoffWait::async
                         : sc == "handoff-hop" ? HandoffWait::hop
                                               : HandoffWait::blocking);
    if (counters.read && h.grants > 0) {
      auto after = counters.read();
      t.counted.resize(counters.names.size());
      for (std::size_t i = 0; i < t.counted.size() && i < before.size() && i < after.size(); ++i)
        t.counted[i] += after[i] - before[i];
    }
    if (h.handoffs_per_s > 0) t.span_s += static_cast<double>(h.samples_us.size()) / h.handoffs_per_s;
    t.back_to_prev += h.back_to_prev * static_cast<double>(h.samples_us.size());
    t.grants += h.grants;
    t.winners = std::min(t.winners, h.winners);
    t.samples.insert(t.samples.end(), h.samples_us.begin(), h.samples_us.end());
  };
  auto row_of = [&](Tally& t, dblock::Strategy strategy, const char* scenario) {
    if (!t.counted.empty() && t.grants > 0) {
      std::string line;
      for (std::size_t i = 0; i < t.counted.size(); ++i)
        line += fmt::format("{}{:.2f} {}", line.empty() ? "" : ", ", t.counted[i] / static_cast<double>(t.grants),
                            counters.names[i]);
      fmt::print(stderr, "dblock-bench: {}/{} {}: per grant: {}\n", backend, dblock::to_string(strategy), scenario,
                 line);
      per_handoff +=
          fmt::format("{}{} {}: {}", per_handoff.empty() ? "" : "; ", dblock::to_string(strategy), scenario, line);
    }
    const auto timed = static_cast<double>(t.samples.size());
    const char* rounds = std::string(scenario) == "handoff" ? " in every round" : "";
    back_to_prev += fmt::format("{}{} {} {:.0f}% ({} of {} threads won one{})", back_to_prev.empty() ? "" : ", ",
                                dblock::to_string(strategy), scenario, timed > 0 ? 100 * t.back_to_prev / timed : 0,
                                t.winners, kHandoffWorkers, rounds);
    Row row{backend, std::string(dblock::to_string(strategy)), scenario, kHandoffWorkers, summarize(t.samples), {}};
    row.s.ops_per_s = t.span_s > 0 ? timed / t.span_s : 0;
    return row;
  };

  if (notified) {
    // The sides of a round: the strategies first (on SQLite their Clients make the lock table
    // the floor uses), then the floors; round r starts at side r.
    // handoff-async: each strategy's series twice more, through Lock::async_acquire and
    // through a blocking acquire that hands its grant to another thread (handoff-hop).
    const std::size_t series = strategies.size() * (async ? 3 : 1);
    const std::size_t sides = series + floors.size();
    const std::size_t rounds = std::min<std::size_t>(kHandoffRounds, std::max<std::size_t>(opt.handoffs, 1));
    std::vector<Tally> tallies(series);
    std::vector<std::vector<double>> floor_samples(floors.size());
    for (std::size_t round = 0; round < rounds; ++round) {
      // This round's share of opt.handoffs: the rounds add up to it.
      const std::size_t n = opt.handoffs * (round + 1) / rounds - opt.handoffs * round / rounds;
      for (std::size_t k = 0; k < sides; ++k) {
        const std::size_t side = (round + k) % sides;
        if (side < series) {
          static const char* const kinds[] = {"handoff", "handoff-async", "handoff-hop"};
          run_into(tallies[side], strategies[side % strategies.size()], kinds[side / strategies.size()], options, n);
        } else {
          auto more = floors[side - series].run(warmup, n);
          auto& into = floor_samples[side - series];
          into.insert(into.end(), more.begin(), more.end());
        }
      }
    }
    for (std::size_t i = 0; i < strategies.size(); ++i) {
      Row row = row_of(tallies[i], strategies[i], "handoff");
      for (const auto& b : baselines) row.vs.push_back(compare(row, b));
      rep.rows.push_back(std::move(row));
    }
    for (std::size_t i = 0; async && i < strategies.size(); ++i) {
      // Compared with the same strategy's blocking hand-off, timed in the same rounds (the hop
      // series too), and then the async one with the hop one.
      Row hop = row_of(tallies[2 * strategies.size() + i], strategies[i], "handoff-hop");
      Row row = row_of(tallies[strategies.size() + i], strategies[i], "handoff-async");
      const auto blocking = std::find_if(rep.rows.begin(), rep.rows.end(), [&](const Row& r) {
        return r.scenario == "handoff" && r.strategy == row.strategy;
      });
      for (Row* r : {&row, &hop}) {
        Compared c = compare(*r, *blocking);
        c.baseline = row.strategy + " handoff";
        r->vs.push_back(c);
      }
      Compared c = compare(row, hop);
      c.baseline = row.strategy + " handoff-hop";
      row.vs.push_back(c);
      rep.rows.push_back(std::move(row));
      rep.rows.push_back(std::move(hop));
    }
    for (std::size_t i = 0; i < floors.size(); ++i) {
      Row floor{backend, floors[i].label, "handoff", kHandoffWorkers, summarize(std::move(floor_samples[i])), {}};
      if (!baselines.empty()) floor.vs = {compare(floor, baselines.front())};
      place_floor_row(rep.rows, std::move(floor), "", floors[i].strategies);
    }
  }
  if (polling)
    for (auto strategy : strategies) {
      Tally t;
      run_into(t, strategy, "handoff-polling", polling_options, opt.handoffs);
      Row off = row_of(t, strategy, "handoff-polling");
      const auto on = std::find_if(rep.rows.begin(), rep.rows.end(), [&](const Row& r) {
        return r.scenario == "handoff" && r.strategy == off.strategy;
      });
      if (on != rep.rows.end()) {
        Compared c = compare(off, *on);
        c.baseline = on->strategy + " handoff";
        off.vs.push_back(c);
      }
      for (const auto& b : baselines) off.vs.push_back(compare(off, b));
      rep.rows.push_back(std::move(off));
    }
  if (!back_to_prev.empty())
    rep.notes.push_back(fmt::format(
        "{} hand-offs won by the holder before last (a thread that re-entered the race one hand-off earlier, "
        "with its backoff fresh): {}",
        backend, back_to_prev));
  if (!per_handoff.empty())
    rep.notes.push_back(fmt::format("{} server counters per grant (hand-offs and untimed grants alike; {}): {}",
                                    backend, counters.what, per_handoff));
  return rep;
}

ScratchTable::ScratchTable(std::string backend, std::function<void(const std::string& name)> drop)
    : backend_(std::move(backend)), drop_(std::move(drop)) {
  std::random_device rd;
  name_ = fmt::format("dblock_bench_{}_{:04x}", static_cast<long>(getpid()), rd() & 0xffff);
}

ScratchTable::~ScratchTable() {
  try {
    drop_(name_);
    fmt::print(stderr, "dblock-bench: {}: dropped table {}\n", backend_, name_);
  } catch (const std::exception& e) {
    fmt::print(stderr, "dblock-bench: warning: could not drop {} table {}: {}\n", backend_, name_, e.what());
  }
}

BackendReport run_server(ServerRun run, const Options& opt) {
  const std::string& backend = run.backend;
  std::vector<Series> series = std::move(run.baselines);
  const std::size_t n_baselines = series.size();
  if (n_baselines == 0 || series.front().strategy != "select1")
    throw std::logic_error(backend + ": the first baseline must be select1");
  std::vector<std::shared_ptr<dblock::Client>> clients;  // one per strategy, as on sqlite
  if (opt.wants_scenario("uncontended"))
    for (auto strategy : run.strategies) {
      auto client = clients.empty() ? run.first : dblock::Client::open(run.url, run.client_options);
      dblock::LockOptions lock_options;
      lock_options.strategy = strategy;  // ttl 30s, auto_renew: the renewal never fires in a cycle
      lock_options.fair = !opt.unfair;
      auto name = fmt::format("bench-uncontended-{}", dblock::to_string(strategy));
      series.push_back({std::string(dblock::to_string(strategy)), dblock_cycle(client->lock(name, lock_options)), {}});
      clients.push_back(std::move(client));
    }
  run_interleaved(backend, series, opt);
  if (auto held = run.first->list(); !held.empty())
    fmt::print(stderr, "dblock-bench: warning: {} {} lock(s) still held after the run, first '{}'\n", held.size(),
               backend, held.front().name);
  clients.clear();  // the uncontended clients' connections go before the hand-offs

  BackendReport rep;
  for (auto& s : series) rep.rows.push_back(Row{backend, s.strategy, "uncontended", 1, summarize(s.samples), {}});
  const Row select1_row = rep.rows[0];
  auto baseline = [&](const std::string& name) -> const Row& {
    for (std::size_t i = 0; i < n_baselines; ++i)
      if (rep.rows[i].strategy == name) return rep.rows[i];
    throw std::logic_error(fmt::format("no {} baseline {}", backend, name));
  };
  for (std::size_t i = 0; i < rep.rows.size(); ++i) {
    auto& row = rep.rows[i];
    auto it = run.compared_with.find(row.strategy);
    if (it == run.compared_with.end() && i >= n_baselines)
      throw std::logic_error(fmt::format("no {} baseline for strategy {}", backend, row.strategy));
    std::vector<Compared> vs;
    if (it != run.compared_with.end())
      for (const auto& name : it->second) vs.push_back(compare(row, baseline(name)));
    row.shown = std::max<std::size_t>(vs.size(), 1);  // its own baselines, or select1
    vs.push_back(compare(row, select1_row));
    row.vs = std::move(vs);
  }

  auto handoffs = run_handoff_scenarios(backend, run.url, run.client_options, run.strategies, opt, {select1_row},
                                        run.counters, run.floors);
  rep.rows.insert(rep.rows.end(), handoffs.rows.begin(), handoffs.rows.end());
  rep.notes.insert(rep.notes.end(), handoffs.notes.begin(), handoffs.notes.end());
  add_own_table_scenarios(rep, backend, run.url, run.client_options, run.strategies, opt);
  return rep;
}

void add_own_table_scenarios(BackendReport& rep, const std::string& backend, const std::string& url,
                             const dblock::ClientOptions& options, const std::vector<dblock::Strategy>& strategies,
                             const Options& opt) {
  auto add = [&](BackendReport more) {
    rep.rows.insert(rep.rows.end(), more.rows.begin(), more.rows.end());
    rep.notes.insert(rep.notes.end(), more.notes.begin(), more.notes.end());
  };
  add(run_contended_scenario(backend, url, options, strategies, opt, rep.rows));
  add(run_shape_scenarios(backend, url, options, strategies, opt));
  add(run_resources_scenario(backend, url, options, strategies, opt));
}

}  // namespace dblock_bench
