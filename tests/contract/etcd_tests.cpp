// What only the etcd bridge promises, and its interop with `etcdctl lock` (Go's
// concurrency.Mutex) both ways.
#include <atomic>
#include <cstdlib>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
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
  CHECK_THROWS_AS(dblock::Client::open("etcd+https://" + hostport + "/dblock"), dblock::UsageError);
  CHECK_THROWS_WITH(dblock::Client::open("etcd+https://" + hostport + "/dblock"),
                    Catch::Contains("TLS") && Catch::Contains("not supported yet"));
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
// outage out instead of failing its acquire.
TEST_CASE("a holder and a waiter ride out a server restart", "[etcd]") {
  const char* restart = std::getenv("DBLOCK_TEST_ETCD_RESTART");
  if (!restart || !*restart) FAIL("DBLOCK_TEST_ETCD_RESTART is not set (scripts/services env sets it)");
  Keys k;
  auto ns = k.f.make();
  auto holder = ns.open(), other = ns.open();
  std::atomic<int> lost{0};
  auto o = etcd_opts(10s);
  o.on_lost = [&](const std::string&, std::uint64_t) { lost++; };
  auto lease = holder->lock("job", o).acquire();
  std::atomic<bool> got{false};
  std::uint64_t waiter_fence = 0;
  std::string error;
  std::thread waiter([&] {
    try {
      auto l = other->lock("job", etcd_opts()).try_acquire(30s);
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
