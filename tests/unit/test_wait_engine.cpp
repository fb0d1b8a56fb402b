// WaitEngine (src/core/wait_engine.hpp): no job waits behind another, deadlines fire in order,
// and steps share two threads.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/wait_engine.hpp"
#include "support/eventually.hpp"

using dblock::detail::Clock;
using dblock::detail::WaitEngine;
using dblock::test::eventually;
using namespace std::chrono_literals;

TEST_CASE("WaitEngine: a job that blocks holds up no other", "[wait_engine]") {
  auto& engine = WaitEngine::get();
  struct State {
    std::atomic<bool> release{false};
    std::atomic<int> running{0};
  };
  auto st = std::make_shared<State>();  // the jobs may outlive this test by a moment
  for (int i = 0; i < 4; ++i)
    engine.run([st] {
      st->running++;
      eventually([&] { return st->release.load(); }, 10s);  // an attempt waiting on the server
    });
  CHECK(eventually([&] { return st->running.load() == 4; }, 5s));
  CHECK(engine.workers() >= 4);
  st->release = true;
}

TEST_CASE("WaitEngine: deadlines run in time order on one thread", "[wait_engine]") {
  auto& engine = WaitEngine::get();
  std::mutex m;
  std::vector<int> order;
  const auto now = Clock::now();
  for (int i : {3, 1, 2})
    engine.at(now + i * 30ms, [&, i] {
      std::lock_guard lk(m);
      order.push_back(i);
    });
  REQUIRE(eventually([&] {
    std::lock_guard lk(m);
    return order.size() == 3;
  }));
  std::lock_guard lk(m);
  CHECK(order == std::vector<int>{1, 2, 3});
}

TEST_CASE("WaitEngine: steps run in turn on the few stepper threads, however many are posted", "[wait_engine]") {
  auto& engine = WaitEngine::get();
  struct State {
    std::mutex m;
    std::set<std::thread::id> threads;
    std::atomic<int> done{0};
  };
  auto st = std::make_shared<State>();
  for (int i = 0; i < 1000; ++i)
    engine.post([st] {
      {
        std::lock_guard lk(st->m);
        st->threads.insert(std::this_thread::get_id());
      }
      st->done++;
    });
  REQUIRE(eventually([&] { return st->done.load() == 1000; }));
  std::lock_guard lk(st->m);
  CHECK(st->threads.size() <= static_cast<std::size_t>(WaitEngine::steppers));
}
