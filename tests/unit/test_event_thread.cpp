// EventThread: posted work runs in order on one thread, a throw stops nothing, wait() waits
// for a ticket (and never for itself), and the destructor runs what was still queued.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/event_thread.hpp"
#include "support/eventually.hpp"

using namespace std::chrono_literals;
using dblock::detail::EventThread;
using dblock::test::eventually;

TEST_CASE("event thread: work runs in order, on one thread, past a throw", "[unit]") {
  std::mutex m;
  std::vector<int> ran;
  std::vector<std::thread::id> threads;
  EventThread::Ticket last = 0;
  {
    EventThread events;
    for (int i = 0; i < 100; ++i)
      last = events.post([&, i] {
        {
          std::lock_guard lk(m);
          ran.push_back(i);
          threads.push_back(std::this_thread::get_id());
        }
        if (i % 10 == 0) throw std::runtime_error("a callback that throws");
      });
    CHECK(last == 100);
    events.wait(last);
    std::lock_guard lk(m);
    CHECK(ran.size() == 100);
  }
  for (int i = 0; i < 100; ++i) CHECK(ran[static_cast<std::size_t>(i)] == i);
  for (auto id : threads) CHECK(id == threads.front());
  CHECK(threads.front() != std::this_thread::get_id());
}

TEST_CASE("event thread: wait() waits for its ticket, at once for 0 or on the thread itself", "[unit]") {
  EventThread events;
  events.wait(0);  // nothing posted: no thread, no wait
  std::atomic<bool> slow_done{false}, inner_returned{false};
  auto slow = events.post([&] {
    std::this_thread::sleep_for(200ms);
    slow_done = true;
  });
  auto self = events.post([&] {
    events.wait(events.post([] {}));  // would wait for itself: returns at once
    inner_returned = true;
  });
  const auto before = std::chrono::steady_clock::now();
  events.wait(slow);
  CHECK(slow_done);
  CHECK(std::chrono::steady_clock::now() - before >= 150ms);
  events.wait(self);
  CHECK(inner_returned);
}

TEST_CASE("event thread: the destructor runs what is queued; from its own thread it does not wait", "[unit]") {
  std::atomic<int> ran{0};
  {
    EventThread events;
    for (int i = 0; i < 50; ++i)
      events.post([&] {
        std::this_thread::sleep_for(1ms);
        ran++;
      });
  }
  CHECK(ran == 50);

  // The last reference dropped by a callback, as a Client freed from its own on_lost: the
  // destructor does not join itself, and the thread still runs what was queued after it.
  std::atomic<bool> posted{false}, after{false};
  auto owned = std::make_shared<std::unique_ptr<EventThread>>(std::make_unique<EventThread>());
  (*owned)->post([owned, &posted]() mutable {
    while (!posted) std::this_thread::sleep_for(1ms);
    owned->reset();
  });
  (*owned)->post([&] { after = true; });
  owned.reset();
  posted = true;
  CHECK(eventually([&] { return after.load(); }));
}
