// ConnectionPool<Conn> (src/core/connection_pool.hpp) with a stand-in connection: the bookkeeping alone (what is
// reused, dropped, closed and waited for). The pools over real servers run in every suite.
#include <sched.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "core/connection_pool.hpp"

using namespace std::chrono_literals;
using dblock::detail::ConnectionPool;

namespace {

struct FakeConn {
  FakeConn(int i, int* c) : id(i), closed(c) {}
  int id;
  int* closed;  // counts the connections closed (destroyed)
  bool usable_ = true, connected_ = true;
  ~FakeConn() { ++*closed; }
  bool usable() const { return usable_; }
  bool still_connected() const { return connected_; }
};

struct Fixture {
  int opened = 0, closed = 0;
  ConnectionPool<FakeConn> pool;
  explicit Fixture(std::size_t max_open, std::size_t max_idle)
      : pool([this] { return std::make_unique<FakeConn>(++opened, &closed); },
             {max_open, max_idle, 50ms, "test pool"}) {}
};

}  // namespace

TEST_CASE("ConnectionPool: a connection given back is reused; an unusable one is dropped", "[pool]") {
  Fixture f(2, 2);
  { auto h = f.pool.get(); CHECK(h->id == 1); }
  { auto h = f.pool.get(); CHECK(h->id == 1); h->usable_ = false; }  // an error left it unknown
  CHECK(f.closed == 1);
  auto h = f.pool.get();
  CHECK(h->id == 2);
}

TEST_CASE("ConnectionPool: an idle connection the server closed is replaced", "[pool]") {
  Fixture f(2, 2);
  { auto h = f.pool.get(); h->connected_ = false; }  // given back, then closed under us
  auto h = f.pool.get();
  CHECK(h->id == 2);
  CHECK(f.closed == 1);
}

TEST_CASE("ConnectionPool: past max_open a get() waits, then times out naming the pool", "[pool]") {
  Fixture f(1, 1);
  auto held = f.pool.get();
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(f.pool.get(), Catch::Contains("test pool") && Catch::Contains("pool of 1"));
  CHECK(std::chrono::steady_clock::now() - t0 >= 50ms);
  // A give-back from another thread ends the wait.
  std::thread giver([&] {
    std::this_thread::sleep_for(10ms);
    auto gone = std::move(held);
  });
  auto next = f.pool.get();
  giver.join();
  CHECK(next->id == 1);
}

TEST_CASE("ConnectionPool: discard closes the connection and frees its slot; max_idle caps what is kept", "[pool]") {
  Fixture f(3, 1);
  auto a = f.pool.get(), b = f.pool.get(), c = f.pool.get();
  a.discard();  // it may still hold a lock on the server: closed, never reused
  CHECK(f.closed == 1);
  CHECK_FALSE(a);
  auto d = f.pool.get();  // the slot is free again
  CHECK(d->id == 4);
  { auto gone = std::move(b); }  // kept idle (max_idle 1)
  { auto gone = std::move(c); }  // closed: the idle list is full
  CHECK(f.closed == 2);
  auto e = f.pool.get();
  CHECK(e->id == 2);
}

TEST_CASE("ConnectionPool: waiters are served in turn; giving back and asking again at once goes behind them",
          "[pool]") {
  // A Client with pool_size 1 acquiring leases one after another while its renewal thread
  // waited for the connection: the loop took it back at every give-back, before the woken
  // renewal thread ran, and the renewals timed out until the leases expired (crowd_mysql).
  Fixture f(1, 1);
  // On one CPU, as on a loaded machine: the woken waiter does not run before the giver asks again.
  cpu_set_t all, one;
  sched_getaffinity(0, sizeof all, &all);
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  sched_setaffinity(0, sizeof one, &one);
  auto held = f.pool.get();
  std::atomic<bool> waiting{false}, served{false};
  std::thread waiter([&] {
    waiting = true;
    auto h = f.pool.get();
    served = true;
    std::this_thread::sleep_for(5ms);
  });
  while (!waiting) std::this_thread::yield();
  std::this_thread::sleep_for(10ms);  // the waiter is in get() by now
  held = {};                          // given back...
  held = f.pool.get();                // ...and asked for again at once: after the waiter
  CHECK(served);
  waiter.join();
  sched_setaffinity(0, sizeof all, &all);
}
