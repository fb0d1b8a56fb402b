// Lock::async_acquire on every backend x strategy: the blocking acquire's line, fences and
// results, with no thread of the caller's waiting, and the ends only it has (a cancel while
// queued or racing a grant, its Client destroyed, a callback that throws).
// Callbacks run on the Client's event thread: they only record, and the test's thread checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "contract/fixtures.hpp"
#include "core/wait_engine.hpp"
#include "support/eventually.hpp"

using namespace std::chrono_literals;
using dblock::Lease;
using dblock::LockOptions;
using dblock::test::eventually;

namespace {

LockOptions async_opts(const dblock::test::Contract& f) {
  LockOptions o;
  o.strategy = f.strategy;
  return o;
}

// "job" held by one Client (b), and another Client's (a) Lock on it: what an acquire through
// `lock` then waits for.
struct HeldByAnother {
  explicit HeldByAnother(const dblock::test::Contract& f)
      : ns(f.make()), a(ns.open()), b(ns.open()), held(b->lock("job", async_opts(f)).acquire()),
        lock(a->lock("job", async_opts(f))) {}
  dblock::test::Namespace ns;
  std::shared_ptr<dblock::Client> a, b;
  Lease held;
  dblock::Lock lock;
};

// One asynchronous acquire's end, as its callback saw it.
struct Outcome {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  std::optional<Lease> lease;
  std::thread::id thread;

  dblock::AcquireCallback callback() {
    return [this](std::exception_ptr e, std::optional<Lease> l) {
      std::lock_guard lk(m);
      error = e;
      lease = std::move(l);
      thread = std::this_thread::get_id();
      done = true;
      cv.notify_all();
    };
  }
  bool wait(std::chrono::milliseconds limit = 10s) {
    std::unique_lock lk(m);
    return cv.wait_for(lk, limit, [&] { return done; });
  }
  bool cancelled() {
    std::lock_guard lk(m);
    if (!error) return false;
    try {
      std::rethrow_exception(error);
    } catch (const dblock::CancelledError&) {
      return true;
    } catch (...) {
      return false;
    }
  }
};

}  // namespace

CONTRACT_TEST("asynchronous acquires of a name are granted in order, with rising fences, on the event thread",
              "[contract][async]", DBLOCK_CONTRACT_FIXTURES) {
  auto ns = f.make();
  auto a = ns.open(), b = ns.open();
  auto held = b->lock("job", async_opts(f)).acquire();  // so the first waits on the server too
  constexpr int n = 20;
  std::mutex m;
  std::vector<int> order;
  std::vector<std::uint64_t> fences;
  std::vector<std::string> failures;
  std::vector<std::thread::id> threads;
  auto lock = a->lock("job", async_opts(f));
  for (int i = 0; i < n; ++i)
    lock.async_acquire([&, i](std::exception_ptr e, std::optional<Lease> lease) {
      std::lock_guard lk(m);
      threads.push_back(std::this_thread::get_id());
      if (e) failures.push_back("an error");
      else if (!lease) failures.push_back("no lease");
      else {
        order.push_back(i);
        fences.push_back(lease->fence());
      }
    });  // the Lease is released as the callback returns: the next is granted
  held.release();
  REQUIRE(eventually(
      [&] {
        std::lock_guard lk(m);
        return order.size() + failures.size() == n;
      },
      60s));
  std::lock_guard lk(m);
  CHECK(failures.empty());
  std::vector<int> expected;
  for (int i = 0; i < n; ++i) expected.push_back(i);
  CHECK(order == expected);
  REQUIRE(fences.size() == n);
  CHECK(fences.front() > held.fence());
  for (std::size_t i = 1; i < fences.size(); ++i) CHECK(fences[i] > fences[i - 1]);
  CHECK(std::all_of(threads.begin(), threads.end(), [&](auto t) { return t == threads.front(); }));
  CHECK(threads.front() != std::this_thread::get_id());
}

CONTRACT_TEST("a cancelled asynchronous acquire gives up its place in the process's line and the server's",
              "[contract][async]", DBLOCK_CONTRACT_FIXTURES) {
  HeldByAnother h(f);
  auto& [ns, a, b, held, lock] = h;
  Outcome first, second;
  auto at_server = lock.async_acquire(first.callback());  // first in the process's line
  auto queued = lock.async_acquire(second.callback());    // behind it, in the process's line
  std::this_thread::sleep_for(200ms);                     // the first's attempts wait on the server
  CHECK(queued.cancel());
  REQUIRE(second.wait(5s));
  CHECK(second.cancelled());
  // The attempts end at once, at their pause or inside the server (WaitCancel): well within
  // the 1 s slice a wait there is cut in, which without the cancel it would wait out.
  const auto cancelled_at = std::chrono::steady_clock::now();
  CHECK(at_server.cancel());
  REQUIRE(first.wait(5s));
  const auto took = std::chrono::steady_clock::now() - cancelled_at;
  std::printf("async cancel, %s %s: the wait at the server ended %.1f ms after its cancel\n",
              std::string(a->backend()).c_str(), std::string(dblock::to_string(f.strategy)).c_str(),
              std::chrono::duration<double, std::milli>(took).count());
  CHECK(took < 500ms);
  CHECK(first.cancelled());
  CHECK_FALSE(at_server.cancel());  // it has ended
  CHECK_FALSE(first.lease);
  held.release();
  // Nothing was left behind in the server's line (a ticket, a node): another Client takes
  // the name now, not at some expiry.
  auto c = ns.open();
  CHECK(c->lock("job", async_opts(f)).try_acquire(2s));
}

CONTRACT_TEST("a grant that races a cancel is released", "[contract][async]", DBLOCK_CONTRACT_FIXTURES) {
  auto ns = f.make();
  auto a = ns.open(), b = ns.open();
  auto lock = a->lock("job", async_opts(f));
  int cancelled = 0, granted = 0;
  for (int round = 0; round < 10; ++round) {
    Outcome o;
    auto pending = lock.async_acquire(o.callback());
    if (round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(round));  // later into the attempt
    const bool took = pending.cancel();
    REQUIRE(o.wait());
    if (took) {
      CHECK(o.cancelled());
      CHECK_FALSE(o.lease);
      ++cancelled;
    } else {
      CHECK_FALSE(o.error);
      CHECK(o.lease);
      ++granted;
    }
    o.lease.reset();  // released
    auto other = b->lock("job", async_opts(f)).try_acquire(2s);
    REQUIRE(other);  // a cancelled acquire's grant was given back before its callback ran
    other->release();
  }
  CHECK(cancelled + granted == 10);
  CHECK(cancelled > 0);
}

CONTRACT_TEST("a Client destroyed with asynchronous acquires under way ends them", "[contract][async]",
              DBLOCK_CONTRACT_FIXTURES) {
  auto ns = f.make();
  auto a = ns.open(), b = ns.open();
  auto held = a->lock("job", async_opts(f)).acquire();
  Outcome at_server, queued;
  {
    auto lock = b->lock("job", async_opts(f));
    lock.async_acquire(at_server.callback());
    lock.async_acquire(queued.callback());
  }
  std::this_thread::sleep_for(100ms);
  b.reset();
  REQUIRE(queued.wait(5s));
  CHECK(queued.cancelled());
  REQUIRE(at_server.wait(5s));
  CHECK(at_server.cancelled());
  held.release();
  CHECK(a->lock("job", async_opts(f)).try_acquire(2s));
}

CONTRACT_TEST("an asynchronous acquire's callback that throws stops no other, and its Lease is released",
              "[contract][async]", DBLOCK_CONTRACT_FIXTURES) {
  auto ns = f.make();
  auto a = ns.open();
  auto lock = a->lock("job", async_opts(f));
  std::atomic<bool> thrown{false};
  lock.async_acquire([&](std::exception_ptr, std::optional<Lease>) {
    thrown = true;
    throw std::runtime_error("a service's bug");
  });
  REQUIRE(eventually([&] { return thrown.load(); }));
  Outcome after;
  lock.async_acquire(after.callback(), 5s);
  REQUIRE(after.wait());
  CHECK_FALSE(after.error);
  CHECK(after.lease);
}

CONTRACT_TEST("an asynchronous release gives the lock back without blocking and ends on the event thread",
              "[contract][async]", DBLOCK_CONTRACT_FIXTURES) {
  auto ns = f.make();
  auto a = ns.open(), b = ns.open();
  auto lease = a->lock("job", async_opts(f)).acquire();
  std::promise<std::pair<std::exception_ptr, std::thread::id>> ended;
  lease.async_release([&](std::exception_ptr e) { ended.set_value({e, std::this_thread::get_id()}); });
  CHECK_FALSE(lease.held());  // from the call on
  auto result = ended.get_future();
  REQUIRE(result.wait_for(5s) == std::future_status::ready);
  auto [error, thread] = result.get();
  CHECK_FALSE(error);
  CHECK(thread != std::this_thread::get_id());
  auto next = b->lock("job", async_opts(f)).try_acquire(2s);  // given back, not left to expire
  REQUIRE(next);
  CHECK(next->fence() > lease.fence());
  CHECK_NOTHROW(lease.async_release().get());  // held no more: nothing to do
  // A lost lease's release reports the loss, as release() does (once another holds the name:
  // a session lock's steal ends its holder's connection, which takes a moment), after its
  // on_lost, on the same thread.
  std::mutex m;
  std::vector<std::string> told;  // on the event thread, in order
  auto o = async_opts(f);
  o.on_lost = [&](const std::string&, std::uint64_t) {
    std::lock_guard lk(m);
    told.push_back("on_lost");
  };
  auto stolen = a->lock("job2", o).acquire();
  f.steal(*b, "job2");
  REQUIRE(b->lock("job2", async_opts(f)).try_acquire(5s));
  // A SQL session lock's Client sees the loss when its hang-up watch sees the connection
  // closed (until then a rollback on it succeeds, as release() finds too); elsewhere the
  // release itself finds the lease, key or node gone.
  if (f.strategy == dblock::Strategy::for_update || f.strategy == dblock::Strategy::advisory)
    REQUIRE(eventually([&] { return stolen.lost(); }));
  std::promise<std::exception_ptr> lost;
  stolen.async_release([&](std::exception_ptr e) {
    {
      std::lock_guard lk(m);
      told.push_back("released");
    }
    lost.set_value(e);
  });
  auto e = lost.get_future().get();
  REQUIRE(e);
  CHECK_THROWS_AS(std::rethrow_exception(e), dblock::LockLostError);
  std::lock_guard lk(m);
  CHECK(told == std::vector<std::string>{"on_lost", "released"});
}

CONTRACT_TEST("an asynchronous acquire whose wait runs out ends with neither Lease nor error",
              "[contract][async]", DBLOCK_CONTRACT_FIXTURES) {
  HeldByAnother h(f);
  auto& [ns, a, b, held, lock] = h;
  CHECK_FALSE(lock.async_acquire(300ms).get());
  CHECK_FALSE(lock.async_acquire(0ms).get());
  {
    // Queued in the process's line behind another acquire of ours, its wait runs out there.
    Outcome first;
    auto pending = lock.async_acquire(first.callback());
    CHECK_FALSE(lock.async_acquire(200ms).get());
    pending.cancel();
    REQUIRE(first.wait());
  }
  held.release();
  auto got = lock.async_acquire(5s).get();
  REQUIRE(got);
  CHECK(got->fence() > held.fence());
  if (!f.offers_shared)
    CHECK_THROWS_AS(lock.async_acquire(5s, dblock::Mode::shared), dblock::UsageError);
  else {
    got->release();
    auto reader = lock.async_acquire(5s, dblock::Mode::shared).get();
    REQUIRE(reader);
    CHECK(reader->mode() == dblock::Mode::shared);
  }
}

namespace {

// What the process runs now: its threads, and its sockets (a server connection each, or a
// listener's).
struct Footprint {
  int threads = 0, sockets = 0;
  static Footprint now() {
    namespace fs = std::filesystem;
    Footprint f;
    for (auto& e : fs::directory_iterator("/proc/self/task")) {
      (void)e;
      ++f.threads;
    }
    std::error_code ec;
    for (auto& e : fs::directory_iterator("/proc/self/fd")) {
      auto target = fs::read_symlink(e.path(), ec);
      if (!ec && target.string().rfind("socket:", 0) == 0) ++f.sockets;
    }
    return f;
  }
};

#define DBLOCK_ASYNC_SCALE_FIXTURES                                                            \
  dblock::test::SqliteInsert DBLOCK_ASYNC_SCALE_PG DBLOCK_ASYNC_SCALE_MYSQL DBLOCK_ASYNC_SCALE_REDIS
#define DBLOCK_ASYNC_STEPPED_FIXTURES dblock::test::SqliteInsert DBLOCK_ASYNC_SCALE_PG DBLOCK_ASYNC_SCALE_REDIS
#ifdef DBLOCK_TEST_POSTGRESQL
#define DBLOCK_ASYNC_SCALE_PG , dblock::test::PgInsert
#else
#define DBLOCK_ASYNC_SCALE_PG
#endif
#ifdef DBLOCK_TEST_MYSQL
#define DBLOCK_ASYNC_SCALE_MYSQL , dblock::test::MySqlInsert
#else
#define DBLOCK_ASYNC_SCALE_MYSQL
#endif
#ifdef DBLOCK_TEST_REDIS
#define DBLOCK_ASYNC_SCALE_REDIS , dblock::test::RedisLock
#else
#define DBLOCK_ASYNC_SCALE_REDIS
#endif

// `waits` asynchronous waits of one Client, spread over `names` names that another Client
// holds until they have all queued; then each name is granted through its line. Checks the
// order and fences of each line, prints the figures (docs/BENCHMARKS.md quotes them) and
// checks the threads and sockets the process gained.
void async_scale(const dblock::test::Contract& f, int waits, int names) {
  auto ns = f.make();
  auto a = ns.open(), b = ns.open();
  std::vector<dblock::Lock> locks;
  std::vector<Lease> held;  // by another Client, so that every wait queues before the first grant
  for (int i = 0; i < names; ++i) {
    locks.push_back(a->lock("scale-" + std::to_string(i), async_opts(f)));
    held.push_back(b->lock("scale-" + std::to_string(i), async_opts(f)).acquire());
  }
  const auto before = Footprint::now();
  struct Granted {
    int wait;
    std::uint64_t fence;
  };
  std::mutex m;
  std::vector<std::vector<Granted>> granted(names);
  int ended = 0, failed = 0;
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < waits; ++i)
    locks[i % names].async_acquire([&, i](std::exception_ptr e, std::optional<Lease> lease) {
      std::lock_guard lk(m);
      ++ended;
      if (e || !lease) ++failed;
      else granted[i % names].push_back({i, lease->fence()});
    });  // released as the callback returns
  Footprint most = Footprint::now();
  auto sample = [&] {
    auto now = Footprint::now();
    most.threads = std::max(most.threads, now.threads);
    most.sockets = std::max(most.sockets, now.sockets);
  };
  std::this_thread::sleep_for(200ms);  // the heads of the lines wait on the server
  sample();
  for (auto& l : held) l.release();
  const auto give_up = std::chrono::steady_clock::now() + 300s;
  for (;;) {
    sample();
    {
      std::lock_guard lk(m);
      if (ended == waits) break;
    }
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(10ms);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::lock_guard lk(m);
  CHECK(failed == 0);
  for (auto& line : granted) {
    REQUIRE(line.size() == static_cast<std::size_t>(waits / names));
    for (std::size_t i = 1; i < line.size(); ++i) {
      CHECK(line[i].wait > line[i - 1].wait);  // arrival order
      CHECK(line[i].fence > line[i - 1].fence);
    }
  }
  const int threads = most.threads - before.threads, sockets = most.sockets - before.sockets;
  std::printf("async scale, %s %s: %d waits on %d names: %d threads and %d sockets more at most, %.1f s, "
              "%d wait workers alive\n",
              std::string(a->backend()).c_str(), std::string(dblock::to_string(f.strategy)).c_str(), waits, names,
              threads, sockets, seconds, dblock::detail::WaitEngine::get().workers());
  CHECK(threads <= 8);
  CHECK(sockets <= 10);
}

}  // namespace

// Issue 49's measure: 10,000 waits of one Client on 4 names need the Gate's line per name and
// the engine's few threads, not a thread or a connection per waiter. (MySQL's lease
// strategies wait inside the server, on their turn keys: a worker per name waited on there.)
CONTRACT_TEST("10,000 asynchronous waits on one Client use a few threads and connections, each granted in order",
              "[contract][async][scale]", DBLOCK_ASYNC_SCALE_FIXTURES) {
  async_scale(f, 10'000, 4);
}

// Where an attempt is one round trip (LockDriver::waits_in_server false), the waits at the
// head of 1,000 lines hold no thread either: they are armed on their release watches and the
// engine's timer between two steps on its two steppers.
CONTRACT_TEST("asynchronous waits on 1000 names use a few threads and connections",
              "[contract][async][scale]", DBLOCK_ASYNC_STEPPED_FIXTURES) {
  async_scale(f, 1'000, 1'000);
}
