// What only the etcd bridge promises, and its interop with `etcdctl lock` (Go's
// concurrency.Mutex) both ways.
#include <atomic>
#include <cstdlib>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "backends/etcd/etcd_cluster.hpp"
#include "backends/etcd/etcd_driver.hpp"
#include "backends/etcd/etcd_keys.hpp"
#include "backends/etcd/etcd_session.hpp"
#include "contract/fixtures.hpp"
#include "core/url.hpp"
#include "support/eventually.hpp"
#include "support/process.hpp"
#include "support/tcp_proxy.hpp"

using namespace std::chrono_literals;
using dblock::test::eventually;
using Clock = std::chrono::steady_clock;
using dblock::test::EtcdLock;
namespace etcd = dblock::detail::etcd;

namespace {

dblock::LockOptions etcd_opts(std::chrono::milliseconds ttl = 30s, bool auto_renew = true) {
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::etcd;
  o.ttl = ttl;
  o.auto_renew = auto_renew;
  return o;
}

// The fixture's server and prefix, and a raw connection to look behind the library's back.
struct Keys {
  EtcdLock f;
  std::string endpoints, root;
  std::unique_ptr<etcd::Cluster> raw;
  Keys() {
    auto url = dblock::detail::parse_url(f.url);
    std::vector<etcd::Endpoint> eps;
    for (const auto& h : url.hosts) {
      eps.push_back({h.host, h.port});
      endpoints += (endpoints.empty() ? "" : ",") + h.host + ":" + std::to_string(h.port);
    }
    root = "/" + url.path;
    raw = std::make_unique<etcd::Cluster>(eps, 5s, 5s);
  }
  // The keys under lock `name`'s prefix, in creation order.
  std::vector<mvccpb::KeyValue> keys(const std::string& name) {
    etcd::pb::RangeRequest r;
    auto prefix = root + "/" + name + "/";
    r.set_key(prefix);
    r.set_range_end(etcd::prefix_end(prefix));
    r.set_sort_target(etcd::pb::RangeRequest::CREATE);
    r.set_sort_order(etcd::pb::RangeRequest::ASCEND);
    auto resp = raw->range(r);
    return {resp.kvs().begin(), resp.kvs().end()};
  }
};

// `etcdctl lock <root>/<name> -- sh -c ...` in a process of its own: it writes `out` once it
// holds the lock and keeps it until `out`.stop exists.
pid_t etcdctl_hold(const Keys& k, const std::string& name, const std::string& out) {
  return dblock::test::spawn({"/usr/bin/env", "ETCDCTL_API=3", "/usr/bin/etcdctl", "--endpoints=" + k.endpoints,
                              "lock", k.root + "/" + name, "--", "/bin/sh", "-c",
                              "echo held > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; while [ ! -e \"$0.stop\" ]; do sleep 0.02; done",
                              out});
}

}  // namespace

TEST_CASE("keys are named like etcdctl's and fences are their create revisions", "[etcd]") {
  Keys k;
  auto c = k.f.make().open();
  std::uint64_t last = 0;
  std::int64_t shared = 0;
  for (int i = 0; i < 3; ++i) {
    auto lease = c->lock("job", etcd_opts()).acquire();
    auto keys = k.keys("job");
    REQUIRE(keys.size() == 1);
    const auto& kv = keys[0];
    CHECK(kv.key() == k.root + "/job/" + etcd::lease_hex(kv.lease()));  // <prefix>/<name>/<lease %x>
    CHECK(kv.lease() != 0);
    CHECK(kv.value() == lease.owner());
    CHECK(lease.fence() == static_cast<std::uint64_t>(kv.create_revision()));
    CHECK(lease.fence() > last);
    last = lease.fence();
    auto held = c->list();
    REQUIRE(held.size() == 1);
    CHECK(held[0].name == "job");
    CHECK(held[0].fence == lease.fence());
    CHECK(held[0].owner == lease.owner());
    // Every renewed lock of one TTL goes under the Client's one lease.
    if (i == 0) shared = kv.lease();
    CHECK(kv.lease() == shared);
    lease.release();
    CHECK(k.keys("job").empty());
    CHECK(k.raw->time_to_live(kv.lease()).count() > 0);  // the lease stays for the next acquire
  }
  c.reset();
  CHECK(k.raw->time_to_live(shared).count() == 0);  // revoked with the Client
}

TEST_CASE("a leftover key under the Client's lease is replaced, with a new fence", "[etcd]") {
  Keys k;
  auto c = k.f.make().open();
  auto first = c->lock("a", etcd_opts()).acquire();
  auto lease_id = k.keys("a").at(0).lease();
  // As an acquire of "b" whose answer was lost would leave it: our key, under our lease.
  etcd::pb::TxnRequest put;
  auto* p = put.add_success()->mutable_request_put();
  p->set_key(k.root + "/b/" + etcd::lease_hex(lease_id));
  p->set_value("leftover");
  p->set_lease(lease_id);
  k.raw->txn(put);
  auto leftover = k.keys("b").at(0).create_revision();
  auto b = c->lock("b", etcd_opts()).try_acquire();  // not blocked by its own leftover
  REQUIRE(b);
  CHECK(b->fence() > static_cast<std::uint64_t>(leftover));
  auto keys = k.keys("b");
  REQUIRE(keys.size() == 1);
  CHECK(keys[0].create_revision() == static_cast<std::int64_t>(b->fence()));
  CHECK(keys[0].value() == b->owner());
}

TEST_CASE("a shared lease revoked loses every lock under it, and the next acquire gets a new one", "[etcd]") {
  Keys k;
  auto c = k.f.make().open();
  std::atomic<int> lost{0};
  auto o = etcd_opts(3s);
  o.on_lost = [&](const std::string&, std::uint64_t) { lost++; };
  auto a = c->lock("a", o).acquire();
  auto b = c->lock("b", o).acquire();
  auto id = k.keys("a").at(0).lease();
  CHECK(k.keys("b").at(0).lease() == id);
  REQUIRE(k.raw->revoke(id));  // `etcdctl lease revoke`
  REQUIRE(eventually([&] { return lost.load() == 2; }, 5s));
  CHECK(a.lost());
  CHECK(b.lost());
  auto again = c->lock("a", o).try_acquire();
  REQUIRE(again);
  CHECK(again->fence() > b.fence());
  CHECK(k.keys("a").at(0).lease() != id);
}

TEST_CASE("a key given up while the server is away is deleted before the lease is kept alive", "[etcd]") {
  Keys k;
  auto url = dblock::detail::parse_url(k.f.url);
  dblock::test::TcpProxy proxy(url.hosts[0].host, url.hosts[0].port);
  auto cluster = std::make_shared<etcd::Cluster>(std::vector<etcd::Endpoint>{{"127.0.0.1", proxy.port()}}, 5s, 1s);
  etcd::Session s(cluster, std::chrono::seconds{30}, true);
  auto key = s.key(k.root + "/away/");
  etcd::pb::TxnRequest put;
  auto* p = put.add_success()->mutable_request_put();
  p->set_key(key);
  p->set_lease(s.id());
  auto rev = k.raw->txn(put).header().revision();
  proxy.set_mode(dblock::test::TcpProxy::Mode::stall);
  s.give_up(key, rev);  // cannot reach the server: kept for later
  CHECK(k.keys("away").size() == 1);
  CHECK_THROWS(s.refresh());  // nothing is kept alive while the key may be there
  proxy.set_mode(dblock::test::TcpProxy::Mode::pass);
  CHECK(eventually([&] {
    try {
      return s.refresh();
    } catch (const dblock::Error&) {
      return false;
    }
  }, 10s));
  CHECK(k.keys("away").empty());
}

TEST_CASE("etcdctl lock and a dblock lock on the same name exclude each other", "[etcd]") {
  Keys k;
  auto c = k.f.make().open();
  auto out = k.f.dir.path() + "/etcdctl";
  // etcdctl holds: dblock cannot have it, and gets it once etcdctl lets go.
  auto pid = etcdctl_hold(k, "shared", out);
  REQUIRE(eventually([&] { return std::filesystem::exists(out); }, 20s));
  auto lock = c->lock("shared", etcd_opts());
  CHECK_FALSE(lock.try_acquire());
  CHECK_FALSE(lock.try_acquire(300ms));
  CHECK(k.keys("shared").size() == 1);  // the failed tries left no key of ours
  std::ofstream(out + ".stop").put('x');
  auto lease = lock.try_acquire(10s);
  REQUIRE(lease);
  CHECK(dblock::test::wait_exit(pid) == 0);
  // dblock holds: etcdctl waits until dblock lets go.
  auto out2 = k.f.dir.path() + "/etcdctl2";
  auto waiter = etcdctl_hold(k, "shared", out2);
  REQUIRE(eventually([&] { return k.keys("shared").size() == 2; }, 10s));  // queued behind us
  std::this_thread::sleep_for(500ms);
  CHECK_FALSE(std::filesystem::exists(out2));
  auto released_at = Clock::now();
  lease->release();
  REQUIRE(eventually([&] { return std::filesystem::exists(out2); }, 10s));
  CHECK(Clock::now() - released_at < 5s);
  // While etcdctl holds it, dblock's queued waiter gets it after etcdctl, with a higher fence.
  auto fence = k.keys("shared").at(0).create_revision();
  std::ofstream(out2 + ".stop").put('x');
  auto again = lock.try_acquire(10s);
  REQUIRE(again);
  CHECK(again->fence() > static_cast<std::uint64_t>(fence));
  CHECK(dblock::test::wait_exit(waiter) == 0);
  again->release();
  CHECK(k.keys("shared").empty());
}

TEST_CASE("waiters queue in creation order, each watching the key before its own", "[etcd]") {
  Keys k;
  auto ns = k.f.make();
  auto holder = ns.open();
  auto first = holder->lock("q", etcd_opts()).acquire();
  constexpr int n = 3;
  std::vector<std::shared_ptr<dblock::Client>> clients;
  std::vector<std::thread> waiters;
  std::mutex order_mutex;
  std::vector<int> order;
  for (int i = 0; i < n; ++i) {
    clients.push_back(ns.open());
    // The thread gets its own copy of the Client: push_back may move the vector's elements
    // while earlier waiters run (TSan caught the test reading clients[i] meanwhile).
    waiters.emplace_back([&, i, client = clients.back()] {
      auto lease = client->lock("q", etcd_opts()).acquire();
      {
        std::lock_guard lk(order_mutex);
        order.push_back(i);
      }
      std::this_thread::sleep_for(50ms);
    });
    // Each waiter's key is made before the next waiter starts: their queue order is i.
    REQUIRE(eventually([&] { return k.keys("q").size() == static_cast<std::size_t>(i) + 2; }, 10s));
  }
  first.release();
  for (auto& w : waiters) w.join();
  CHECK(order == std::vector<int>{0, 1, 2});
  CHECK(k.keys("q").empty());
}

// A Client's key is named by its lease: a holder that releases and queues again at once puts
// the same name back, behind the waiter that was watching it. A waiter whose watch begins
// after both must see that the key it waited for went (the name now has a new create
// revision), or it waits out its whole 10 s slice for a key that waits for it: 10 s stalls
// in the shapes bench, 8 Clients on one name in two processes, before the fix.
// A semaphore's first waiter, whose holders' deletion fell between its look and its watch,
// asks how many keys are below its own: etcd's `count` took in the keys above it too (it
// counts before the create-revision filter), so the waiter slept its 10 s slice (1 run in 20
// of "a semaphore's waiters each move up ..." under TSan).
TEST_CASE("keys below a revision are counted after etcd's create-revision filter", "[etcd]") {
  Keys k;
  const std::string prefix = k.root + "/count/";
  std::vector<std::int64_t> created;
  for (const char* name : {"a", "b", "c"}) {
    etcd::pb::TxnRequest t;
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(prefix + name);
    put->set_value("x");
    created.push_back(k.raw->txn(t).header().revision());
  }
  etcd::pb::RangeRequest below;
  below.set_key(prefix);
  below.set_range_end(etcd::prefix_end(prefix));
  below.set_max_create_revision(created[2] - 1);
  CHECK(k.raw->range(below).kvs_size() == 2);
  CHECK(k.raw->range(below).count() == 3);  // why Cluster::count exists
  CHECK(k.raw->count(below) == 2);
  below.set_count_only(true);
  CHECK(k.raw->count(below) == 2);
}

TEST_CASE("a predecessor deleted and made again before the watch began counts as gone", "[etcd]") {
  Keys k;
  const std::string key = k.root + "/again/k";
  auto put = [&] {
    etcd::pb::PutRequest p;
    p.set_key(key);
    p.set_value("x");
    etcd::pb::TxnRequest t;
    *t.add_success()->mutable_request_put() = p;
    return k.raw->txn(t).header().revision();
  };
  const auto created = put();  // what the waiter saw: its predecessor, created then
  etcd::pb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key(key);
  k.raw->txn(del);  // released...
  const auto again = put();  // ...and queued again under the same name, before the watch
  REQUIRE(again > created);
  const auto t0 = Clock::now();
  CHECK(k.raw->wait_deleted(key, created, created + 1, t0 + 5s));
  CHECK(Clock::now() - t0 < 3s);  // at once, not at the end of the wait
  // The key as made again is still there: waiting for it is a wait (until its deletion).
  CHECK_FALSE(k.raw->wait_deleted(key, again, again + 1, Clock::now() + 300ms));
  k.raw->txn(del);
}

TEST_CASE("a failed try-lock and a timed wait that ends leave no key behind", "[etcd]") {
  Keys k;
  auto ns = k.f.make();
  auto a = ns.open(), b = ns.open();
  auto held = a->lock("job", etcd_opts()).acquire();
  auto lock = b->lock("job", etcd_opts());
  CHECK_FALSE(lock.try_acquire());
  CHECK(k.keys("job").size() == 1);
  CHECK_FALSE(lock.try_acquire(700ms));
  CHECK(k.keys("job").size() == 1);
  held.release();
  CHECK(k.keys("job").empty());
}

TEST_CASE("TTLs are whole-second leases, and an unrenewed one is deleted by etcd", "[etcd]") {
  CHECK(etcd::lease_ttl(1ms).count() == 1);
  CHECK(etcd::lease_ttl(1000ms).count() == 1);
  CHECK(etcd::lease_ttl(1001ms).count() == 2);
  CHECK(etcd::lease_ttl(30s).count() == 30);
  Keys k;
  auto c = k.f.make().open();
  std::atomic<int> lost{0};
  // A renewed lock of the same TTL keeps the Client's shared lease alive meanwhile: the
  // unrenewed one has a lease of its own, and expires all the same.
  auto renewed = c->lock("other", etcd_opts(1500ms)).acquire();
  auto o = etcd_opts(1500ms, false);
  o.on_lost = [&](const std::string&, std::uint64_t) { lost++; };
  auto lease = c->lock("job", o).acquire();
  auto keys = k.keys("job");
  REQUIRE(keys.size() == 1);
  CHECK(keys[0].lease() != k.keys("other").at(0).lease());
  auto ttl = k.raw->time_to_live(keys[0].lease());
  CHECK(ttl.count() >= 1);
  CHECK(ttl.count() <= 2);  // 1.5 s rounded up
  REQUIRE(eventually([&] { return lost.load() == 1; }, 5s));
  CHECK(eventually([&] { return k.keys("job").empty(); }, 5s));
  CHECK_FALSE(renewed.lost());
}

TEST_CASE("a key deleted behind the holder's back is a loss at its next renewal", "[etcd]") {
  Keys k;
  auto c = k.f.make().open();
  std::atomic<int> lost{0};
  auto o = etcd_opts(1s);
  o.on_lost = [&](const std::string&, std::uint64_t) { lost++; };
  auto lease = c->lock("job", o).acquire();
  auto keys = k.keys("job");
  REQUIRE(keys.size() == 1);
  etcd::pb::TxnRequest del;
  del.add_success()->mutable_request_delete_range()->set_key(keys[0].key());
  k.raw->txn(del);  // as `etcdctl del` would
  REQUIRE(eventually([&] { return lost.load() == 1; }, 5s));
  CHECK(lease.lost());
  auto again = c->lock("job", etcd_opts()).try_acquire();  // the name is free again
  REQUIRE(again);
  CHECK(again->fence() > lease.fence());
}

TEST_CASE("etcd URLs and names are checked before anything is written", "[etcd]") {
  Keys k;
  auto url = dblock::detail::parse_url(k.f.url);
  auto hostport = url.hosts[0].host + ":" + std::to_string(url.hosts[0].port);
  CHECK_THROWS_AS(dblock::Client::open("etcd://" + hostport), dblock::UsageError);
  CHECK_THROWS_AS(dblock::Client::open("etcd://" + hostport + "/"), dblock::UsageError);
  CHECK_THROWS_AS(dblock::Client::open("etcd://" + hostport + "/a//b"), dblock::UsageError);
  CHECK_THROWS_AS(dblock::Client::open("etcd://" + hostport + "/a/"), dblock::UsageError);
  CHECK_THROWS_AS(dblock::Client::open("etcd://" + url.hosts[0].host + "/dblock"), dblock::UsageError);  // no port
  CHECK_THROWS_WITH(dblock::Client::open("etcd://" + hostport + "/dblock?timeout=1"),
                    Catch::Contains("unknown etcd URL parameter 'timeout'"));
  CHECK_THROWS_WITH(dblock::Client::open("etcd://" + hostport + "/dblock?ssl-ca=/nonexistent.pem"),
                    Catch::Contains("cannot read ssl-ca file"));
  CHECK_THROWS_AS(dblock::Client::open("etcd://alice@" + hostport + "/dblock"), dblock::UsageError);  // no password
  auto c = k.f.make().open();
  CHECK_THROWS_AS(c->lock("a/b", etcd_opts()), dblock::UsageError);
  CHECK_THROWS_AS(c->force_release("a/b"), dblock::UsageError);
  CHECK(c->list().empty());
  CHECK(c->sweep() == 0);
  CHECK(c->migrate().empty());
}

TEST_CASE("an unreachable etcd is UnavailableError within the connect timeout", "[etcd]") {
  dblock::ClientOptions o;
  o.connect_timeout = 500ms;
  auto t0 = Clock::now();
  CHECK_THROWS_AS(dblock::Client::open("etcd://127.0.0.1:1/dblock", o), dblock::UnavailableError);
  CHECK(Clock::now() - t0 < 3s);
}

// A restart keeps keys and leases (etcd persists them and gives each lease its whole TTL
// again): a holder with a TTL longer than the outage keeps its lock, and a waiter rides the
// outage out instead of failing its acquire, even one whose calls time out before the server
// is back (a 1 s statement timeout; the outage is a second's pause and the restart).
TEST_CASE("a holder and a waiter ride out a server restart", "[etcd]") {
  const char* restart = std::getenv("DBLOCK_TEST_ETCD_RESTART");
  if (!restart || !*restart) FAIL("DBLOCK_TEST_ETCD_RESTART is not set (scripts/services env sets it)");
  Keys k;
  auto ns = k.f.make();
  auto impatient = ns;
  impatient.options.statement_timeout = 1s;
  auto holder = ns.open(), other = impatient.open();
  std::atomic<int> lost{0};
  auto o = etcd_opts(30s);  // a restart on a loaded machine has taken near 10 s
  o.on_lost = [&](const std::string&, std::uint64_t) { lost++; };
  auto lease = holder->lock("job", o).acquire();
  std::atomic<bool> got{false};
  std::uint64_t waiter_fence = 0;
  std::string error;
  std::thread waiter([&] {
    try {
      auto l = other->lock("job", etcd_opts()).try_acquire(60s);
      if (l) {
        waiter_fence = l->fence();
        got = true;
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  REQUIRE(eventually([&] { return k.keys("job").size() == 2; }, 10s));
  REQUIRE(std::system((std::string("DBLOCK_RESTART_PAUSE=1 ") + restart + " >/dev/null 2>&1").c_str()) == 0);
  std::this_thread::sleep_for(1s);  // renewals and the waiter's watch meet the restarted server
  CHECK_FALSE(got);
  CHECK_FALSE(lease.lost());
  CHECK(lost == 0);
  auto fence = lease.fence();
  lease.release();
  waiter.join();
  CHECK(error == "");
  CHECK(got);
  CHECK(waiter_fence > fence);
}

TEST_CASE("shaped keys: a reader's and a semaphore contender's suffix, and who holds", "[etcd]") {
  using etcd::KeyShape;
  const KeyShape reader{KeyShape::reader, 0}, writer{}, sem3{KeyShape::permit, 3};
  CHECK(etcd::shaped_suffix(0x1a, reader, 0xff) == "1a-r-00000000000000ff");
  CHECK(etcd::shaped_suffix(0x1a, sem3, 1) == "1a-s3-0000000000000001");
  CHECK(etcd::key_shape("/p/n/1a-r-00000000000000ff") == reader);
  CHECK(etcd::key_shape("/p/n/1a-s3-0000000000000001") == sem3);
  CHECK(etcd::key_shape("/p/n/694d7a3c1b2e0f10") == writer);  // dblock's exclusive key, etcdctl's
  CHECK(etcd::key_shape("/p/n/1a-r-ff") == writer);           // not ours: excludes like a writer
  CHECK(etcd::key_shape("/p/n/1a-s1-0000000000000001") == writer);
  CHECK(etcd::key_shape("/p/n/1a-s03-0000000000000001") == writer);
  CHECK(etcd::key_shape("/p/n/1a-x-0000000000000001") == writer);
  CHECK(etcd::key_shape("/p/n/XY-r-0000000000000001") == writer);
  using Parsed = std::optional<std::pair<std::string, KeyShape>>;
  CHECK(etcd::parse_lock_key("/p", "/p/doc/1a-r-00000000000000ff") == Parsed({"doc", reader}));
  CHECK(etcd::parse_lock_key("/p", "/p/doc/1a") == Parsed({"doc", writer}));
  CHECK_FALSE(etcd::parse_lock_key("/p", "/p/a/b/1a-r-00000000000000ff"));
  CHECK_FALSE(etcd::parse_lock_key("/p", "/p/doc/other"));
  using Held = std::vector<std::size_t>;
  CHECK(etcd::holders({}).empty());
  CHECK(etcd::holders({writer, reader}) == Held{0});
  CHECK(etcd::holders({reader, reader, writer, reader}) == Held{0, 1});
  CHECK(etcd::holders({reader, KeyShape{KeyShape::permit, 2}, reader}) == Held{0});
  CHECK(etcd::holders({sem3, sem3, sem3, sem3}) == Held{0, 1, 2});
  CHECK(etcd::holders({sem3, reader, sem3, sem3}) == Held{0, 2});  // the reader is on its way out
}

TEST_CASE("readers and a semaphore's holders have keys of their own under the Client's lease", "[etcd]") {
  Keys k;
  auto c = k.f.make().open();
  auto lock = c->lock("doc", etcd_opts());
  auto mine = lock.acquire_shared();
  // Another thread of the same Client reads beside it, as an owner of its own: its own key.
  std::optional<dblock::Lease> theirs;
  std::thread([&] { theirs = lock.try_acquire_shared(); }).join();
  REQUIRE(theirs);
  auto keys = k.keys("doc");
  REQUIRE(keys.size() == 2);
  for (const auto& kv : keys) {
    auto suffix = kv.key().substr(k.root.size() + 5);  // after "<root>/doc/"
    CHECK(suffix.rfind(etcd::lease_hex(kv.lease()) + "-r-", 0) == 0);  // <lease %x>-r-<16 hex tag>
    CHECK(suffix.size() == etcd::lease_hex(kv.lease()).size() + 3 + 16);
    CHECK(etcd::key_shape(kv.key()).kind == etcd::KeyShape::reader);
    CHECK(kv.lease() == keys[0].lease());  // the Client's one lease
  }
  CHECK(keys[0].key() != keys[1].key());
  CHECK(keys[0].value() == mine.owner());
  CHECK(mine.fence() == static_cast<std::uint64_t>(keys[0].create_revision()));
  CHECK(theirs->fence() == static_cast<std::uint64_t>(keys[1].create_revision()));
  auto listed = c->list();
  REQUIRE(listed.size() == 2);
  for (const auto& li : listed) CHECK(li.mode == dblock::Mode::shared);
  theirs.reset();  // released
  mine.release();
  CHECK(k.keys("doc").empty());

  auto o = etcd_opts();
  o.permits = 3;
  auto p1 = c->lock("pool", o).acquire();
  auto other = k.f.make().open();
  auto p2 = other->lock("pool", o).acquire();
  keys = k.keys("pool");
  REQUIRE(keys.size() == 2);
  CHECK(etcd::key_shape(keys[0].key()) == etcd::KeyShape{etcd::KeyShape::permit, 3});
  CHECK(keys[0].key().find("-s3-") != std::string::npos);
  CHECK(p1.fence() == static_cast<std::uint64_t>(keys[0].create_revision()));
  CHECK(p2.fence() == static_cast<std::uint64_t>(keys[1].create_revision()));
  listed = c->list();
  REQUIRE(listed.size() == 2);
  for (const auto& li : listed) CHECK(li.mode == dblock::Mode::exclusive);
  // A failed try leaves no key behind, in either shape.
  o.permits = 2;
  auto third = k.f.make().open();  // not a holder (a holder would re-enter its own permit)
  CHECK_THROWS_AS(third->lock("pool", o).try_acquire(), dblock::UsageError);
  CHECK(k.keys("pool").size() == 2);
  auto w = c->lock("busy", etcd_opts()).acquire();
  CHECK_FALSE(other->lock("busy", etcd_opts()).try_acquire_shared(300ms));
  CHECK(k.keys("busy").size() == 1);
  CHECK(k.keys("busy")[0].key() == k.root + "/busy/" + etcd::lease_hex(k.keys("busy")[0].lease()));  // unchanged
}

TEST_CASE("a semaphore's waiters each move up as permits come free", "[etcd]") {
  Keys k;
  auto ns = k.f.make();
  auto o = etcd_opts();
  o.permits = 2;
  auto a = ns.open(), b = ns.open();
  auto ha = a->lock("pool", o).acquire();
  auto hb = b->lock("pool", o).acquire();
  // Two waiters, queued in this order: the first watches the holders, the second the first.
  std::vector<std::shared_ptr<dblock::Client>> clients{ns.open(), ns.open()};
  std::atomic<int> in{0};
  std::vector<std::thread> waiters;
  std::atomic<bool> done{false};
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, client = clients[static_cast<std::size_t>(i)]] {
      auto l = client->lock("pool", o).try_acquire(20s);
      if (l) ++in;
      while (!done) std::this_thread::sleep_for(10ms);
    });
    REQUIRE(eventually([&] { return k.keys("pool").size() == static_cast<std::size_t>(i) + 3; }, 10s));
  }
  ha.release();
  REQUIRE(eventually([&] { return in.load() == 1; }, 5s));
  // The second waiter now waits for the holders (the first waiter told it so), not for the
  // first waiter's key, which stays: a release of the other holder lets it in at once.
  auto released_at = Clock::now();
  hb.release();
  REQUIRE(eventually([&] { return in.load() == 2; }, 5s));
  CHECK(Clock::now() - released_at < 2s);
  done = true;
  for (auto& t : waiters) t.join();
}

TEST_CASE("etcdctl lock excludes dblock readers, and dblock readers exclude it", "[etcd]") {
  Keys k;
  auto ns = k.f.make();
  auto a = ns.open(), b = ns.open();
  auto out = k.f.dir.path() + "/etcdctl";
  // etcdctl holds: its key (an empty value, a plain lease name) is a writer to our readers.
  auto pid = etcdctl_hold(k, "doc", out);
  REQUIRE(eventually([&] { return std::filesystem::exists(out); }, 20s));
  auto reader = a->lock("doc", etcd_opts());
  CHECK_FALSE(reader.try_acquire_shared());
  CHECK_FALSE(reader.try_acquire_shared(300ms));
  CHECK(k.keys("doc").size() == 1);  // the failed tries left no key of ours
  std::atomic<bool> in{false};
  std::uint64_t fence = 0;
  std::thread waiting([&] {
    auto l = reader.try_acquire_shared(20s);
    if (l) fence = l->fence();
    in = l.has_value();
  });
  REQUIRE(eventually([&] { return k.keys("doc").size() == 2; }, 10s));
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(in.load());
  auto etcdctl_fence = k.keys("doc").at(0).create_revision();
  std::ofstream(out + ".stop").put('x');
  waiting.join();
  REQUIRE(in.load());
  CHECK(fence > static_cast<std::uint64_t>(etcdctl_fence));
  CHECK(dblock::test::wait_exit(pid) == 0);
  // dblock readers hold: etcdctl waits for every one of them.
  auto r1 = a->lock("doc", etcd_opts()).acquire_shared();
  auto r2 = b->lock("doc", etcd_opts()).acquire_shared();
  auto out2 = k.f.dir.path() + "/etcdctl2";
  auto waiter = etcdctl_hold(k, "doc", out2);
  REQUIRE(eventually([&] { return k.keys("doc").size() == 3; }, 10s));  // queued behind both
  std::this_thread::sleep_for(500ms);
  CHECK_FALSE(std::filesystem::exists(out2));
  r1.release();
  std::this_thread::sleep_for(500ms);
  CHECK_FALSE(std::filesystem::exists(out2));  // one reader still holds
  // A reader that comes now queues behind the waiting etcdctl (writers are not starved).
  CHECK_FALSE(a->lock("doc", etcd_opts()).try_acquire_shared());
  r2.release();
  REQUIRE(eventually([&] { return std::filesystem::exists(out2); }, 10s));
  auto holder_fence = k.keys("doc").at(0).create_revision();
  std::ofstream(out2 + ".stop").put('x');
  CHECK(dblock::test::wait_exit(waiter) == 0);
  auto after = b->lock("doc", etcd_opts()).try_acquire_shared(10s);
  REQUIRE(after);
  CHECK(after->fence() > static_cast<std::uint64_t>(holder_fence));
}

// The TLS-only server (scripts/services start etcd-tls): what each wrong setup answers, a
// certificate alone as etcd's user, and etcdctl over TLS. The contract suite itself runs there
// too (EtcdTlsLock, with a user and password).
TEST_CASE("over TLS: a certificate alone logs in, and each wrong setup fails in one line", "[etcd-tls]") {
  const auto base = dblock::test::server_url("DBLOCK_TEST_ETCD_TLS_URL");
  const char* certs_env = std::getenv("DBLOCK_TEST_CERTS");
  if (!certs_env || !*certs_env) FAIL("DBLOCK_TEST_CERTS is not set (scripts/services env etcd-tls sets it)");
  const std::string certs = certs_env;
  auto url = dblock::detail::parse_url(base);
  const auto hostport = url.hosts[0].host + ":" + std::to_string(url.hosts[0].port);
  const auto root = "/dblock/t" + std::to_string(std::random_device{}());
  auto tls = [&](const std::string& credentials, const std::string& ca, bool cert) {
    return "etcds://" + credentials + hostport + root + "?ssl-ca=" + certs + "/" + ca +
           (cert ? "&ssl-cert=" + certs + "/client.pem&ssl-key=" + certs + "/client.key" : "");
  };
  dblock::ClientOptions quick;
  quick.connect_timeout = 2s;
  auto refused = [&](const std::string& u, const char* says) {
    try {
      auto l = dblock::Client::open(u, quick)->lock("job", etcd_opts()).try_acquire();
      (void)l;
      FAIL("let in: " << dblock::detail::parse_url(u).redacted());
    } catch (const dblock::UnavailableError& e) {
      CHECK_THAT(e.what(), Catch::Contains(says) && !Catch::Contains("pw"));
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  };
  refused(tls("locker:locker-pw@", "other-ca.pem", true), "TLS handshake");  // a CA that signed nothing of ours
  refused(tls("locker:locker-pw@", "ca.pem", false), "TLS handshake");       // no client certificate
  refused("etcd://locker:locker-pw@" + hostport + root, "no connection");    // plaintext to a TLS-only server
  const auto plain = dblock::detail::parse_url(dblock::test::server_url("DBLOCK_TEST_ETCD_URL"));
  refused("etcds://" + plain.hosts[0].host + ":" + std::to_string(plain.hosts[0].port) + root,
          "TLS handshake");  // TLS to a plaintext server
  refused(tls("locker:wrong-pw@", "ca.pem", true), "authenticate as 'locker'");

  // The client certificate alone: etcd takes its common name (dblock) as the user.
  auto c = dblock::Client::open(tls("", "ca.pem", true));
  auto checks = c->check_settings();
  REQUIRE_FALSE(checks.empty());
  CHECK(checks.back().setting == "transport");
  CHECK(checks.back().value == "TLS, server verified (chain and name)");
  auto lease = c->lock("job", etcd_opts()).acquire();
  // etcdctl over TLS, as the same user: it waits for our key, then holds.
  auto out = std::filesystem::temp_directory_path() / ("dblock-etcdctl-" + std::to_string(std::random_device{}()));
  auto pid = dblock::test::spawn(
      {"/usr/bin/env", "ETCDCTL_API=3", "/usr/bin/etcdctl", "--endpoints=https://" + hostport,
       "--cacert=" + certs + "/ca.pem", "--cert=" + certs + "/client.pem", "--key=" + certs + "/client.key", "lock",
       root + "/job", "--", "/bin/sh", "-c", "echo held > \"$0\"; while [ ! -e \"$0.stop\" ]; do sleep 0.02; done",
       out.string()});
  std::this_thread::sleep_for(1s);
  CHECK_FALSE(std::filesystem::exists(out));
  lease.release();
  CHECK(eventually([&] { return std::filesystem::exists(out); }, 20s));
  CHECK_FALSE(c->lock("job", etcd_opts()).try_acquire());
  std::ofstream(out.string() + ".stop").put('x');
  CHECK(dblock::test::wait_exit(pid) == 0);
  CHECK(c->lock("job", etcd_opts()).try_acquire(10s));
  std::filesystem::remove(out);
  std::filesystem::remove(out.string() + ".stop");
}
