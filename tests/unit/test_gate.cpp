// GateTable (src/core/gate.hpp): per-name, in-process, FIFO, re-entrant gates, for blocking
// waiters and queued callbacks alike.
// Worker threads never use Catch assertions (Catch2 v2 is not thread-safe); they record what
// happened and the main thread checks it after joining them. Waits that a bug could turn into
// a hang use long deadlines, so a broken gate fails the test instead of stalling it.
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/gate.hpp"
#include "dblock/errors.hpp"

using dblock::detail::Clock;
using dblock::detail::Gate;
using dblock::detail::GateTable;
using namespace std::chrono_literals;

namespace {

// A queued callback's place (GateTable::enter_or_queue), as an asynchronous acquire keeps it.
struct Queued {
  std::shared_ptr<Gate> gate;
  std::uint64_t ticket;
};
template <class Turn>
Queued queue(GateTable& table, const std::string& name, const std::string& owner, dblock::Mode mode,
             std::uint32_t capacity, Turn turn) {
  auto gate = table.ref(name);
  return Queued{gate, table.enter_or_queue(name, gate, owner, mode, capacity, turn)};
}

// The calling thread as the gate's owner, as the blocking acquires name it.
std::string me() {
  std::ostringstream o;
  o << std::this_thread::get_id();
  return o.str();
}

// Joins on scope exit, so a failed REQUIRE in the main thread does not std::terminate.
struct Joiner {
  std::vector<std::thread> threads;
  ~Joiner() { join(); }
  void join() {
    for (auto& t : threads)
      if (t.joinable()) t.join();
  }
};

// Gives a hold back on scope exit unless released earlier: declared after a Joiner, it runs
// first, so threads still queued behind it can finish when a REQUIRE fails.
struct Hold {
  GateTable& table;
  std::string name;
  std::shared_ptr<Gate> gate;
  ~Hold() { release(); }
  void release() {
    if (gate) table.leave(name, gate, me());
    gate.reset();
  }
};

std::optional<Clock::time_point> in(std::chrono::milliseconds d) { return Clock::now() + d; }

// Spins until flag is set (bounded, so a bug cannot hang the suite).
bool wait_for(const std::atomic<bool>& flag, std::chrono::seconds limit = 10s) {
  auto until = Clock::now() + limit;
  while (!flag.load()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Runs f on another thread and returns whether it got the gate (leaving it again at once).
bool other_thread_enters(GateTable& table, const std::string& name, std::chrono::milliseconds wait) {
  std::atomic<bool> got{false};
  std::thread t([&] {
    auto g = table.enter(name, me(), in(wait));
    if (g) {
      got = true;
      table.leave(name, g, me());
    }
  });
  t.join();
  return got.load();
}

}  // namespace

TEST_CASE("GateTable: the holding thread re-enters its own gate", "[gate]") {
  GateTable table;
  auto g1 = table.enter("n", me(), std::nullopt);
  REQUIRE(g1);
  // A deadline, so a gate that is not re-entrant fails here instead of deadlocking.
  auto g2 = table.enter("n", me(), in(2s));
  REQUIRE(g2);
  CHECK(g2 == g1);
  auto g3 = table.enter("n", me(), std::nullopt);
  REQUIRE(g3);
  CHECK(table.size() == 1);
  table.leave("n", g3, me());
  table.leave("n", g2, me());
  CHECK(table.size() == 1);
  table.leave("n", g1, me());
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: another thread times out (gets null) while the gate is held", "[gate]") {
  GateTable table;
  auto held = table.enter("n", me(), std::nullopt);
  REQUIRE(held);
  CHECK_FALSE(other_thread_enters(table, "n", 50ms));
  CHECK(table.size() == 1);  // the timed-out waiter left no reference behind
  table.leave("n", held, me());
  CHECK(table.size() == 0);
  CHECK(other_thread_enters(table, "n", 5s));
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: every re-entrant hold must be given back before another thread passes", "[gate]") {
  GateTable table;
  auto g1 = table.enter("n", me(), std::nullopt);
  auto g2 = table.enter("n", me(), std::nullopt);
  REQUIRE(g1);
  REQUIRE(g2);
  table.leave("n", g2, me());
  CHECK_FALSE(other_thread_enters(table, "n", 50ms));
  table.leave("n", g1, me());
  CHECK(other_thread_enters(table, "n", 5s));
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: gates of different names are independent", "[gate]") {
  GateTable table;
  auto a = table.enter("a", me(), std::nullopt);
  REQUIRE(a);
  CHECK(other_thread_enters(table, "b", 5s));
  CHECK(table.size() == 1);
  table.leave("a", a, me());
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: a hold given back from another thread opens the gate", "[gate]") {
  GateTable table;
  auto g = table.enter("n", me(), std::nullopt);
  REQUIRE(g);
  auto holder = me();
  std::thread([&] { table.leave("n", g, holder); }).join();
  CHECK(other_thread_enters(table, "n", 5s));
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: waiting threads pass in arrival order, one at a time", "[gate]") {
  constexpr int n = 6;
  GateTable table;
  std::array<std::atomic<bool>, n> arriving{};
  std::mutex m;
  std::vector<int> passed;
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false}, timed_out{false};
  Joiner joiner;  // after the state the threads use, so it joins them before that goes away
  Hold held{table, "fifo", table.enter("fifo", me(), std::nullopt)};
  REQUIRE(held.gate);

  for (int i = 0; i < n; ++i) {
    joiner.threads.emplace_back([&, i] {
      arriving[i] = true;
      // Alternate the two waiting paths: no deadline, and a deadline far away.
      auto g = table.enter("fifo", me(), i % 2 ? in(60s) : std::nullopt);
      if (!g) {
        timed_out = true;
        return;
      }
      if (inside.fetch_add(1) != 0) overlap = true;
      {
        std::lock_guard lk(m);
        passed.push_back(i);
      }
      std::this_thread::sleep_for(2ms);
      inside.fetch_sub(1);
      table.leave("fifo", g, me());
    });
    // Thread i is about to queue; give it ample time to do so before thread i+1 starts.
    REQUIRE(wait_for(arriving[i]));
    std::this_thread::sleep_for(50ms);
  }
  {
    std::lock_guard lk(m);
    CHECK(passed.empty());  // nobody passed while the gate was held
  }
  held.release();
  joiner.join();

  CHECK_FALSE(timed_out);
  CHECK_FALSE(overlap);
  std::vector<int> expected;
  for (int i = 0; i < n; ++i) expected.push_back(i);
  CHECK(passed == expected);
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: a waiter that timed out does not block the one queued behind it", "[gate]") {
  GateTable table;
  std::atomic<bool> a_arriving{false}, b_arriving{false}, a_done{false};
  std::atomic<int> a_result{-1}, b_result{-1};
  Joiner joiner;
  Hold held{table, "n", table.enter("n", me(), std::nullopt)};
  REQUIRE(held.gate);

  joiner.threads.emplace_back([&] {  // A: first in line, gives up after 300 ms
    a_arriving = true;
    auto g = table.enter("n", me(), in(300ms));
    a_result = g ? 1 : 0;
    if (g) table.leave("n", g, me());
    a_done = true;
  });
  REQUIRE(wait_for(a_arriving));
  std::this_thread::sleep_for(50ms);
  joiner.threads.emplace_back([&] {  // B: behind A, willing to wait long
    b_arriving = true;
    auto g = table.enter("n", me(), in(30s));
    b_result = g ? 1 : 0;
    if (g) table.leave("n", g, me());
  });
  REQUIRE(wait_for(b_arriving));
  REQUIRE(wait_for(a_done, 30s));  // A times out while the gate is still held
  CHECK(a_result == 0);
  CHECK(b_result == -1);  // B is still waiting: the gate is held

  held.release();
  joiner.join();
  CHECK(b_result == 1);
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: a waiter that timed out at the head of the queue lets a later arrival in once free",
          "[gate]") {
  GateTable table;
  auto held = table.enter("n", me(), std::nullopt);
  REQUIRE(held);
  CHECK_FALSE(other_thread_enters(table, "n", 30ms));
  CHECK_FALSE(other_thread_enters(table, "n", 30ms));
  table.leave("n", held, me());
  // The two stale waiters must not still be queued ahead of this one.
  CHECK(other_thread_enters(table, "n", 5s));
  CHECK(table.size() == 0);
}

namespace {
// Whether another thread gets in within `wait` in `mode` (with `capacity`); it leaves at once.
bool other_enters(GateTable& table, const std::string& name, dblock::Mode mode, std::uint32_t capacity,
                  std::chrono::milliseconds wait) {
  bool got = false;
  std::thread([&] {
    auto g = table.enter(name, me(), in(wait), mode, capacity);
    got = g != nullptr;
    if (g) table.leave(name, g, me());
  }).join();
  return got;
}
}  // namespace

TEST_CASE("GateTable: shared holders are in together, an exclusive one alone", "[gate]") {
  using dblock::Mode;
  GateTable table;
  auto r = table.enter("n", me(), std::nullopt, Mode::shared, 1);
  REQUIRE(r);
  CHECK(other_enters(table, "n", Mode::shared, 1, 5s));
  CHECK_FALSE(other_enters(table, "n", Mode::exclusive, 1, 50ms));
  table.leave("n", r, me());
  CHECK(other_enters(table, "n", Mode::exclusive, 1, 5s));
  auto w = table.enter("n", me(), std::nullopt, Mode::exclusive, 1);
  CHECK_FALSE(other_enters(table, "n", Mode::shared, 1, 50ms));
  table.leave("n", w, me());
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: a reader arriving behind a waiting writer waits behind it", "[gate]") {
  using dblock::Mode;
  GateTable table;
  auto r = table.enter("n", me(), std::nullopt, Mode::shared, 1);
  std::atomic<bool> writer_in{false}, writer_done{false};
  std::thread writer([&] {
    auto g = table.enter("n", me(), in(60s), Mode::exclusive, 1);
    writer_in = g != nullptr;
    std::this_thread::sleep_for(100ms);
    writer_done = true;
    if (g) table.leave("n", g, me());
  });
  std::this_thread::sleep_for(100ms);  // the writer queues behind the reader
  CHECK_FALSE(writer_in.load());
  bool reader_after_writer = false;
  std::thread reader([&] {
    auto g = table.enter("n", me(), in(60s), Mode::shared, 1);
    reader_after_writer = writer_done.load();
    if (g) table.leave("n", g, me());
  });
  std::this_thread::sleep_for(100ms);
  table.leave("n", r, me());
  writer.join();
  reader.join();
  CHECK(writer_in.load());
  CHECK(reader_after_writer);
}

TEST_CASE("GateTable: a semaphore's gate lets `capacity` holders in", "[gate]") {
  using dblock::Mode;
  GateTable table;
  auto a = table.enter("n", me(), std::nullopt, Mode::exclusive, 2);
  CHECK(other_enters(table, "n", Mode::exclusive, 2, 5s));
  // A second holder on a thread that stays alive (a finished thread's id can be reused by
  // the next one, which would then count as that holder re-entering).
  std::atomic<bool> b_in{false}, b_leave{false};
  std::thread b([&] {
    auto g = table.enter("n", me(), std::nullopt, Mode::exclusive, 2);
    b_in = true;
    while (!b_leave) std::this_thread::sleep_for(1ms);
    table.leave("n", g, me());
  });
  REQUIRE(wait_for(b_in));
  CHECK_FALSE(other_enters(table, "n", Mode::exclusive, 2, 50ms));  // two in: full
  b_leave = true;
  b.join();
  CHECK(other_enters(table, "n", Mode::exclusive, 2, 5s));
  table.leave("n", a, me());
}

TEST_CASE("GateTable: a thread inside cannot re-enter in the other mode", "[gate]") {
  using dblock::Mode;
  GateTable table;
  auto r = table.enter("n", me(), std::nullopt, Mode::shared, 1);
  CHECK_THROWS_AS(table.enter("n", me(), std::nullopt, Mode::exclusive, 1), dblock::UsageError);
  auto again = table.enter("n", me(), std::nullopt, Mode::shared, 1);  // the same mode re-enters
  REQUIRE(again);
  table.leave("n", again, me());
  table.leave("n", r, me());
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: queued callbacks take their turn in one line with blocking waiters", "[gate]") {
  GateTable table;
  auto held = table.enter("n", me(), std::nullopt);
  std::mutex m;
  std::vector<std::string> entered;
  auto turn_of = [&](std::string who) {
    return [&, who] {
      std::lock_guard lk(m);
      entered.push_back(who);
    };
  };
  auto q1 = queue(table, "n", "async-1", dblock::Mode::exclusive, 1, turn_of("async-1"));
  REQUIRE(q1.ticket != 0);
  std::atomic<bool> blocking_in{false};
  std::thread blocking([&] {  // second in line, behind async-1
    auto g = table.enter("n", me(), in(30s));
    blocking_in = g != nullptr;
    {
      std::lock_guard lk(m);
      entered.push_back("blocking");
    }
    if (g) table.leave("n", g, me());
  });
  std::this_thread::sleep_for(100ms);
  auto q2 = queue(table, "n", "async-2", dblock::Mode::exclusive, 1, turn_of("async-2"));
  auto q3 = queue(table, "n", "async-3", dblock::Mode::exclusive, 1, turn_of("async-3"));
  CHECK(table.withdraw("n", q3.gate, q3.ticket));  // out of the line before its turn
  table.leave("n", held, me());                     // async-1's turn runs on this thread
  {
    std::lock_guard lk(m);
    REQUIRE(entered == std::vector<std::string>{"async-1"});
  }
  table.leave("n", q1.gate, "async-1");  // then the blocking waiter, which lets async-2 in
  blocking.join();
  CHECK(blocking_in);
  {
    std::lock_guard lk(m);
    CHECK(entered == std::vector<std::string>{"async-1", "blocking", "async-2"});
  }
  CHECK_FALSE(table.withdraw("n", q2.gate, q2.ticket));  // its turn came
  table.leave("n", q2.gate, "async-2");
  CHECK(table.size() == 0);
}

TEST_CASE("GateTable: queued readers enter together, and a free gate lets a callback in at once", "[gate]") {
  using dblock::Mode;
  GateTable table;
  auto now = queue(table, "n", "w", Mode::exclusive, 1, [] {});
  CHECK(now.ticket == 0);  // entered: its turn does not run
  std::atomic<int> readers{0};
  auto r1 = queue(table, "n", "r1", Mode::shared, 1, [&] { readers++; });
  auto r2 = queue(table, "n", "r2", Mode::shared, 1, [&] { readers++; });
  CHECK(readers == 0);
  table.leave("n", now.gate, "w");
  CHECK(readers == 2);
  table.leave("n", r1.gate, "r1");
  table.leave("n", r2.gate, "r2");
  CHECK(table.size() == 0);
}
