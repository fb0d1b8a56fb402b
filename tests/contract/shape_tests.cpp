// The contract for lock shapes beyond a plain exclusive lock (docs/CONTRACT.md, "Shapes"):
// read/write locks (shared holds) and semaphores, on every fixture that offers them; every
// other fixture must refuse them by name before anything is written.
#include <atomic>
#include <catch2/catch.hpp>
#include <fstream>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "contract/fixtures.hpp"
#include "contract/holder_process.hpp"
#include "support/eventually.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;
using dblock::test::eventually;

namespace {

dblock::LockOptions opts(const dblock::test::Contract& f, std::uint32_t permits = 1) {
  dblock::LockOptions o;
  o.strategy = f.strategy;
  o.ttl = 30s;
  o.permits = permits;
  return o;
}

}  // namespace

CONTRACT_TEST("shapes a strategy does not offer are refused by name, and nothing is written", "[contract][shapes]",
              DBLOCK_CONTRACT_FIXTURES) {
  auto c = f.make().open();
  CHECK_THROWS_WITH(c->lock("job", opts(f, 0)), Catch::Contains("permits must be 1 to 10000"));
  CHECK_THROWS_AS(c->lock("job", opts(f, dblock::max_permits + 1)), dblock::UsageError);
  if (!f.offers_semaphore)
    CHECK_THROWS_WITH(c->lock("job", opts(f, 2)),
                      Catch::Contains(std::string(dblock::to_string(f.strategy))) && Catch::Contains("semaphores"));
  auto lock = c->lock("job", opts(f));
  if (!f.offers_shared) {
    CHECK_THROWS_WITH(lock.try_acquire_shared(),
                      Catch::Contains(std::string(dblock::to_string(f.strategy))) && Catch::Contains("shared"));
    CHECK_THROWS_AS(lock.lock_shared(), dblock::UsageError);
    CHECK(c->list().empty());
    // Not held shared meanwhile: an exclusive acquire from another Client gets it at once.
    auto other = f.make().open();
    CHECK(other->lock("job", opts(f)).try_acquire());
  }
}

CONTRACT_TEST("readers hold together, a writer alone, with increasing fences", "[contract][shapes]",
              DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_shared) return;  // refused, as the test above checks
  auto ns = f.make();
  auto a = ns.open(), b = ns.open(), w = ns.open();
  auto r1 = a->lock("doc", opts(f)).try_acquire_shared();
  auto r2 = b->lock("doc", opts(f)).try_acquire_shared();
  REQUIRE(r1);
  REQUIRE(r2);
  CHECK(r1->mode() == dblock::Mode::shared);
  CHECK(r2->fence() > r1->fence());
  auto writer = w->lock("doc", opts(f));
  CHECK_FALSE(writer.try_acquire());
  CHECK_FALSE(writer.try_acquire(300ms));
  r1->release();
  CHECK_FALSE(writer.try_acquire());  // one reader is still in
  r2->release();
  auto held = writer.try_acquire(5s);
  REQUIRE(held);
  CHECK(held->mode() == dblock::Mode::exclusive);
  CHECK(held->fence() > r2->fence());  // a writer's fence is above every reader's before it
  CHECK_FALSE(a->lock("doc", opts(f)).try_acquire_shared());
  CHECK_FALSE(a->lock("doc", opts(f)).try_acquire_shared(300ms));
  auto fence = held->fence();
  held->release();
  auto after = a->lock("doc", opts(f)).try_acquire_shared(5s);
  REQUIRE(after);
  CHECK(after->fence() > fence);
}

CONTRACT_TEST("once a writer waits, new readers queue behind it", "[contract][shapes]", DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_shared) return;
  auto ns = f.make();
  auto a = ns.open(), b = ns.open(), w = ns.open();
  auto reader = a->lock("doc", opts(f)).acquire_shared();
  std::atomic<bool> writer_in{false};
  std::atomic<std::uint64_t> writer_fence{0};
  std::thread writer([&] {
    auto l = w->lock("doc", opts(f)).try_acquire(20s);
    if (l) writer_fence = l->fence();
    writer_in = l.has_value();
    std::this_thread::sleep_for(200ms);
  });
  std::this_thread::sleep_for(500ms);  // the writer waits inside the server by now
  CHECK_FALSE(writer_in.load());
  auto late = b->lock("doc", opts(f));
  CHECK_FALSE(late.try_acquire_shared());  // a reader would get in beside the first: not now
  reader.release();
  REQUIRE(eventually([&] { return writer_in.load(); }, 10s));
  auto got = late.try_acquire_shared(10s);  // after the writer
  writer.join();
  REQUIRE(got);
  CHECK(got->fence() > writer_fence.load());
}

CONTRACT_TEST("a thread holds a name in one mode, and std::shared_lock works", "[contract][shapes]",
              DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_shared) return;
  auto c = f.make().open();
  auto lock = c->lock("doc", opts(f));
  {
    std::shared_lock<dblock::Lock> read(lock);
    CHECK_THROWS_AS(lock.try_acquire(), dblock::UsageError);  // no upgrade
    CHECK_THROWS_AS(lock.unlock(), dblock::NotOwnerError);    // not held exclusively
    std::shared_lock<dblock::Lock> again(lock);               // re-entry in the same mode
    CHECK(lock.fence() > 0);
  }
  {
    std::unique_lock<dblock::Lock> write(lock);
    CHECK_THROWS_AS(lock.try_acquire_shared(), dblock::UsageError);  // no downgrade
    CHECK_THROWS_AS(lock.unlock_shared(), dblock::NotOwnerError);
  }
  // Threads of one Client read together.
  std::shared_lock<dblock::Lock> mine(lock);
  bool other_read = false;
  std::thread([&] { other_read = lock.try_lock_shared_for(5s) && (lock.unlock_shared(), true); }).join();
  CHECK(other_read);
  bool other_wrote = true;
  std::thread([&] { other_wrote = lock.try_lock_for(200ms); }).join();
  CHECK_FALSE(other_wrote);
}

CONTRACT_TEST("a reader killed with SIGKILL gives its share back", "[contract][shapes]", DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_shared) return;
  auto ns = f.make();
  dblock::test::HolderProcess reader(f, ns, "doc", 700ms, "shared");
  auto c = ns.open();
  auto lock = c->lock("doc", opts(f));
  auto beside = lock.try_acquire_shared();  // readers share
  REQUIRE(beside);
  beside->release();
  CHECK_FALSE(lock.try_acquire());
  reader.kill();
  auto lease = lock.try_acquire(10s);
  REQUIRE(lease);
  reader.came_back(*lease);
}

CONTRACT_TEST("a semaphore lets N holders in at once and no more, with increasing fences", "[contract][shapes]",
              DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_semaphore) return;  // refused, as the first test checks
  constexpr std::uint32_t n = 3;
  auto ns = f.make();
  std::vector<std::shared_ptr<dblock::Client>> clients;
  for (std::uint32_t i = 0; i <= n; ++i) clients.push_back(ns.open());
  std::vector<dblock::Lease> held;
  std::uint64_t last = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    auto l = clients[i]->lock("pool", opts(f, n)).try_acquire();
    REQUIRE(l);
    CHECK(l->mode() == dblock::Mode::exclusive);
    CHECK(l->fence() > last);  // every grant draws a fence of its own, in grant order
    last = l->fence();
    held.push_back(std::move(*l));
  }
  auto extra = clients[n]->lock("pool", opts(f, n));
  CHECK_FALSE(extra.try_acquire());  // the N+1th
  CHECK_FALSE(extra.try_acquire(300ms));
  if (f.lease_based) {
    auto listed = clients[0]->list();
    CHECK(listed.size() == n);  // one lease per holder
    for (const auto& li : listed) CHECK(li.name == "pool");
  }
  held[1].release();  // a permit comes free: the waiter gets it
  auto got = extra.try_acquire(5s);
  REQUIRE(got);
  CHECK(got->fence() > last);
  CHECK_FALSE(clients[1]->lock("pool", opts(f, n)).try_acquire());
  // A holder that asks again re-enters its own permit; it takes no other one.
  auto again = clients[0]->lock("pool", opts(f, n)).try_acquire();
  REQUIRE(again);
  CHECK(again->fence() == held[0].fence());
}

CONTRACT_TEST("a semaphore's holders must agree on its permits", "[contract][shapes]", DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_semaphore) return;
  auto ns = f.make();
  auto a = ns.open(), b = ns.open();
  auto held = a->lock("pool", opts(f, 2)).try_acquire();
  REQUIRE(held);
  CHECK_THROWS_AS(b->lock("pool", opts(f, 3)).try_acquire(), dblock::UsageError);
  CHECK_THROWS_WITH(b->lock("pool", opts(f, 3)).try_acquire(5s), Catch::Contains("permits"));
  CHECK_THROWS_AS(b->lock("pool", opts(f)).try_acquire(), dblock::UsageError);  // a mutex is permits 1
  if (f.offers_shared) CHECK_THROWS_AS(b->lock("pool", opts(f)).try_acquire_shared(), dblock::UsageError);
  auto beside = b->lock("pool", opts(f, 2)).try_acquire();  // the same permits: a second holder
  CHECK(beside);
  beside.reset();
  held->release();
  // Free again, the name takes any shape: here a mutex, and then a semaphore is the mismatch.
  auto mutex = b->lock("pool", opts(f)).try_acquire(5s);
  REQUIRE(mutex);
  CHECK_THROWS_AS(a->lock("pool", opts(f, 2)).try_acquire(), dblock::UsageError);
}

CONTRACT_TEST("a semaphore's holder killed with SIGKILL gives its permit back", "[contract][shapes]",
              DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_semaphore) return;
  auto ns = f.make();
  dblock::test::HolderProcess holder(f, ns, "pool", 700ms, "permits=2");
  auto a = ns.open(), b = ns.open();
  auto mine = a->lock("pool", opts(f, 2)).try_acquire();  // the second permit
  REQUIRE(mine);
  auto lock = b->lock("pool", opts(f, 2));
  CHECK_FALSE(lock.try_acquire());  // both permits are taken
  holder.kill();
  auto lease = lock.try_acquire(10s);
  REQUIRE(lease);
  holder.came_back(*lease);
  CHECK(lease->fence() > mine->fence());
}

CONTRACT_TEST("3 processes x 2 threads never exceed a semaphore's permits", "[contract][shapes][multiprocess]",
              DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_semaphore) return;
  constexpr int permits = 2, processes = 3, threads = 2, iterations = 8;
  auto ns = f.make();
  auto counter = f.dir + "/holders", fences = f.dir + "/fences";
  std::ofstream(counter) << "0 0 0\n";
  std::vector<pid_t> pids;
  for (int p = 0; p < processes; ++p)
    pids.push_back(dblock::test::spawn({DBLOCK_HAMMER, "count", ns.url, ns.options.table,
                                        std::string(dblock::to_string(f.strategy)), "pool", std::to_string(iterations),
                                        std::to_string(threads), counter, fences,
                                        "permits=" + std::to_string(permits)}));
  for (auto pid : pids) CHECK(dblock::test::wait_exit(pid) == 0);
  long now = -1, most = -1, grants = -1;
  std::ifstream(counter) >> now >> most >> grants;
  CHECK(now == 0);
  CHECK(grants == processes * threads * iterations);
  CHECK(most <= permits);  // never more holders than permits
  CHECK(most >= 2);        // and they did hold together (the test would miss an excess otherwise)
  std::ifstream log(fences);
  std::set<std::uint64_t> seen;
  std::uint64_t fence = 0;
  while (log >> fence) CHECK(seen.insert(fence).second);  // every grant a fence of its own
  CHECK(seen.size() == static_cast<std::size_t>(processes * threads * iterations));
}

CONTRACT_TEST("a semaphore has at most N holders, each with a fence above every earlier grant's",
              "[contract][shapes][semaphore]", DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_semaphore) return;  // refused, as the first test checks
  auto ns = f.make();
  std::vector<std::shared_ptr<dblock::Client>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(ns.open());
  std::vector<dblock::Lease> held;
  std::uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto l = clients[i]->lock("pool", opts(f, 3)).try_acquire();
    REQUIRE(l);
    CHECK(l->fence() > last);
    last = l->fence();
    held.push_back(std::move(*l));
  }
  auto fourth = clients[3]->lock("pool", opts(f, 3));
  CHECK_FALSE(fourth.try_acquire());
  CHECK_FALSE(fourth.try_acquire(300ms));
  // A waiter gets the permit a holder gives back.
  std::atomic<bool> in{false};
  std::atomic<std::uint64_t> fence{0};
  std::thread waiter([&] {
    auto l = fourth.try_acquire(20s);
    if (l) fence = l->fence();
    in = l.has_value();
  });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(in.load());
  held[1].release();
  waiter.join();
  REQUIRE(in.load());
  CHECK(fence.load() > last);
  // Threads of one Client hold permits of their own, up to N in all.
  held[0].release();
  held[2].release();
  auto lock = clients[0]->lock("pool", opts(f, 3));
  std::atomic<int> inside{0}, got{0}, refused{0};
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      auto l = lock.try_acquire(2s);
      if (!l) {
        ++refused;
        return;
      }
      ++got;
      ++inside;
      while (!go) std::this_thread::sleep_for(10ms);
      --inside;
    });
  REQUIRE(eventually([&] { return got.load() + refused.load() == 4; }, 15s));
  CHECK(got == 3);
  CHECK(refused == 1);
  CHECK(inside == 3);
  go = true;
  for (auto& t : threads) t.join();
}

CONTRACT_TEST("a writer that gives up leaves the readers free", "[contract][shapes]", DBLOCK_CONTRACT_FIXTURES) {
  // Redis keeps a given-up writer's mark until it ends (at most 3 s: docs/ARCHITECTURE.md,
  // "Lock shapes"), since its mark is a field the waiter cannot take back on its way out.
  if (!f.offers_shared || f.strategy == dblock::Strategy::redis) return;
  auto ns = f.make();
  auto a = ns.open(), b = ns.open(), w = ns.open();
  auto reader = a->lock("doc", opts(f)).try_acquire_shared();
  REQUIRE(reader);
  CHECK_FALSE(w->lock("doc", opts(f)).try_acquire(500ms));  // waited behind the reader, then gave up
  CHECK(b->lock("doc", opts(f)).try_acquire_shared());      // at once: nobody waits any more
}

CONTRACT_TEST("a shared holder that is not renewed expires, frees its share and is swept", "[contract][shapes]",
              DBLOCK_CONTRACT_FIXTURES) {
  if (!f.offers_shared || !f.lease_based) return;
  auto ns = f.make();
  auto a = ns.open(), w = ns.open();
  auto o = opts(f);
  o.ttl = 1s;
  o.auto_renew = false;
  auto reader = a->lock("doc", o).try_acquire_shared();
  REQUIRE(reader);
  auto writer = w->lock("doc", opts(f)).try_acquire(10s);  // once the reader's lease ended
  REQUIRE(writer);
  CHECK(writer->fence() > reader->fence());
  writer->release();
  if (!f.server_expires) CHECK(w->sweep() >= 1);  // the expired reader's row, or the name's with it
  CHECK(w->list().empty());
}
