#include "bench/floors/floor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "bench/scenarios/handoff_tally.hpp"
#include "bench/support/run.hpp"  // kHandoffWorkers

namespace dblock_bench {

namespace {

struct Floor final : HandoffTally, FloorWakes {
  explicit Floor(const std::string& label) : HandoffTally(label) {}

  // One per thread, so that a release wakes its thread alone: a shared one woke all eight
  // threads at every event, and on two vCPUs that herd cost more than the hand-off.
  std::vector<std::condition_variable> turn = std::vector<std::condition_variable>(kHandoffWorkers);
  bool listening = false;
  std::deque<int> waiting;  // threads waiting for a release, in arrival order
  std::vector<char> woken = std::vector<char>(kHandoffWorkers);  // per thread: a release was handed to it

  void ready() override {
    std::lock_guard lk(m);
    listening = true;
    cv.notify_all();
  }
  void one() override {
    std::lock_guard lk(m);
    wake_one();
  }
  bool stopped() override {
    std::lock_guard lk(m);
    return stop;
  }

  // A release reaches the longest waiting thread only (under m).
  void wake_one() {
    if (waiting.empty()) return;
    const auto next = static_cast<std::size_t>(waiting.front());
    waiting.pop_front();
    woken[next] = 1;
    turn[next].notify_one();
  }
  void leave(int i) {  // under m: no longer waiting; a wake it got goes to the next one
    waiting.erase(std::remove(waiting.begin(), waiting.end(), i), waiting.end());
    if (woken[static_cast<std::size_t>(i)]) {
      woken[static_cast<std::size_t>(i)] = 0;
      wake_one();
    }
  }

 private:
  void on_stop() override {
    for (auto& t : turn) t.notify_all();
  }
};

void worker(int i, FloorSession& session, Floor& f, bool wake_after_release, std::size_t warmup,
            std::size_t n) {
  try {
    const auto me = static_cast<std::size_t>(i);
    for (;;) {
      std::uint64_t fence = 0;
      for (;;) {  // contend: queued before each attempt, so a release during it is not missed
        {
          std::lock_guard lk(f.m);
          if (f.stop) {
            f.leave(i);
            return;
          }
          if (std::find(f.waiting.begin(), f.waiting.end(), i) == f.waiting.end()) f.waiting.push_back(i);
          f.woken[me] = 0;
        }
        fence = session.grant();
        if (fence > 0) break;
        std::unique_lock lk(f.m);
        f.turn[me].wait_for(lk, std::chrono::milliseconds(100), [&] { return f.stop || f.woken[me]; });
      }
      const auto got = HandoffTally::Clock::now();
      std::size_t granted = 0;
      bool quit;
      {
        std::lock_guard lk(f.m);
        f.leave(i);
        quit = f.stop;  // the run ended meanwhile: this grant is not counted
        if (!quit) {
          f.granted(fence, got, warmup, n);
          granted = f.grants;
          f.released_at = HandoffTally::Clock::now();
        }
      }
      session.release(fence);
      if (quit) return;
      std::unique_lock lk(f.m);
      if (wake_after_release) f.wake_one();
      // No barging: contend again only once another thread got the lock.
      f.cv.wait(lk, [&] { return f.stop || f.grants > granted; });
      if (f.stop) return;
    }
  } catch (...) {
    f.fail(std::current_exception());
  }
}

}  // namespace

std::vector<double> run_floor_handoff(const FloorSpec& spec, std::size_t warmup, std::size_t n) {
  fmt::print(stderr, "dblock-bench: {}: {} threads, {} + {} warm-up hand-offs\n", spec.label, kHandoffWorkers,
             n, warmup);
  std::vector<std::unique_ptr<FloorSession>> sessions;  // outlive the threads
  for (int i = 0; i < kHandoffWorkers; ++i) sessions.push_back(spec.open(i));
  Floor f(spec.label);
  f.samples.reserve(n);
  std::vector<std::thread> threads;
  if (spec.listen) {
    threads.emplace_back([&] {
      try {
        spec.listen(f);
      } catch (...) {
        f.fail(std::current_exception());
      }
    });
    std::unique_lock lk(f.m);
    f.cv.wait(lk, [&] { return f.listening || f.stop; });
  }
  for (int i = 0; i < kHandoffWorkers; ++i)
    threads.emplace_back(worker, i, std::ref(*sessions[static_cast<std::size_t>(i)]), std::ref(f),
                         !spec.listen, warmup, n);
  f.await(threads, n);
  auto s = summarize(f.samples);
  fmt::print(stderr, "dblock-bench: {}: {} hand-offs, p50 {:.1f} us, p99 {:.1f} us\n", spec.label, s.samples,
             s.p50_us, s.p99_us);
  return std::move(f.samples);
}

void place_floor_row(std::vector<Row>& rows, Row floor, const std::string& baseline,
                     const std::vector<std::string>& strategies) {
  for (const auto& r : rows)
    if (r.strategy == baseline && r.scenario == "uncontended") floor.vs = {compare(floor, r)};
  for (auto& r : rows)
    if (r.scenario == "handoff" &&
        std::find(strategies.begin(), strategies.end(), r.strategy) != strategies.end()) {
      r.vs.insert(r.vs.begin(), compare(r, floor));
      r.shown = 1;
    }
  auto at = std::find_if(rows.begin(), rows.end(), [](const Row& r) { return r.scenario == "handoff"; });
  rows.insert(at, std::move(floor));
}

}  // namespace dblock_bench
