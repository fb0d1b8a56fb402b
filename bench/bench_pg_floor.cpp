#include "bench_pg_floor.hpp"

#ifdef DBLOCK_WITH_POSTGRESQL
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <pqxx/pqxx>

#include "bench_run.hpp"  // kHandoffWorkers
#include "bench_util.hpp"

namespace dblock_bench {

namespace {

using Clock = std::chrono::steady_clock;

struct Floor {
  std::mutex m;
  std::condition_variable cv;  // a grant, the listener in place, or the stop
  // One per thread, so that a release wakes its thread alone: a shared one woke all eight
  // threads at every event, and on two vCPUs that herd cost more than the hand-off.
  std::vector<std::condition_variable> turn;
  bool stop = false, listening = false;
  std::exception_ptr error;
  std::deque<int> waiting;  // threads waiting for a release, in arrival order
  std::vector<char> woken;  // per thread: a release was handed to it
  std::size_t grants = 0, handoffs = 0;
  std::int64_t last_fence = 0;
  Clock::time_point released_at;
  std::vector<double> samples;

  void fail(std::exception_ptr e) {
    std::lock_guard lk(m);
    if (!error) error = e;
    stop_locked();
  }
  void stop_locked() {
    stop = true;
    cv.notify_all();
    for (auto& t : turn) t.notify_all();
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
};

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& c, const std::string& channel, Floor& f)
      : pqxx::notification_receiver(c, channel), f_(f) {}
  void operator()(const std::string&, int) override {
    std::lock_guard lk(f_.m);
    f_.wake_one();
  }

 private:
  Floor& f_;
};

void listener(const std::string& url, const std::string& channel, Floor& f) {
  try {
    pqxx::connection c(url);
    Receiver r(c, channel, f);
    c.get_notifs();  // LISTEN in place before the workers start
    {
      std::lock_guard lk(f.m);
      f.listening = true;
      f.cv.notify_all();
    }
    for (;;) {
      {
        std::lock_guard lk(f.m);
        if (f.stop) return;
      }
      c.await_notification(0, 100'000);
    }
  } catch (...) {
    f.fail(std::current_exception());
  }
}

void worker(int i, const std::string& url, const FloorStatements& sql, Floor& f, std::size_t warmup, std::size_t n) {
  try {
    pqxx::connection c(url);
    c.prepare("floor_grant", sql.grant);
    c.prepare("floor_release", sql.release);
    const std::string name = "bench-floor", owner = fmt::format("floor-{}", i);
    const auto me = static_cast<std::size_t>(i);
    for (;;) {
      std::int64_t fence = 0;
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
        pqxx::result r;
        {
          pqxx::nontransaction tx(c);
          // Ticket 0: the floor keeps its own arrival order (Floor::waiting), not the table's queue.
          r = tx.exec_prepared("floor_grant", name, owner, std::int64_t{30'000}, std::int64_t{0});
        }
        fence = r.at(0).at(0).as<std::int64_t>();  // 0: busy
        if (fence > 0) break;
        std::unique_lock lk(f.m);  // a safety net of 100 ms against a lost notification
        f.turn[me].wait_for(lk, std::chrono::milliseconds(100), [&] { return f.stop || f.woken[me]; });
      }
      const auto got = Clock::now();
      std::size_t granted;
      {
        std::lock_guard lk(f.m);
        f.leave(i);
        if (fence <= f.last_fence)
          throw std::runtime_error(fmt::format("postgresql floor hand-off: fence {} granted after {}", fence,
                                               f.last_fence));
        f.last_fence = fence;
        if (f.grants > 0 && ++f.handoffs > warmup) {
          f.samples.push_back(std::chrono::duration<double, std::micro>(got - f.released_at).count());
          if (f.samples.size() >= n) f.stop_locked();
        }
        granted = ++f.grants;
        f.cv.notify_all();
        f.released_at = Clock::now();
      }
      {
        pqxx::nontransaction tx(c);
        tx.exec_prepared("floor_release", name, owner, fence);
      }
      // No barging: contend again only once another thread got the lock.
      std::unique_lock lk(f.m);
      f.cv.wait(lk, [&] { return f.stop || f.grants > granted; });
      if (f.stop) return;
    }
  } catch (...) {
    f.fail(std::current_exception());
  }
}

}  // namespace

std::vector<double> run_pg_floor_handoff(const std::string& url, const FloorStatements& sql, std::size_t warmup,
                                         std::size_t n) {
  fmt::print(stderr, "dblock-bench: postgresql/bare-notify-handoff: {} threads, {} + {} warm-up hand-offs\n",
             kHandoffWorkers, n, warmup);
  Floor f;
  f.woken.assign(kHandoffWorkers, 0);
  f.turn = std::vector<std::condition_variable>(kHandoffWorkers);
  f.samples.reserve(n);
  std::thread listening(listener, url, sql.channel, std::ref(f));
  std::vector<std::thread> threads;
  {
    std::unique_lock lk(f.m);
    f.cv.wait(lk, [&] { return f.listening || f.stop; });
  }
  for (int i = 0; i < kHandoffWorkers; ++i) threads.emplace_back(worker, i, url, std::cref(sql), std::ref(f), warmup, n);
  {
    std::unique_lock lk(f.m);
    std::size_t seen = 0;
    auto progress_at = Clock::now();
    while (!f.stop) {
      f.cv.wait_for(lk, std::chrono::seconds(1));
      if (f.grants != seen) seen = f.grants, progress_at = Clock::now();
      else if (Clock::now() - progress_at > std::chrono::minutes(1)) {
        if (!f.error) f.error = std::make_exception_ptr(std::runtime_error("postgresql floor hand-off: stuck for a minute"));
        f.stop_locked();
      }
    }
    f.stop_locked();
  }
  for (auto& t : threads) t.join();
  listening.join();
  if (f.error) std::rethrow_exception(f.error);
  auto s = summarize(f.samples);
  fmt::print(stderr, "dblock-bench: postgresql/bare-notify-handoff: {} hand-offs, p50 {:.1f} us, p99 {:.1f} us\n",
             s.samples, s.p50_us, s.p99_us);
  return std::move(f.samples);
}

}  // namespace dblock_bench

#endif
