// What only the redis and redlock backends promise: interop with redis-py's lock on the same
// name, scripts surviving SCRIPT FLUSH and restarts, and Redlock's majority rules.
#include <hiredis/hiredis.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <fstream>
#include <random>
#include <thread>

#include "support/eventually.hpp"
#include "contract/fixtures.hpp"
#include "core/url.hpp"
#include "support/process.hpp"
#include "support/redis_db.hpp"
#include "contract/connection_slot_check.hpp"
#include "backends/redis/redis_driver.hpp"
#include "backends/redis/redis_scripts.hpp"

using namespace std::chrono_literals;
using dblock::test::eventually;
using Clock = std::chrono::steady_clock;
using dblock::LockOptions;
using dblock::Strategy;
using dblock::test::Namespace;

namespace {

LockOptions opts(Strategy s, std::chrono::milliseconds ttl = 30s) {
  LockOptions o;
  o.strategy = s;
  o.ttl = ttl;
  return o;
}

// A test's server or node: where it is, and the test's own database there.
struct Node {
  dblock::detail::HostPort hp;
  int db = 0;
};
std::vector<Node> hosts_of(const std::string& url) {
  auto u = dblock::detail::parse_url(url);
  std::vector<Node> out;
  for (const auto& hp : u.hosts) out.push_back(Node{hp, u.path.empty() ? 0 : std::stoi(u.path)});
  return out;
}

// One raw command behind the library's back, on the test's database (redis_raw).
std::string raw(const Node& n, const std::vector<std::string>& argv) {
  return dblock::test::redis_raw(n.hp, argv, n.db);
}

// Stops redlock nodes (SHUTDOWN NOSAVE over hiredis) and starts them again when it goes out
// of scope (DBLOCK_TEST_REDLOCK_START), so a failing test leaves the nodes running.
class StoppedNodes {
 public:
  StoppedNodes(const std::string& url, std::vector<int> which) {
    auto hosts = hosts_of(url);
    for (int i : which) {
      raw(hosts[i], {"SHUTDOWN", "NOSAVE"});
      REQUIRE(eventually([&] { return raw(hosts[i], {"PING"}).empty(); }, 5s));
    }
  }
  ~StoppedNodes() {
    const char* start = std::getenv("DBLOCK_TEST_REDLOCK_START");
    if (start && *start && std::system(start) != 0) WARN("DBLOCK_TEST_REDLOCK_START failed");
  }
};

// A redis-py process holding `name` (timeout ttl_s) until killed; ready once `ready` exists.
pid_t python_holder(const std::string& url, const std::string& name, const std::string& ready) {
  const char* code = R"py(
import sys, time, redis
r = redis.Redis.from_url(sys.argv[1])
lock = r.lock(sys.argv[2], timeout=30)
assert lock.acquire(blocking=True, blocking_timeout=10)
open(sys.argv[3], "w").write("held")
time.sleep(60)
)py";
  return dblock::test::spawn({"/usr/bin/python3", "-c", code, url, name, ready});
}

// redis-py's non-blocking acquire and release on `name`: "True"/"False" for the acquire.
std::string python_try(const std::string& url, const std::string& name, const std::string& out) {
  const char* code = R"py(
import sys, redis
r = redis.Redis.from_url(sys.argv[1])
lock = r.lock(sys.argv[2], timeout=30)
got = lock.acquire(blocking=False)
if got: lock.release()
open(sys.argv[3], "w").write(str(got))
)py";
  std::filesystem::remove(out);
  auto pid = dblock::test::spawn({"/usr/bin/python3", "-c", code, url, name, out});
  REQUIRE(dblock::test::wait_exit(pid) == 0);
  std::string s;
  std::ifstream(out) >> s;
  return s;
}

}  // namespace

TEST_CASE("redis: dblock and redis-py locks on the same name exclude each other", "[redis]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  auto c = ns.open();
  auto ready = f.dir.path() + "/ready";
  // redis-py holds: dblock cannot take it, and waits no longer than redis-py's TTL says.
  auto pid = python_holder(ns.url, "shared", ready);
  REQUIRE(eventually([&] { return std::filesystem::exists(ready); }));
  CHECK_FALSE(c->lock("shared", opts(Strategy::redis)).try_acquire());
  CHECK_FALSE(c->lock("shared", opts(Strategy::redis)).try_acquire(200ms));
  CHECK(c->list().empty());                 // a foreign lock is not a dblock lease
  CHECK_FALSE(c->force_release("shared"));  // nor does an operator's force release touch it
  kill(pid, SIGKILL);
  dblock::test::wait_exit(pid);
  // The dead redis-py holder's key stays until its timeout; delete it as its owner would.
  raw(hosts_of(ns.url)[0], {"DEL", "shared"});
  // dblock holds: redis-py's non-blocking acquire fails; after the release it succeeds.
  auto lease = c->lock("shared", opts(Strategy::redis)).try_acquire();
  REQUIRE(lease);
  CHECK(python_try(ns.url, "shared", f.dir.path() + "/py") == "False");
  CHECK_FALSE(lease->lost());
  lease->release();
  CHECK(python_try(ns.url, "shared", f.dir.path() + "/py") == "True");
  CHECK(c->lock("shared", opts(Strategy::redis)).try_acquire());
}

TEST_CASE("redis: a busy attempt takes no fence number; an older dblock's lock is a foreign holder", "[redis]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  auto c = ns.open(), other = ns.open();
  auto server = hosts_of(ns.url)[0];
  const std::string counter = "dblock_locks:fence:numbered";
  auto first = c->lock("numbered", opts(Strategy::redis)).acquire();
  CHECK(raw(server, {"GET", counter}) == std::to_string(first.fence()));
  // A busy attempt leaves the counter alone: it stays at the last fence granted.
  for (int i = 0; i < 5; ++i) CHECK_FALSE(other->lock("numbered", opts(Strategy::redis)).try_acquire());
  CHECK(raw(server, {"GET", counter}) == std::to_string(first.fence()));
  first.release();
  // With the counter set far ahead of the clock, the next grant takes the very next number.
  const auto ahead = first.fence() + 1'000'000'000'000ULL;
  REQUIRE(raw(server, {"SET", counter, std::to_string(ahead)}) == "OK");
  auto second = other->lock("numbered", opts(Strategy::redis)).acquire();
  CHECK(second.fence() == ahead + 1);
  CHECK(raw(server, {"GET", "numbered"}).find(std::to_string(second.fence()) + " 1 ") == 0);  // the record
  second.release();
  CHECK(raw(server, {"EXISTS", "numbered"}) == "0");
  // A dblock from before 2026-11 kept the owner alone as the value: neither side reads the
  // other's grant as its own, so they exclude each other; this one does not list it or
  // force-release it.
  REQUIRE(raw(server, {"SET", "numbered", "otherhost:42:0123456789abcdef:t1", "PX", "30000"}) == "OK");
  CHECK_FALSE(c->lock("numbered", opts(Strategy::redis)).try_acquire());
  CHECK(c->list().empty());
  CHECK_FALSE(c->force_release("numbered"));
  CHECK(raw(server, {"DEL", "numbered"}) == "1");
}

TEST_CASE("redis: after SCRIPT FLUSH acquire, renew and release still work", "[redis]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  auto c = ns.open();
  auto server = hosts_of(ns.url)[0];
  auto first = c->lock("job", opts(Strategy::redis)).acquire();
  first.release();
  REQUIRE(raw(server, {"SCRIPT", "FLUSH"}) == "OK");
  auto o = opts(Strategy::redis, 300ms);
  auto lease = c->lock("job", o).acquire();  // EVALSHA: NOSCRIPT, then EVAL
  CHECK(lease.fence() > first.fence());
  REQUIRE(raw(server, {"SCRIPT", "FLUSH"}) == "OK");
  std::this_thread::sleep_for(700ms);  // renewals through a flushed cache
  CHECK_FALSE(lease.lost());
  REQUIRE(raw(server, {"SCRIPT", "FLUSH"}) == "OK");
  CHECK_NOTHROW(lease.release());
  CHECK(c->list().empty());
}

TEST_CASE("redis: a lease survives a server restart; renewal resumes and fences keep increasing", "[redis]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  const char* restart = std::getenv("DBLOCK_TEST_REDIS_RESTART");
  if (!restart || !*restart) FAIL("DBLOCK_TEST_REDIS_RESTART is not set (scripts/services env redis)");
  auto c = ns.open(), other = ns.open();
  // A TTL that outlasts a restart under load (CI: several seconds): the key's expiry is
  // absolute, so a restart longer than the time left since the last renewal expires it.
  auto lease = c->lock("job", opts(Strategy::redis, 12s)).acquire();
  auto before = lease.fence();
  REQUIRE(std::system(restart) == 0);  // the append-only file keeps the keys
  CHECK_FALSE(other->lock("job", opts(Strategy::redis)).try_acquire(300ms));
  std::this_thread::sleep_for(4500ms);  // past a renewal period (4 s): it reconnects and renews
  CHECK_FALSE(lease.lost());
  CHECK(lease.remaining() > 7s);
  lease.release();
  auto next = other->lock("job", opts(Strategy::redis)).try_acquire(2s);
  REQUIRE(next);
  CHECK(next->fence() > before);
}

// A server at maxclients accepts a connection, answers its first command with "ERR max number
// of clients reached" and closes it; that was an internal error (exit 70). Now it is the
// server being full: a wait goes on until a slot frees (connection_slot_check.hpp).
TEST_CASE("redis: a server with no client slot left waits for one within the acquire's wait", "[redis]") {
  const auto url = dblock::test::with_fresh_redis_db(dblock::test::server_url("DBLOCK_TEST_REDIS_URL"));
  const auto hp = dblock::detail::parse_url(url).hosts.at(0);
  auto redis = [&](const std::vector<std::string>& argv) { return dblock::test::redis_raw(hp, argv); };
  const auto maxclients = redis({"CONFIG", "GET", "maxclients"});
  REQUIRE_FALSE(maxclients.empty());
  struct Restore {
    std::function<void()> f;
    ~Restore() { f(); }
  } restore{[&] {
    redis({"CONFIG", "SET", "maxclients", maxclients});
    dblock::test::drop_redis_db(url);
  }};
  // The test's own connection (redis_raw's, one per command) and 5 more.
  REQUIRE(redis({"CONFIG", "SET", "maxclients", "6"}) == "OK");
  dblock::test::check_waits_for_a_connection_slot(
      url, "max number of clients reached", dblock::ClientOptions{},
      [&] {  // every other client (the Client's pool and its subscriber)
        redis({"CLIENT", "KILL", "SKIPME", "yes"});
        REQUIRE(dblock::test::eventually([&] {
          auto info = redis({"INFO", "clients"});
          return info.find("connected_clients:1\r") != std::string::npos;
        }));
      },
      [&] {
        std::shared_ptr<redisContext> c(redisConnect(hp.host.c_str(), hp.port), [](redisContext* p) {
          if (p) redisFree(p);
        });
        if (!c || c->err) throw std::runtime_error("cannot connect");
        auto* r = static_cast<redisReply*>(redisCommand(c.get(), "PING"));
        std::string refusal = !r ? "no answer" : r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "";
        if (r) freeReplyObject(r);
        if (!refusal.empty()) throw std::runtime_error(refusal);
        return dblock::test::Squatter(c);
      });
}

TEST_CASE("redis: an unreachable server is an UnavailableError that never shows the password", "[redis]") {
  // A port nobody listens on: a free port just bound and closed.
  std::string url = "redis://:s3cr3t-pw@127.0.0.1:1/0";
  try {
    dblock::Client::open(url);
    FAIL("opened an unreachable server");
  } catch (const dblock::UnavailableError& e) {
    CHECK(std::string(e.what()).find("s3cr3t-pw") == std::string::npos);
    CHECK(std::string(e.what()).find("127.0.0.1:1") != std::string::npos);
  }
  try {
    dblock::Client::open("redlock://:s3cr3t-pw@127.0.0.1:1,127.0.0.1:2,127.0.0.1:3");
    FAIL("opened unreachable nodes");
  } catch (const dblock::UnavailableError& e) {
    CHECK(std::string(e.what()).find("s3cr3t-pw") == std::string::npos);
  }
  // A wrong password on a server without one configured: refused, and not echoed either.
  auto real = dblock::test::server_url("DBLOCK_TEST_REDIS_URL");
  auto hp = hosts_of(real)[0].hp;
  try {
    dblock::Client::open("redis://someone:s3cr3t-pw@" + hp.host + ":" + std::to_string(hp.port));
    FAIL("opened with bad credentials");
  } catch (const dblock::UnavailableError& e) {
    CHECK(std::string(e.what()).find("s3cr3t-pw") == std::string::npos);
  }
  CHECK_THROWS_AS(dblock::Client::open("redis://127.0.0.1:6379/notanumber"), dblock::UsageError);
  CHECK_THROWS_AS(dblock::Client::open("redis://127.0.0.1:1,127.0.0.1:2"), dblock::UsageError);
}

TEST_CASE("redlock: the node count must be odd", "[redis]") {
  auto check = [](const std::string& url) {
    try {
      dblock::Client::open(url);
      FAIL("accepted " << url);
    } catch (const dblock::UsageError& e) {
      CHECK(std::string(e.what()).find("odd number") != std::string::npos);
    }
  };
  check("redlock://127.0.0.1:1,127.0.0.1:2");
  check("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4");
  CHECK_THROWS_AS(dblock::Client::open("redlock://"), dblock::UsageError);
}

TEST_CASE("redlock: with one node down, locks still work on the majority and fences increase", "[redis]") {
  dblock::test::Redlock f;
  auto ns = f.make();
  auto c = ns.open(), other = ns.open();
  auto first = c->lock("job", opts(Strategy::redlock)).acquire();
  auto f1 = first.fence();
  first.release();
  StoppedNodes down(ns.url, {2});
  auto t0 = Clock::now();
  auto second = c->lock("job", opts(Strategy::redlock, 600ms)).acquire();
  CHECK(Clock::now() - t0 < 1s);
  CHECK(second.fence() > f1);
  CHECK_FALSE(other->lock("job", opts(Strategy::redlock)).try_acquire());
  std::this_thread::sleep_for(1200ms);  // renewals on the four live nodes
  CHECK_FALSE(second.lost());
  second.release();
  auto third = other->lock("job", opts(Strategy::redlock)).try_acquire(2s);
  REQUIRE(third);
  CHECK(third->fence() > second.fence());
  CHECK(other->list().size() == 1);
}

// Freezes one redlock node (SIGSTOP: it still accepts connections, as a hung or swapping
// server does, but answers nothing) and thaws it when it goes out of scope.
class FrozenNode {
 public:
  FrozenNode(const std::string& url, int which) {
    auto info = raw(hosts_of(url).at(static_cast<std::size_t>(which)), {"INFO", "server"});
    auto at = info.find("process_id:");
    REQUIRE(at != std::string::npos);
    pid_ = static_cast<pid_t>(std::stol(info.substr(at + 11)));
    REQUIRE(::kill(pid_, SIGSTOP) == 0);
  }
  ~FrozenNode() { ::kill(pid_, SIGCONT); }

 private:
  pid_t pid_ = 0;
};

TEST_CASE("redlock: a hung node costs one per-node timeout a second, not one per call", "[redis]") {
  dblock::test::Redlock f;
  auto ns = f.make();
  auto c = ns.open();
  auto lock = c->lock("job", opts(Strategy::redlock, 1s));  // per-node timeout: 100 ms
  lock.acquire().release();  // connections to every node, in the pool
  std::uint64_t last = 0;
  FrozenNode frozen(ns.url, 1);
  // 20 cycles asking the frozen node each time: 20 x (100 ms acquire + 500 ms release).
  // Resting it after its first timeout, they take about one timeout a second.
  auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) {
    auto lease = lock.try_acquire();
    REQUIRE(lease);
    CHECK(lease->fence() > last);
    last = lease->fence();
    lease->release();
  }
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  INFO("20 cycles with a frozen node took " << took.count() << " ms");
  CHECK(took < 4s);
}

TEST_CASE("redlock: a release returns at a majority; the late answers are dropped, not misread", "[redis]") {
  // A release (or renewal) stops waiting once a majority answered; the slower nodes' answers
  // then arrive ahead of the next call's on those connections. Were one read as the next
  // acquire's answer, that acquire would see an integer where a grant is due and fail.
  dblock::test::Redlock f;
  auto ns = f.make();
  auto c = ns.open();
  // Renewed every 200 ms. With a TTL of 600 ms each node had 60 ms to answer (TTL / 10), and
  // on a loaded CI machine an acquire once found no majority in time (busy, not the misread
  // this checks): 3 s gives the nodes 100 ms, the interval keeps the renewals in between.
  auto o = opts(Strategy::redlock, 3s);
  o.renew_every = 200ms;
  auto lock = c->lock("job", o);
  std::uint64_t last = 0;
  for (int i = 0; i < 300; ++i) {
    auto lease = lock.try_acquire();
    REQUIRE(lease);
    CHECK(lease->fence() > last);
    last = lease->fence();
    if (i % 60 == 0) std::this_thread::sleep_for(700ms);  // renewals in between
    CHECK_FALSE(lease->lost());
    lease->release();
  }
  // Every node ran its release, read or not: the name is free everywhere.
  for (const auto& hp : hosts_of(ns.url))
    CHECK(eventually([&] { return raw(hp, {"EXISTS", "job"}) == "0"; }, 2s));
}

TEST_CASE("redlock: an acquire won at a majority notices a late node out of step and brings it back", "[redis]") {
  // An acquire returns once a majority granted with one fence. Node 4 is made to answer late
  // every time (a Lua busy loop holds it for 60 ms, less than the 100 ms per-node timeout)
  // and its counter is far ahead, so its grants carry another fence than the majority's.
  // That late answer, read by the next call, must make the next acquire read every node and
  // write the fence back: without it node 4's fences are never seen.
  dblock::test::Redlock f;
  auto ns = f.make();
  auto c = ns.open();
  auto lock = c->lock("job", opts(Strategy::redlock, 1s));  // per-node timeout 100 ms
  auto hosts = hosts_of(ns.url);
  const std::string counter = "dblock_locks:fence:job";
  auto first = lock.acquire();
  std::uint64_t last = first.fence();
  first.release();
  const auto ahead = last + 1'000'000'000'000ULL;  // past the clock floor for 11 days
  REQUIRE(raw(hosts[4], {"SET", counter, std::to_string(ahead)}) == "OK");
  const std::string spin =
      "local t = redis.call('TIME') local until_us = t[1] * 1000000 + t[2] + 60000 "
      "repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] >= until_us return 1";
  for (int i = 0; i < 6; ++i) {
    std::thread busy([&] { raw(hosts[4], {"EVAL", spin, "0"}); });
    std::this_thread::sleep_for(10ms);  // the busy loop has started
    auto lease = lock.try_acquire(3s);
    REQUIRE(lease);
    CHECK(lease->fence() > last);
    last = lease->fence();
    lease->release();
    busy.join();
  }
  CHECK(last > ahead);  // node 4's fence was seen (and written back to every node)
  // Node 4's leftover hold (its release did not match) expires within its 1 s TTL.
  for (const auto& hp : hosts) CHECK(eventually([&] { return raw(hp, {"EXISTS", "job"}) == "0"; }, 3s));
  auto again = lock.acquire();
  CHECK(again.fence() > last);
  again.release();
  // A majority granted with this one fence: their counters stand at it. Not every node
  // need: under a slow build (TSan) node 4 can miss its 100 ms timeout in the loop and
  // rest for a second, and a rested node is not asked (one CI run found it at F - 1).
  int at_fence = 0;
  for (const auto& hp : hosts) at_fence += raw(hp, {"GET", counter}) == std::to_string(again.fence());
  CHECK(at_fence >= 3);
  for (const auto& hp : hosts) CHECK(eventually([&] { return raw(hp, {"EXISTS", "job"}) == "0"; }, 2s));
}

TEST_CASE("redlock: a node shut down under a live client costs no SIGPIPE and no lock", "[redis]") {
  // Once a majority has answered, the others' answers are left unread on connections that
  // stay pooled. A node that shuts down meanwhile resets them; hiredis writes with write(2),
  // and a second write to a reset socket raised SIGPIPE, which killed this process (the
  // default action) until the library sent with MSG_NOSIGNAL.
  dblock::test::Redlock f;
  auto ns = f.make();
  auto c = ns.open();
  auto lock = c->lock("job", opts(Strategy::redlock, 2s));
  std::uint64_t last = 0;
  auto cycle = [&] {
    auto lease = lock.try_acquire(2s);
    REQUIRE(lease);
    CHECK(lease->fence() > last);
    last = lease->fence();
    lease->release();
  };
  // Each round: connections to every node, some owing answers, then two nodes go away
  // under them; the first calls after run into the resets.
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 20; ++i) cycle();
    {
      StoppedNodes down(ns.url, {round % 5, (round + 2) % 5});
      for (int i = 0; i < 20; ++i) cycle();
    }
    std::this_thread::sleep_for(1100ms);  // the restarted nodes are asked again
  }
}

TEST_CASE("redlock: with a majority down an attempt fails fast with UnavailableError", "[redis]") {
  dblock::test::Redlock f;
  auto ns = f.make();
  auto c = ns.open();
  StoppedNodes down(ns.url, {0, 1, 2});
  for (int i = 0; i < 3; ++i) {
    auto t0 = Clock::now();
    CHECK_THROWS_AS(c->lock("job", opts(Strategy::redlock)).try_acquire(), dblock::UnavailableError);
    CHECK(Clock::now() - t0 < 500ms);
  }
  // A new client cannot open either: fewer than a majority reachable.
  CHECK_THROWS_AS(ns.open(), dblock::UnavailableError);
}

TEST_CASE("redlock: fences strictly increase when successive grants win different majorities", "[redis]") {
  dblock::test::Redlock f;
  auto ns = f.make();
  auto c = ns.open();
  std::uint64_t last = 0;
  auto grant = [&] {
    auto lease = c->lock("job", opts(Strategy::redlock)).try_acquire(2s);
    REQUIRE(lease);
    CHECK(lease->fence() > last);
    last = lease->fence();
    lease->release();
  };
  grant();
  for (std::vector<int> nodes : {std::vector<int>{0, 1}, {3, 4}, {1, 2}, {0, 4}}) {
    {
      StoppedNodes down(ns.url, nodes);
      grant();
      grant();
    }
    // A client retries a node it saw fail once a second: let it see the restarted ones.
    std::this_thread::sleep_for(1200ms);
  }
  grant();
}

TEMPLATE_TEST_CASE("redis, redlock: one lock has one fence counter, whatever the namespace", "[redis]",
                   dblock::test::RedisLock, dblock::test::Redlock) {
  // The lock key is the bare name in every namespace (redis-py interop), so two namespaces
  // share the lock; they must share its fences too, or X's fence 7 is followed by Y's 1.
  TestType f;
  auto ns = f.make();
  auto a = ns.options, b = ns.options;
  a.table = "app_a";
  b.table = "app_b";
  auto x = dblock::Client::open(ns.url, a), y = dblock::Client::open(ns.url, b);
  const auto s = TestType::strategy;
  std::uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto held = x->lock("shared", opts(s)).acquire();
    CHECK(held.fence() > last);
    CHECK_FALSE(y->lock("shared", opts(s)).try_acquire());  // one lock: they exclude each other
    CHECK(y->list().size() == 1);                           // and see each other's leases
    held.release();
    auto next = y->lock("shared", opts(s)).acquire();
    CHECK(next.fence() > held.fence());
    last = next.fence();
    next.release();
  }
}

TEMPLATE_TEST_CASE("redis, redlock: a name that is a fence counter is refused", "[redis]", dblock::test::RedisLock,
                   dblock::test::Redlock) {
  TestType f;
  auto c = f.make().open();
  auto held = c->lock("job", opts(TestType::strategy)).acquire();
  CHECK_THROWS_AS(c->lock("dblock_locks:fence:job", opts(TestType::strategy)), dblock::UsageError);
  CHECK_THROWS_AS(c->force_release("dblock_locks:fence:job"), dblock::UsageError);
  CHECK(c->lock("dblock_locks:job", opts(TestType::strategy)).try_acquire());  // other names are data
  for (const auto& n : hosts_of(f.url))
    CHECK(raw(n, {"GET", "dblock_locks:fence:job"}) == std::to_string(held.fence()));
}

namespace {
// The library's own connection to a test node, for calling its scripts by hand.
std::unique_ptr<dblock::detail::redis::Connection> connect(const Node& n) {
  dblock::detail::redis::Target t;
  t.host = n.hp.host;
  t.port = n.hp.port;
  t.db = n.db;
  t.where = "test node";
  return std::make_unique<dblock::detail::redis::Connection>(t);
}
}  // namespace

TEST_CASE("redis: a renewal keeps the longer of what is left and the new TTL", "[redis]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  auto c = ns.open();
  auto server = hosts_of(ns.url)[0];
  auto lease = c->lock("job", opts(Strategy::redis, 30s)).acquire();
  auto owner = c->list().at(0).owner;
  // A renewal asking for 1 s (an outer hold's, under a re-entry that asked for 30 s) must not
  // cut the key short, as the SQL strategies' renewals do not.
  auto conn = connect(server);
  auto r = conn->eval(dblock::detail::redis::renew_script(), {"job"}, {owner, std::to_string(lease.fence()), "1000", "1"});
  REQUIRE(r->type == REDIS_REPLY_INTEGER);
  CHECK(r->integer > 20000);
  CHECK(std::stoll(raw(server, {"PTTL", "job"})) > 20000);
  // A longer one extends it.
  r = conn->eval(dblock::detail::redis::renew_script(), {"job"}, {owner, std::to_string(lease.fence()), "60000", "1"});
  CHECK(std::stoll(raw(server, {"PTTL", "job"})) > 50000);
  // A change of the hold count keeps the key's time too.
  r = conn->eval(dblock::detail::redis::renew_script(), {"job"}, {owner, std::to_string(lease.fence()), "0", "3"});
  CHECK(std::stoll(raw(server, {"PTTL", "job"})) > 50000);
  CHECK(c->list().at(0).holds == 1);  // the client's own count: the record's is a copy it writes
  CHECK(raw(server, {"GET", "job"}).find(std::to_string(lease.fence()) + " 3 ") == 0);
  lease.release();
}

TEST_CASE("redlock: an undo removes only what its own attempt wrote", "[redis]") {
  // An attempt that did not win sends its undo to every node whose answer it did not read,
  // so the undo reaches nodes where the attempt never ran: there it must leave the holder's
  // grant alone, or another client wins a majority while the holder still believes it holds.
  dblock::test::Redlock f;
  auto ns = f.make();
  auto c = ns.open(), other = ns.open();
  auto nodes = hosts_of(ns.url);
  auto lease = c->lock("job", opts(Strategy::redlock, 30s)).acquire();
  auto owner = c->list().at(0).owner;
  using dblock::detail::redis::free_script;
  using dblock::detail::redis::acquire_script;
  for (int twice = 0; twice < 2; ++twice)
    for (const auto& n : nodes) connect(n)->eval(free_script(), {"job"}, {owner, "attempt", "r-test", "dblock_locks:released"});
  for (const auto& n : nodes) {
    auto record = raw(n, {"GET", "job"});
    INFO("node " << n.hp.port << ": " << record);
    CHECK(record.find(std::to_string(lease.fence()) + " 1 ") == 0);  // held, once
  }
  CHECK_FALSE(other->lock("job", opts(Strategy::redlock)).try_acquire());
  CHECK_FALSE(lease.lost());
  // Where the attempt did run, its undo removes what it wrote.
  auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  auto now_ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count());
  auto granted = connect(nodes[0])->eval(acquire_script(), {"other", "dblock_locks:fence:other"},
                                         {owner, "30000", "0", now_ms, "r-test", ""});
  REQUIRE(granted->type == REDIS_REPLY_INTEGER);
  for (const auto& n : nodes) connect(n)->eval(free_script(), {"other"}, {owner, "attempt", "r-test", "dblock_locks:released"});
  CHECK(raw(nodes[0], {"EXISTS", "other"}) == "0");
  lease.release();
  for (const auto& n : nodes) CHECK(eventually([&] { return raw(n, {"EXISTS", "job"}) == "0"; }, 2s));
}

namespace {
// Redis servers of the test's own, killed with SIGKILL (a crash, not a SHUTDOWN) and started
// again on the same port and directory.
class CrashableRedis {
 public:
  CrashableRedis(const std::string& dir, int port, std::vector<std::string> persistence)
      : dir_(dir), port_(port), persistence_(std::move(persistence)) {
    start();
  }
  ~CrashableRedis() { crash(); }
  void start() {
    const char* server = std::getenv("DBLOCK_REDIS_SERVER");
    std::vector<std::string> argv{server && *server ? server : "/usr/bin/redis-server",
                                  "--bind", "127.0.0.1", "--port", std::to_string(port_), "--dir", dir_,
                                  "--daemonize", "no", "--protected-mode", "no", "--save", "", "--logfile",
                                  dir_ + "/server.log"};
    argv.insert(argv.end(), persistence_.begin(), persistence_.end());
    REQUIRE(std::filesystem::exists(argv[0]));
    pid_ = dblock::test::spawn(argv);
    if (!eventually([&] { return raw(node(), {"PING"}) == "PONG"; }, 10s)) {
      std::ifstream log(dir_ + "/server.log");
      FAIL("redis-server on port " << port_ << " did not answer; its log:\n" << log.rdbuf());
    }
  }
  void crash() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    dblock::test::wait_exit(pid_);
    pid_ = 0;
  }
  Node node() const { return Node{dblock::detail::HostPort{"127.0.0.1", port_}, 0}; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::string dir_;
  int port_;
  std::vector<std::string> persistence_;
  pid_t pid_ = 0;
};

// Below the kernel's ephemeral ports (32768 and up), so that no client connection holds it,
// and clear of the test services' ports.
int test_port(int offset) { return 22000 + static_cast<int>(::getpid() % 1900) * 5 + offset; }
}  // namespace

TEST_CASE("redis, redlock: fences keep increasing across a crash that loses the counters", "[redis]") {
  // SIGKILL right after grants. With no persistence every key is gone after the restart, as
  // the last second of INCRs is with appendfsync everysec on a machine crash, or on a
  // failover to a replica that had not seen them: the next fence must still be greater.
  const std::vector<std::string> none{"--appendonly", "no"};
  const std::vector<std::string> everysec{"--appendonly", "yes", "--appendfsync", "everysec"};
  for (const auto& persistence : {none, everysec}) {
    for (int nodes : {1, 3}) {
      INFO("persistence " << persistence[1] << ", " << nodes << " node(s)");
      dblock::test::TempDir dir;
      std::vector<std::unique_ptr<CrashableRedis>> servers;
      std::string url = nodes == 1 ? "redis://" : "redlock://";
      for (int i = 0; i < nodes; ++i) {
        const auto data = dir.path() + "/" + std::to_string(i);
        std::filesystem::create_directory(data);
        servers.push_back(std::make_unique<CrashableRedis>(data, test_port(i), persistence));
        url += (i ? "," : "") + servers.back()->address();
      }
      const auto s = nodes == 1 ? Strategy::redis : Strategy::redlock;
      std::uint64_t last = 0;
      {
        auto c = dblock::Client::open(url);
        for (int i = 0; i < 20; ++i) {
          auto lease = c->lock("crashing", opts(s)).acquire();
          CHECK(lease.fence() > last);
          last = lease.fence();
          lease.release();
        }
      }
      for (auto& srv : servers) srv->crash();
      for (auto& srv : servers) srv->start();
      auto c = dblock::Client::open(url);
      auto next = c->lock("crashing", opts(s)).try_acquire(5s);
      REQUIRE(next);
      CHECK(next->fence() > last);
      next->release();
    }
  }
}

namespace {
LockOptions permits_opts(std::uint32_t permits) {
  auto o = opts(Strategy::redis);
  o.permits = permits;
  return o;
}
}  // namespace

TEST_CASE("redis: shaped locks keep their holders in a hash on the lock's key, writers preferred", "[redis][shapes]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  auto a = ns.open(), b = ns.open(), w = ns.open();
  auto server = hosts_of(ns.url)[0];
  auto r1 = a->lock("doc", opts(Strategy::redis)).acquire_shared();
  auto r2 = b->lock("doc", opts(Strategy::redis)).acquire_shared();
  CHECK(raw(server, {"TYPE", "doc"}) == "hash");
  CHECK(raw(server, {"HGET", "doc", ":permits"}) == "1");
  CHECK(raw(server, {"GET", "dblock_locks:fence:doc"}) == std::to_string(r2.fence()));
  auto listed = a->list();
  REQUIRE(listed.size() == 2);
  for (const auto& li : listed) {
    CHECK(li.mode == dblock::Mode::shared);
    // "<mode> <fence> <expires_at ms> <holds> <acquired_at ms>"
    auto v = raw(server, {"HGET", "doc", li.owner});
    CHECK(v.rfind("s " + std::to_string(li.fence) + " ", 0) == 0);
  }
  auto pttl = std::stoll(raw(server, {"PTTL", "doc"}));
  CHECK(pttl > 25000);
  CHECK(pttl <= 30000);  // the key lives as long as its latest holder
  // A try-lock writer that finds readers leaves no mark: readers still come in.
  auto writer = w->lock("doc", opts(Strategy::redis));
  CHECK_FALSE(writer.try_acquire());
  CHECK(raw(server, {"HEXISTS", "doc", ":writer"}) == "0");
  // A waiting writer marks the hash: new readers are busy, held readers still re-enter.
  std::optional<dblock::Lease> held;
  std::thread waiting([&] { held = writer.try_acquire(20s); });
  REQUIRE(eventually([&] { return raw(server, {"HEXISTS", "doc", ":writer"}) == "1"; }, 5s));
  CHECK(std::stoll(raw(server, {"HGET", "doc", ":writer"})) > 0);
  auto late = ns.open();
  CHECK_FALSE(late->lock("doc", opts(Strategy::redis)).try_acquire_shared());
  auto again = a->lock("doc", opts(Strategy::redis)).try_acquire_shared();  // a re-entry is no new reader
  REQUIRE(again);
  again.reset();
  r1.release();
  r2.release();
  // The writer takes it (woken by the last reader's release), as the plain record.
  waiting.join();
  REQUIRE(held);
  CHECK(raw(server, {"TYPE", "doc"}) == "string");
  CHECK(raw(server, {"GET", "doc"}).rfind(std::to_string(held->fence()) + " 1 ", 0) == 0);
  CHECK(held->fence() > r2.fence());
  held->release();
  CHECK(raw(server, {"EXISTS", "doc"}) == "0");
  // Without a writer waiting, the key goes with its last reader.
  auto r3 = a->lock("doc", opts(Strategy::redis)).acquire_shared();
  r3.release();
  CHECK(raw(server, {"EXISTS", "doc"}) == "0");
  // A semaphore's hash records its permits; force release frees every holder at once.
  auto s1 = a->lock("pool", permits_opts(2)).acquire();
  auto s2 = b->lock("pool", permits_opts(2)).acquire();
  CHECK(raw(server, {"HGET", "pool", ":permits"}) == "2");
  CHECK(a->list().size() == 2);
  CHECK(a->force_release("pool"));
  CHECK(raw(server, {"EXISTS", "pool"}) == "0");
  CHECK(w->lock("pool", permits_opts(2)).try_acquire());
}

TEST_CASE("redis: readers that waited for a writer get in before it comes back", "[redis][shapes]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  auto w = ns.open(), r = ns.open();
  auto server = hosts_of(ns.url)[0];
  auto writer = w->lock("doc", opts(Strategy::redis));
  auto first = writer.acquire();
  std::optional<dblock::Lease> read;
  std::thread reader([&] { read = r->lock("doc", opts(Strategy::redis)).try_acquire_shared(20s); });
  // "<fence> <holds> <acquired_at> <waiting> ...": 2 once the waiting reader flagged it.
  auto flagged = [&] {
    auto v = raw(server, {"GET", "doc"});
    return v.size() > 2 && v.find(" 2 ", v.find(' ', v.find(' ') + 1)) != std::string::npos;
  };
  REQUIRE(eventually(flagged, 5s));
  first.release();
  // A writer that loops is back at once, and finds the readers' turn (or the reader in).
  CHECK_FALSE(writer.try_acquire());
  reader.join();
  REQUIRE(read);
  CHECK(read->fence() > first.fence());
  read->release();
  auto second = writer.try_acquire(5s);
  REQUIRE(second);
  CHECK(second->fence() > read->fence());
  // A turn that no reader takes (the reader gave up) holds a writer back for 100 ms at most.
  std::thread gives_up([&] { read = r->lock("doc", opts(Strategy::redis)).try_acquire_shared(300ms); });
  REQUIRE(eventually(flagged, 5s));
  gives_up.join();
  CHECK_FALSE(read);
  second->release();
  auto t0 = Clock::now();
  CHECK(writer.try_acquire(5s));
  CHECK(Clock::now() - t0 < 2s);
}

TEST_CASE("redis: expired holders are pruned, and a stale grant never touches a newer one", "[redis][shapes]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  auto a = ns.open(), b = ns.open();
  auto server = hosts_of(ns.url)[0];
  // A holder whose expiry has passed (its key kept by a live one) does not count.
  auto r1 = a->lock("pool", permits_opts(2)).acquire();
  REQUIRE(raw(server, {"HSET", "pool", "deadhost:1:00:t1", "x 5 1000 1 1000"}) == "1");
  auto r2 = b->lock("pool", permits_opts(2)).try_acquire();
  REQUIRE(r2);
  CHECK(raw(server, {"HEXISTS", "pool", "deadhost:1:00:t1"}) == "0");
  // Renewal and release name the grant by owner and fence: another fence changes nothing.
  auto owner = a->list().at(0).owner;
  auto conn = connect(server);
  auto stale = std::to_string(r1.fence() - 1);
  auto r = conn->eval(dblock::detail::redis::shaped_renew_script(), {"pool"}, {owner, stale, "60000", "1"});
  CHECK(r->type == REDIS_REPLY_NIL);
  r = conn->eval(dblock::detail::redis::shaped_release_script(), {"pool"}, {owner, stale, "dblock_locks:released"});
  CHECK(r->integer == 0);
  CHECK(raw(server, {"HEXISTS", "pool", owner}) == "1");
  // The exclusive scripts meet the hash as "not ours", never as an error.
  r = conn->eval(dblock::detail::redis::renew_script(), {"pool"}, {owner, std::to_string(r1.fence()), "60000", "1"});
  CHECK(r->type == REDIS_REPLY_NIL);
  r1.release();
  CHECK(raw(server, {"HEXISTS", "pool", owner}) == "0");
  r2->release();
  CHECK(raw(server, {"EXISTS", "pool"}) == "0");
}

TEST_CASE("redis: exclusive and shaped locks on one name exclude each other; other keys are refused", "[redis][shapes]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  auto c = ns.open(), other = ns.open();
  auto server = hosts_of(ns.url)[0];
  // A dblock writer (the plain record): readers and semaphore holders are busy or refused.
  {
    auto held = c->lock("name", opts(Strategy::redis)).acquire();
    CHECK_FALSE(other->lock("name", opts(Strategy::redis)).try_acquire_shared());
    CHECK_THROWS_WITH(other->lock("name", permits_opts(2)).try_acquire(),
                      Catch::Contains("mutex or read/write lock") && Catch::Contains("semaphore of 2 permits"));
  }
  // Readers hold: redis-py's lock (SET NX) and a dblock writer are busy; a semaphore is refused.
  {
    auto reader = c->lock("name", opts(Strategy::redis)).acquire_shared();
    CHECK(python_try(ns.url, "name", f.dir.path() + "/py") == "False");
    CHECK_FALSE(other->lock("name", opts(Strategy::redis)).try_acquire());
    CHECK_THROWS_AS(other->lock("name", permits_opts(3)).try_acquire(), dblock::UsageError);
  }
  // A redis-py holder: a reader is busy, and waits no longer than its TTL says.
  auto ready = f.dir.path() + "/ready";
  auto pid = python_holder(ns.url, "name", ready);
  REQUIRE(eventually([&] { return std::filesystem::exists(ready); }));
  CHECK_FALSE(c->lock("name", opts(Strategy::redis)).try_acquire_shared());
  kill(pid, SIGKILL);
  dblock::test::wait_exit(pid);
  raw(server, {"DEL", "name"});
  // A key of another type, or a hash that is not a dblock lock, is refused and left alone.
  // (its field even looks like a holder's, but the hash has no ':permits')
  REQUIRE(raw(server, {"HSET", "name", "field", "value", "h:1:0:t1", "s 5 99999999999999 1 0"}) == "2");
  CHECK_THROWS_WITH(c->lock("name", opts(Strategy::redis)).try_acquire_shared(), Catch::Contains("not a dblock lock"));
  CHECK_THROWS_AS(c->lock("name", opts(Strategy::redis)).try_acquire(), dblock::UsageError);
  CHECK_FALSE(c->force_release("name"));
  CHECK(raw(server, {"HGET", "name", "field"}) == "value");
  CHECK(raw(server, {"HLEN", "name"}) == "2");
  CHECK(c->list().empty());
  raw(server, {"DEL", "name"});
  REQUIRE(raw(server, {"RPUSH", "name", "x"}) == "1");
  CHECK_THROWS_WITH(c->lock("name", permits_opts(2)).try_acquire(), Catch::Contains("list"));
  CHECK_THROWS_AS(c->lock("name", opts(Strategy::redis)).try_acquire(), dblock::UsageError);
  raw(server, {"DEL", "name"});
}

// Fair waiting (LockOptions::fair, the redis strategy's queue: docs/ARCHITECTURE.md, "Redis
// and Redlock"). Bounds are loose: the suite runs under the sanitizers on a loaded
// machine, and what is checked is the order and that nothing is left behind, not speed.
namespace {

// The server that holds a fixture's keys (a redis-sentinel URL: the master its Sentinels name).
Node data_node(const std::string& url) {
  auto u = dblock::detail::parse_url(url);
  if (u.scheme != "redis-sentinel") return hosts_of(url)[0];
  return Node{dblock::test::sentinel_master(u), std::stoi(u.query.at("db"))};
}

std::string queued(const Node& n, const std::string& name) {
  return raw(n, {"ZCARD", dblock::detail::redis::keys::queue(name)});
}
// Whether either key of the name's queue exists.
std::string queue_keys(const Node& n, const std::string& name) {
  using namespace dblock::detail::redis;
  return raw(n, {"EXISTS", keys::queue(name), keys::alive(name)});
}

// H holds; A, then B once A is queued, wait; H releases and asks again at once. Fair: A, B,
// then H are granted in that order, and the queue is gone after. Unfair: all three get it.
template <class Fixture>
void check_arrival_order(bool fair) {
  Fixture f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto h = ns.open(), a = ns.open(), b = ns.open();
  auto o = opts(Strategy::redis);
  o.fair = fair;
  std::mutex m;
  std::vector<std::string> order;
  auto take = [&](dblock::Client& c, const std::string& who) {
    std::string what = who;
    try {
      auto l = c.lock("line", o).try_acquire(60s);
      if (!l) what += " timed out";
      {
        std::lock_guard lk(m);
        order.push_back(what);
      }
      if (l) {
        std::this_thread::sleep_for(20ms);
        l->release();
      }
    } catch (const std::exception& e) {
      std::lock_guard lk(m);
      order.push_back(who + ": " + e.what());
    }
  };
  auto held = h->lock("line", o).acquire();
  auto in_line = [&](const char* n) {
    if (fair) REQUIRE(eventually([&] { return queued(node, "line") == n; }, 20s));
    else std::this_thread::sleep_for(200ms);
  };
  auto ta = std::async(std::launch::async, take, std::ref(*a), "A");
  in_line("1");
  auto tb = std::async(std::launch::async, take, std::ref(*b), "B");
  in_line("2");
  held.release();
  take(*h, "H");
  ta.get();
  tb.get();
  if (!fair) std::sort(order.begin(), order.end());  // any order, as long as each got it
  CHECK(order == std::vector<std::string>{"A", "B", "H"});
  CHECK(queue_keys(node, "line") == "0");
}

}  // namespace

TEST_CASE("redis: fair waiters are granted in arrival order, the releaser asking again last", "[redis]") {
  SECTION("fair") { check_arrival_order<dblock::test::RedisLock>(true); }
  SECTION("unfair") { check_arrival_order<dblock::test::RedisLock>(false); }
}

TEST_CASE("redis-sentinel: fair waiters are granted in arrival order on the master", "[redis-sentinel]") {
  check_arrival_order<dblock::test::SentinelLock>(true);
}

TEST_CASE("redis: a fair waiter that gives up leaves no ticket behind, and a try writes none", "[redis]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto h = ns.open(), w = ns.open(), x = ns.open();
  auto held = h->lock("line", opts(Strategy::redis)).acquire();
  CHECK_FALSE(w->lock("line", opts(Strategy::redis)).try_acquire());
  CHECK(queue_keys(node, "line") == "0");
  CHECK_FALSE(w->lock("line", opts(Strategy::redis)).try_acquire(300ms));  // it was queued meanwhile
  CHECK(queue_keys(node, "line") == "0");
  // The next waiter goes first at the release, not once a leftover ticket lapsed (3 s).
  auto granted = std::async(std::launch::async, [&] {
    auto l = x->lock("line", opts(Strategy::redis)).try_acquire(60s);
    return std::make_pair(l.has_value(), Clock::now());
  });
  REQUIRE(eventually([&] { return queued(node, "line") == "1"; }, 20s));
  const auto released = Clock::now();
  held.release();
  auto [got, at] = granted.get();
  CHECK(got);
  CHECK(at - released < 2s);
  CHECK(queue_keys(node, "line") == "0");
}

namespace {

namespace r = dblock::detail::redis;

// A ticket written behind the library's back, as a waiter that died leaves it: `owner` at
// `place` in the name's line, live for `life_ms` more on the server's clock, taking
// hand-overs as `lease` says ("LEASE_MS TOKEN LIST"; "": none).
void write_ticket(const Node& node, const std::string& name, const std::string& owner, int place, int life_ms,
                  const std::string& lease = "") {
  REQUIRE(raw(node, {"EVAL", R"lua(
local t = redis.call('TIME')
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[3]))
if ARGV[4] ~= '' then redis.call('HSET', KEYS[2], '\0' .. ARGV[1], ARGV[4]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return redis.call('PEXPIRE', KEYS[2], ARGV[3])
)lua", "2", r::keys::queue(name), r::keys::alive(name), owner, std::to_string(place), std::to_string(life_ms),
                     lease}) == "1");
}

// The owner first in `name`'s line, and its ticket's hand-over field, "LEASE_MS TOKEN LIST"
// (what a release reads to hand it the name), split in three.
std::string head_owner(const Node& node, const std::string& name) {
  return raw(node, {"EVAL", "return redis.call('ZRANGE', KEYS[1], 0, 0)[1]", "1", r::keys::queue(name)});
}
struct HandoverField {
  std::string whole, lease, token, list;
};
std::string handover_text(const Node& node, const std::string& name, const std::string& owner) {
  return raw(node, {"HGET", r::keys::alive(name), std::string(1, '\0') + owner});
}
HandoverField handover_field(const Node& node, const std::string& name, const std::string& owner) {
  HandoverField f;
  f.whole = handover_text(node, name, owner);
  const auto space = f.whole.find(' '), last = f.whole.rfind(' ');
  REQUIRE(space < last);
  f.lease = f.whole.substr(0, space);
  f.token = f.whole.substr(space + 1, last - space - 1);
  f.list = f.whole.substr(last + 1);
  return f;
}

// The redis strategy's driver alone on a fixture's server: no Client around it, no
// subscriber, so a test drives the queue's scripts one attempt at a time.
struct BareDriver {
  explicit BareDriver(const Node& node) : pool(r::opener(target(node)), r::pool_limits(target(node), 2)) {}
  static r::Target target(const Node& node) {
    r::Target t;
    t.host = node.hp.host;
    t.port = node.hp.port;
    t.db = node.db;
    t.where = "test server";
    return t;
  }
  r::ConnectionPool pool;
  r::RedisDriver driver{pool, nullptr};
};

}  // namespace

// An acquire that throws drops its place the same way: the ticket's destructor leaves the
// queue (here the driver's own, without the core around it). After a grant nothing is sent.
TEST_CASE("redis: a dropped ticket leaves the queue at once", "[redis]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto held = ns.open()->lock("line", opts(Strategy::redis)).acquire();
  BareDriver bare(node);
  auto& driver = bare.driver;
  const std::string name = "line", owner = "test:1:0:t1";
  dblock::detail::AcquireRequest req{name, owner, 30s, 10s, nullptr};
  auto a = driver.try_acquire(req);
  REQUIRE_FALSE(a.acquired());
  REQUIRE(a.place);
  CHECK(queued(node, name) == "1");
  a.place.reset();
  CHECK(queue_keys(node, name) == "0");
}

// A waiter that died (SIGKILL) keeps its place only while its ticket lasts: simulated with a
// ticket written behind the library's back, first in line, lapsing 2 s later.
TEST_CASE("redis: a dead waiter's ticket holds the others up no longer than it lasts", "[redis]") {
  using namespace dblock::detail::redis;
  dblock::test::RedisLock f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto c = ns.open();
  const auto written = Clock::now();
  write_ticket(node, "line", "ghost", 1, 2000);
  // The unfair fast path reads no queue; a fair try waits its turn (and writes nothing).
  auto unfair = opts(Strategy::redis);
  unfair.fair = false;
  auto l = c->lock("line", unfair).try_acquire();
  REQUIRE(l);
  l->release();
  CHECK_FALSE(c->lock("line", opts(Strategy::redis)).try_acquire());
  CHECK(queued(node, "line") == "1");
  l = c->lock("line", opts(Strategy::redis)).try_acquire(60s);
  const auto took = Clock::now() - written;
  REQUIRE(l);
  CHECK(took > 1500ms);  // it waited for the ghost's turn
  CHECK(took < 8s);      // 2 s, and at most the waiter's 1 s backoff more, on a loaded machine
  CHECK(queue_keys(node, "line") == "0");
}

// A release of a grant fair waiters wait for hands the name to the head of the line in the
// same script (queue_helpers' pass_on): the head's process learns it from its hand-over list
// and holds the lease without asking again. The lease it gets is the TTL it asked for (a
// ticket's life, 3 s, was too short to survive a stall). Anyone who may PUBLISH can send a
// hand-over's message on the channel, naming the head's owner and token (read from the
// queue's keys): a forged one, sent while the holder holds, must not start the head.
TEST_CASE("redis: a release hands the name to the head of the line, for the TTL it asked; a forged "
          "message does not", "[redis]") {
  using namespace dblock::detail::redis;
  dblock::test::RedisLock f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto h = ns.open(), w = ns.open();
  auto held = h->lock("line", opts(Strategy::redis)).acquire();
  // The waiter's process is subscribed already (its first wait subscribed it), as a busy
  // service's is: a release before that reaches nobody, and the waiter then takes the name
  // over as a leftover of its own, with its TTL.
  CHECK_FALSE(w->lock("line", opts(Strategy::redis)).try_acquire(300ms));
  REQUIRE(queue_keys(node, "line") == "0");
  auto waiter = std::async(std::launch::async, [&] { return w->lock("line", opts(Strategy::redis)).try_acquire(60s); });
  REQUIRE(eventually([&] { return queued(node, "line") == "1"; }, 20s));
  CHECK(raw(node, {"HLEN", keys::alive("line")}) == "2");  // the ticket, and the lease it takes
  const auto owner = head_owner(node, "line");
  const auto field = handover_field(node, "line", owner);
  CHECK(field.list.compare(0, keys::handed_prefix.size(), keys::handed_prefix) == 0);
  const auto& token = field.token;
  for (auto forged : {held.fence(), held.fence() + 1})
    raw(node, {"PUBLISH", keys::channel,
               "line" + std::string(2, '\0') + std::to_string(forged) + " 3000 " + token + " " + owner});
  CHECK(waiter.wait_for(1s) == std::future_status::timeout);
  CHECK_FALSE(held.lost());
  const auto fence = held.fence();
  held.release();
  auto got = waiter.get();
  REQUIRE(got);
  CHECK(got->fence() > fence);
  const auto handed = std::stoll(raw(node, {"PTTL", "line"}));
  CHECK(handed > 25000);  // the 30 s asked
  CHECK(handed <= 30000);
  CHECK(queue_keys(node, "line") == "0");
  CHECK_FALSE(got->lost());
  got->release();
  CHECK(raw(node, {"EXISTS", "line"}) == "0");
}

// A hand-over is believed without a read only for the waiter's last attempt (each writes a new
// token into its ticket): the lease counts from that attempt's sending, which came before the
// release that read it. One naming an earlier attempt (a message that came late) is ignored.
TEST_CASE("redis: a hand-over naming an earlier attempt of the waiter is not taken", "[redis]") {
  using namespace dblock::detail::redis;
  dblock::test::RedisLock f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto h = ns.open(), w = ns.open();
  auto held = h->lock("line", opts(Strategy::redis)).acquire();
  CHECK_FALSE(w->lock("line", opts(Strategy::redis)).try_acquire(300ms));  // subscribed from here on
  auto waiter = std::async(std::launch::async, [&] { return w->lock("line", opts(Strategy::redis)).try_acquire(60s); });
  REQUIRE(eventually([&] { return queued(node, "line") == "1"; }, 20s));
  const auto owner = head_owner(node, "line");
  const auto first = handover_field(node, "line", owner);
  // its next attempt (at most 1 s later)
  REQUIRE(eventually([&] { return handover_text(node, "line", owner) != first.whole; }, 10s));
  raw(node, {"RPUSH", first.list, "line" + std::string(2, '\0') + std::to_string(held.fence() + 1) + " 30000 " +
                                      first.token + " " + owner});
  CHECK(waiter.wait_for(1500ms) == std::future_status::timeout);
  CHECK_FALSE(held.lost());
  const auto fence = held.fence();
  held.release();
  auto got = waiter.get();
  REQUIRE(got);
  CHECK(got->fence() > fence);
  CHECK(got->fence() != fence + 1);
  got->release();
}

// A waiter the core does not renew (auto_renew off) takes hand-overs too: its ticket asks for
// them with its TTL, and the release grants it that.
TEST_CASE("redis: a waiter that renews nothing is handed the name for the TTL it asked", "[redis]") {
  using namespace dblock::detail::redis;
  dblock::test::RedisLock f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto h = ns.open(), w = ns.open();
  auto held = h->lock("line", opts(Strategy::redis)).acquire();
  auto o = opts(Strategy::redis);
  o.auto_renew = false;
  o.ttl = 20s;
  CHECK_FALSE(w->lock("line", o).try_acquire(300ms));  // the process is subscribed from here on
  auto waiter = std::async(std::launch::async, [&] { return w->lock("line", o).try_acquire(60s); });
  REQUIRE(eventually([&] { return queued(node, "line") == "1"; }, 20s));
  CHECK(handover_field(node, "line", head_owner(node, "line")).lease == "20000");  // 0 would refuse hand-overs
  held.release();
  auto got = waiter.get();
  REQUIRE(got);
  const auto handed = std::stoll(raw(node, {"PTTL", "line"}));
  CHECK(handed > 15000);
  CHECK(handed <= 20000);
  got->release();
}

// A waiter that died first in line (written behind the library's back, its ticket taking
// hand-overs of 2 s, the TTL it asked for) is handed the name and holds it for that lease only.
TEST_CASE("redis: a dead waiter handed the name holds it no longer than the lease it asked for", "[redis]") {
  using namespace dblock::detail::redis;
  dblock::test::RedisLock f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto h = ns.open(), c = ns.open();
  auto held = h->lock("line", opts(Strategy::redis)).acquire();
  write_ticket(node, "line", "ghost", 1, 60000, "2000 1 " + keys::handed_prefix + "ghost");
  // A flagged grant: the ghost found it held (as a live waiter's attempt would have flagged it).
  auto w = c->lock("line", opts(Strategy::redis)).try_acquire(1ms);
  CHECK_FALSE(w);
  const auto released = Clock::now();
  held.release();
  const auto record = raw(node, {"GET", "line"});
  CHECK(record.size() > 6);
  CHECK(record.substr(record.size() - 6) == " ghost");
  CHECK(std::stoll(raw(node, {"PTTL", "line"})) <= 2000);
  auto l = c->lock("line", opts(Strategy::redis)).try_acquire(60s);
  const auto took = Clock::now() - released;
  REQUIRE(l);
  CHECK(took > 1500ms);
  CHECK(took < 8s);  // 2 s, and at most the waiter's 1 s backoff more, on a loaded machine
  CHECK(queue_keys(node, "line") == "0");
}

// An acquire that gives up just as the name was handed to it (its answer never used) frees
// it for the next in line: its ticket's destructor finds the record naming it.
TEST_CASE("redis: a ticket dropped after the name was handed to it passes the name on", "[redis]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto held = ns.open()->lock("line", opts(Strategy::redis)).acquire();
  BareDriver bare(node);  // no subscriber: its ticket asks for no hand-over
  auto& driver = bare.driver;
  const std::string name = "line", owner = "test:1:0:t1";
  dblock::detail::AcquireRequest req{name, owner, 30s, 10s, nullptr};
  auto a = driver.try_acquire(req);
  REQUIRE_FALSE(a.acquired());
  REQUIRE(a.place);
  // As a subscribed waiter's ticket: it takes hand-overs, and it flagged the holder's record;
  // and one more waiter is behind it.
  const auto list = r::keys::handed_prefix + "test";
  REQUIRE(raw(node, {"HSET", r::keys::alive(name), std::string(1, '\0') + owner, "3000 1 " + list}) == "1");
  REQUIRE(raw(node, {"EVAL", R"lua(
local f, h, at, w, rest = string.match(redis.call('GET', KEYS[1]), '^(%S+) (%S+) (%S+) (%S) (.*)$')
return redis.call('SET', KEYS[1], f .. ' ' .. h .. ' ' .. at .. ' 3 ' .. rest, 'KEEPTTL').ok
)lua", "1", name}) == "OK");
  write_ticket(node, name, "next", 2, 60000, "3000 1 " + list);
  held.release();
  auto record = raw(node, {"GET", name});
  REQUIRE(record.size() > owner.size());
  CHECK(record.substr(record.size() - owner.size()) == owner);
  const auto fence = std::stoull(record.substr(0, record.find(' ')));
  a.place.reset();
  record = raw(node, {"GET", name});
  REQUIRE(record.size() > 5);
  CHECK(record.substr(record.size() - 5) == " next");
  CHECK(std::stoull(record.substr(0, record.find(' '))) > fence);
  CHECK(queued(node, name) == "0");
  // Each hand-over was pushed on the list the ticket named, which expires with its process.
  CHECK(raw(node, {"LLEN", list}) == "2");
  const auto first = raw(node, {"LINDEX", list, "0"});
  CHECK(first.substr(0, name.size() + 2) == name + std::string(2, '\0'));
  CHECK(first.substr(first.size() - owner.size()) == owner);
  CHECK(std::stoll(raw(node, {"PTTL", list})) > 50000);
}

// A ticket of an older dblock names no list ("LEASE_MS TOKEN"): its release wakes that
// waiter to ask (it confirmed hand-overs by a read, which a newer release no longer sends
// it on the channel), and the name is left free for it.
TEST_CASE("redis: an older client's ticket is woken, not handed the name", "[redis]") {
  dblock::test::RedisLock f;
  auto ns = f.make();
  const auto node = data_node(f.url);
  auto c = ns.open();
  auto held = c->lock("line", opts(Strategy::redis)).acquire();
  write_ticket(node, "line", "older", 1, 60000, "3000 1");
  REQUIRE(raw(node, {"EVAL", R"lua(
local f, h, at, w, rest = string.match(redis.call('GET', KEYS[1]), '^(%S+) (%S+) (%S+) (%S) (.*)$')
return redis.call('SET', KEYS[1], f .. ' ' .. h .. ' ' .. at .. ' 3 ' .. rest, 'KEEPTTL').ok
)lua", "1", "line"}) == "OK");
  held.release();
  CHECK(raw(node, {"EXISTS", "line"}) == "0");
  CHECK(queued(node, "line") == "1");  // still first in line, to take it at its next attempt
}

// The TLS-only server (scripts/services start redis-tls): what each wrong setup answers, the
// doctor's transport line, and redis-py over TLS excluded by dblock's lock. The contract suite
// itself runs there too (RedisTlsLock).
TEST_CASE("redis over TLS: the server is verified, and each wrong setup fails in one line", "[redis-tls]") {
  const auto tls_url = dblock::test::server_url("DBLOCK_TEST_REDIS_TLS_URL");
  const char* certs_env = std::getenv("DBLOCK_TEST_CERTS");
  if (!certs_env || !*certs_env) FAIL("DBLOCK_TEST_CERTS is not set (scripts/services env redis-tls sets it)");
  const std::string certs = certs_env;
  const auto hp = dblock::detail::parse_url(tls_url).hosts.at(0);
  const auto server = hp.host + ":" + std::to_string(hp.port);
  const auto plain = dblock::detail::parse_url(dblock::test::server_url("DBLOCK_TEST_REDIS_URL")).hosts.at(0);
  const auto cert = "&ssl-cert=" + certs + "/client.pem&ssl-key=" + certs + "/client.key";
  dblock::ClientOptions quick;
  quick.connect_timeout = 2s;
  auto refused = [&](const std::string& url, const char* says) {
    INFO(url);
    try {
      (void)dblock::Client::open(url, quick)->lock("job").try_acquire();
      FAIL("let in");
    } catch (const dblock::UnavailableError& e) {
      CHECK_THAT(e.what(), Catch::Contains(says));
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  };
  refused("rediss://" + server + "?ssl-ca=" + certs + "/other-ca.pem" + cert, "self-signed certificate");
  // None given: the server's alert says why, unless its reset comes first.
  try {
    (void)dblock::Client::open("rediss://" + server + "?ssl-ca=" + certs + "/ca.pem", quick)->lock("job").try_acquire();
    FAIL("let in without a client certificate");
  } catch (const dblock::UnavailableError& e) {
    CHECK_THAT(e.what(), Catch::Contains("certificate required") || Catch::Contains("reset by peer"));
  }
  refused("redis://" + server, "lost");                                                    // plaintext to TLS-only
  refused("rediss://" + plain.host + ":" + std::to_string(plain.port) + "?ssl-ca=" + certs + "/ca.pem",
          "TLS handshake failed");  // TLS to a plaintext server

  auto c = dblock::Client::open(tls_url);
  auto checks = c->check_settings();
  REQUIRE_FALSE(checks.empty());
  CHECK(checks.back().setting == "transport");
  CHECK_THAT(checks.back().value, Catch::StartsWith("TLSv1.") && Catch::EndsWith("server verified (chain and name)"));

  // redis-py over TLS, on the same name: excluded while dblock holds, then in.
  const std::string name = "tls-interop-" + std::to_string(std::random_device{}());
  auto lease = c->lock(name, opts(Strategy::redis)).acquire();
  auto python = [&]() {
    const char* code = R"py(
import sys, redis
host, port, certs, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
r = redis.Redis(host=host, port=port, ssl=True, ssl_ca_certs=certs + "/ca.pem",
                ssl_certfile=certs + "/client.pem", ssl_keyfile=certs + "/client.key")
lock = r.lock(name, timeout=30)
got = lock.acquire(blocking=False)
if got: lock.release()
sys.exit(0 if got else 3)
)py";
    return dblock::test::wait_exit(
        dblock::test::spawn({"/usr/bin/python3", "-c", code, hp.host, std::to_string(hp.port), certs, name}));
  };
  CHECK(python() == 3);
  lease.release();
  CHECK(python() == 0);

  // Through a Sentinel (asked over TLS too, with the same certificates, and a password of its
  // own) and as a one-node Redlock: each holds against a second client, and says its
  // transport is verified TLS.
  const auto params = tls_url.substr(tls_url.find('?'));
  const auto sentinel_url = dblock::test::server_url("DBLOCK_TEST_REDIS_TLS_SENTINEL_URL");
  const auto sentinel = sentinel_url.substr(0, sentinel_url.find('?'));
  refused(sentinel + params, "asks for a password (give it as sentinel-password)");
  refused(sentinel + params + "&sentinel-password=wrong", "refused sentinel-password");
  for (const std::string& url : {sentinel_url, "redlock://" + server + params}) {
    INFO(url);
    auto holder = dblock::Client::open(url), other = dblock::Client::open(url);
    auto held = holder->lock(name).acquire();
    CHECK_FALSE(other->lock(name).try_acquire());
    auto settings = holder->check_settings();
    REQUIRE_FALSE(settings.empty());
    CHECK_THAT(settings.back().value, Catch::EndsWith("server verified (chain and name)"));
    held.release();
    CHECK(other->lock(name).try_acquire());
  }
}
