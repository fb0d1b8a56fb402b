// What only the ZooKeeper bridge promises (and its interop with Kazoo).
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "support/eventually.hpp"
#include "backends/zookeeper/zk_paths.hpp"
#include "backends/zookeeper/zk_session.hpp"
#include "contract/fixtures.hpp"
#include "core/url.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;
using dblock::test::eventually;
using Clock = std::chrono::steady_clock;
using dblock::test::ZooKeeperLock;
namespace zk = dblock::detail::zk;

namespace {

dblock::LockOptions zk_opts(std::chrono::milliseconds ttl = 30s) {
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::zookeeper;
  o.ttl = ttl;
  return o;
}

// The fixture's server and root, and a raw session on it to look behind the library's back.
struct Tree {
  ZooKeeperLock f;
  std::string hosts, root;
  std::unique_ptr<zk::Session> raw;
  Tree() {
    auto url = dblock::detail::parse_url(f.url);
    for (const auto& h : url.hosts) hosts += (hosts.empty() ? "" : ",") + h.host + ":" + std::to_string(h.port);
    root = "/" + url.path;
    raw = std::make_unique<zk::Session>(hosts, 10s, 5s);
  }
  std::vector<std::string> nodes(const std::string& name) {
    std::vector<std::string> v;
    raw->children(root + "/" + name, &v);
    return v;
  }
};


// A Kazoo lock in a process of its own: `kind` is Lock, WriteLock, ReadLock or Semaphore:N. `hold` takes it
// (waiting up to 20 s), writes `file` and keeps it until `file`.stop exists; `try` writes 1 or
// 0 to `file`: whether acquire(blocking=False) got it (E: a Semaphore's max_leases mismatch;
// N: the nodes' ACL refused this client).
const char* kazoo_script = R"(
import os, sys, time
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
hosts, path, mode, out, kind = sys.argv[1:6]
digest = sys.argv[6] if len(sys.argv) > 6 else ""
if digest:  # dblock's identity, and its nodes' ACL: the identity's alone
    from kazoo.security import make_digest_acl
    user, password = digest.split(":", 1)
    zk = KazooClient(hosts=hosts, auth_data=[("digest", digest)], default_acl=[make_digest_acl(user, password, all=True)])
else:
    zk = KazooClient(hosts=hosts)
zk.start(timeout=10)
if kind.startswith("Semaphore:"):
    lock = zk.Semaphore(path, "kazoo-" + mode, max_leases=int(kind.split(":")[1]))
else:
    lock = getattr(zk, kind)(path, "kazoo-" + mode)
if mode == "hold":
    lock.acquire(timeout=20)
    open(out + ".tmp", "w").write("held")
    os.rename(out + ".tmp", out)
    while not os.path.exists(out + ".stop"):
        time.sleep(0.02)
    lock.release()
else:
    try:
        got = lock.acquire(blocking=False)
        answer = "1" if got else "0"
    except ValueError:  # Semaphore: another max_leases is stored on the path
        got, answer = False, "E"
    except NoAuthError:
        got, answer = False, "N"
    open(out + ".tmp", "w").write(answer)
    os.rename(out + ".tmp", out)
    if got:
        lock.release()
zk.stop()
)";

pid_t kazoo(const Tree& t, const std::string& name, const std::string& mode, const std::string& out,
            const std::string& kind = "Lock", const std::string& digest = "") {
  return dblock::test::spawn(
      {"/usr/bin/python3", "-c", kazoo_script, t.hosts, t.root + "/" + name, mode, out, kind, digest});
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  in >> s;
  return s;
}

// Kazoo's acquire(blocking=False) of `kind` on `name`: whether it got it ("1", "0"; anything
// else: the script failed).
std::string kazoo_try(const Tree& t, const std::string& name, const std::string& kind, const std::string& out) {
  CHECK(dblock::test::wait_exit(kazoo(t, name, "try", out, kind)) == 0);
  return slurp(out);
}

// A Kazoo hold of `kind` on `name` in its own process, stopped (or killed, when a check failed
// before stop()) when it goes.
struct KazooHold {
  std::string out;
  pid_t pid;
  KazooHold(const Tree& t, const std::string& name, const std::string& kind, std::string file)
      : out(std::move(file)), pid(kazoo(t, name, "hold", out, kind)) {}
  bool held() const { return std::filesystem::exists(out); }
  int stop() {
    std::ofstream(out + ".stop").put('x');
    auto rc = dblock::test::wait_exit(pid);
    pid = -1;
    return rc;
  }
  ~KazooHold() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    dblock::test::wait_exit(pid);
  }
  KazooHold(const KazooHold&) = delete;
  KazooHold& operator=(const KazooHold&) = delete;
};

// How many of `nodes` are writers' (__lock__) and readers' (__rlock__) contenders.
std::pair<int, int> writers_readers(const std::vector<std::string>& nodes) {
  std::pair<int, int> n{0, 0};
  for (const auto& c : nodes)
    if (auto k = zk::parse_contender(c)) ++(k->shared ? n.second : n.first);
  return n;
}

}  // namespace

TEST_CASE("a Kazoo Lock and a dblock lock on the same node exclude each other", "[zookeeper]") {
  Tree t;
  auto c = t.f.make().open();
  auto out = t.f.dir.path() + "/kazoo";
  // Kazoo holds: dblock cannot have it, and gets it once Kazoo lets go.
  auto pid = kazoo(t, "shared", "hold", out);
  REQUIRE(eventually([&] { return std::filesystem::exists(out); }, 20s));
  auto lock = c->lock("shared", zk_opts());
  CHECK_FALSE(lock.try_acquire());
  CHECK_FALSE(lock.try_acquire(300ms));
  std::ofstream(out + ".stop").put('x');
  auto lease = lock.try_acquire(10s);
  REQUIRE(lease);
  CHECK(dblock::test::wait_exit(pid) == 0);
  // dblock holds: Kazoo's non-blocking acquire fails; after release it succeeds.
  auto try_out = t.f.dir.path() + "/try1";
  CHECK(dblock::test::wait_exit(kazoo(t, "shared", "try", try_out)) == 0);
  CHECK(slurp(try_out) == "0");
  lease->release();
  try_out = t.f.dir.path() + "/try2";
  CHECK(dblock::test::wait_exit(kazoo(t, "shared", "try", try_out)) == 0);
  CHECK(slurp(try_out) == "1");
  CHECK(t.nodes("shared").empty());  // Kazoo's failed try and both releases left nothing
}

TEST_CASE("a Kazoo ReadLock holds beside dblock's readers and keeps its writers out", "[zookeeper][shapes]") {
  Tree t;
  auto ns = t.f.make();
  auto c = ns.open();
  auto lock = c->lock("doc", zk_opts());
  KazooHold reader(t, "doc", "ReadLock", t.f.dir.path() + "/kazoo-read");
  REQUIRE(eventually([&] { return reader.held(); }, 20s));
  auto shared = lock.try_acquire_shared();  // readers together
  REQUIRE(shared);
  CHECK(shared->mode() == dblock::Mode::shared);
  CHECK(writers_readers(t.nodes("doc")) == std::pair<int, int>{0, 2});
  shared->release();
  auto writer = ns.open()->lock("doc", zk_opts());
  CHECK_FALSE(writer.try_acquire());  // a writer waits for Kazoo's reader
  CHECK_FALSE(writer.try_acquire(300ms));
  CHECK(reader.stop() == 0);
  auto held = writer.try_acquire(10s);
  REQUIRE(held);
  CHECK(held->mode() == dblock::Mode::exclusive);
  held->release();
  CHECK(t.nodes("doc").empty());
}

TEST_CASE("a Kazoo WriteLock keeps dblock's readers out", "[zookeeper][shapes]") {
  Tree t;
  auto c = t.f.make().open();
  auto lock = c->lock("doc", zk_opts());
  KazooHold writer(t, "doc", "WriteLock", t.f.dir.path() + "/kazoo-write");
  REQUIRE(eventually([&] { return writer.held(); }, 20s));
  CHECK_FALSE(lock.try_acquire_shared());
  CHECK_FALSE(lock.try_acquire_shared(300ms));
  CHECK(writers_readers(t.nodes("doc")) == std::pair<int, int>{1, 0});  // both tries left nothing
  CHECK(writer.stop() == 0);
  auto shared = lock.try_acquire_shared(10s);
  REQUIRE(shared);
  CHECK(shared->mode() == dblock::Mode::shared);
}

TEST_CASE("a dblock reader lets a Kazoo ReadLock in, and a Kazoo WriteLock waits for it", "[zookeeper][shapes]") {
  Tree t;
  auto ns = t.f.make();
  auto a = ns.open(), b = ns.open();
  auto reader = a->lock("doc", zk_opts()).acquire_shared();
  auto nodes = t.nodes("doc");
  REQUIRE(nodes.size() == 1);
  CHECK(nodes[0].size() == 32 + 9 + 10);  // <uuid hex>__rlock__<10-digit sequence>, as Kazoo's ReadLock
  CHECK(nodes[0].substr(32, 9) == "__rlock__");
  auto listed = a->list();
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].mode == dblock::Mode::shared);
  CHECK(listed[0].fence == reader.fence());
  CHECK(kazoo_try(t, "doc", "ReadLock", t.f.dir.path() + "/try-read") == "1");
  CHECK(kazoo_try(t, "doc", "WriteLock", t.f.dir.path() + "/try-write") == "0");
  CHECK(kazoo_try(t, "doc", "Lock", t.f.dir.path() + "/try-lock") == "1");  // Kazoo's Lock ignores readers
  // A Kazoo writer queues behind the dblock reader ...
  KazooHold writer(t, "doc", "WriteLock", t.f.dir.path() + "/kazoo-write");
  REQUIRE(eventually([&] { return writers_readers(t.nodes("doc")).first == 1; }, 20s));
  std::this_thread::sleep_for(500ms);
  CHECK_FALSE(writer.held());
  // ... and, waiting, keeps new dblock readers out: writers are not starved.
  auto late = b->lock("doc", zk_opts());
  CHECK_FALSE(late.try_acquire_shared());
  CHECK_FALSE(late.try_acquire_shared(300ms));
  CHECK_FALSE(writer.held());
  // The dblock reader goes: the Kazoo writer gets in, new readers still wait for it.
  reader.release();
  REQUIRE(eventually([&] { return writer.held(); }, 10s));
  CHECK_FALSE(late.try_acquire_shared());
  std::atomic<bool> late_in{false};
  std::thread waiting([&] {
    auto l = late.try_acquire_shared(20s);
    late_in = l.has_value();
  });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(late_in.load());
  CHECK(writer.stop() == 0);
  waiting.join();
  CHECK(late_in.load());
  CHECK(t.nodes("doc").empty());
}

TEST_CASE("dblock's readers queue behind a waiting dblock writer, then get in together", "[zookeeper][shapes]") {
  Tree t;
  auto ns = t.f.make();
  auto a = ns.open(), w = ns.open();
  auto first = a->lock("doc", zk_opts()).acquire_shared();
  std::atomic<bool> writer_in{false};
  std::thread writer([&] {
    auto l = w->lock("doc", zk_opts()).try_acquire(20s);
    writer_in = l.has_value();
    std::this_thread::sleep_for(300ms);
  });
  REQUIRE(eventually([&] { return writers_readers(t.nodes("doc")) == std::pair<int, int>{1, 1}; }));
  // Three readers queue behind the writer; each holds a node of its own.
  std::vector<std::shared_ptr<dblock::Client>> clients;
  std::vector<std::thread> readers;
  std::atomic<int> readers_in{0}, inside{0}, most_inside{0};
  std::atomic<bool> writer_in_when_read{true};
  for (int i = 0; i < 3; ++i) {
    clients.push_back(ns.open());
    readers.emplace_back([&, c = clients.back()] {
      auto l = c->lock("doc", zk_opts()).try_acquire_shared(20s);
      if (!l) return;
      if (!writer_in.load()) writer_in_when_read = false;
      ++readers_in;
      int now = ++inside;
      for (int seen = most_inside; now > seen && !most_inside.compare_exchange_weak(seen, now);) {
      }
      std::this_thread::sleep_for(1s);  // the three wake on the writer's one deletion
      --inside;
    });
  }
  REQUIRE(eventually([&] { return writers_readers(t.nodes("doc")) == std::pair<int, int>{1, 4}; }));
  std::this_thread::sleep_for(300ms);
  CHECK(readers_in == 0);
  CHECK_FALSE(writer_in.load());
  first.release();
  writer.join();
  for (auto& r : readers) r.join();
  CHECK(writer_in.load());
  CHECK(readers_in == 3);            // all three after the writer
  CHECK(most_inside == 3);           // together
  CHECK(writer_in_when_read.load());  // none before it
  CHECK(t.nodes("doc").empty());
}

TEST_CASE("semaphores are Kazoo's: leases under the path, max_leases in its data, both ways", "[zookeeper][shapes]") {
  Tree t;
  auto ns = t.f.make();
  auto a = ns.open(), b = ns.open();
  auto o = zk_opts();
  o.permits = 2;
  // A Kazoo Semaphore of 2 holds one lease: dblock gets the other, and no third.
  KazooHold kazoo_lease(t, "pool", "Semaphore:2", t.f.dir.path() + "/kazoo-sem");
  REQUIRE(eventually([&] { return kazoo_lease.held(); }, 20s));
  auto mine = a->lock("pool", o).try_acquire();
  REQUIRE(mine);
  CHECK_FALSE(b->lock("pool", o).try_acquire());
  CHECK_FALSE(b->lock("pool", o).try_acquire(300ms));
  // The layout: max_leases as the path's data, one <uuid hex> child per lease, data = owner.
  std::string data;
  REQUIRE(t.raw->get(t.root + "/pool", &data, nullptr) == ZOK);
  CHECK(data == "2");
  auto leases = t.nodes("pool");
  CHECK(leases.size() == 2);
  bool found = false;
  for (const auto& l : leases) {
    std::string owner;
    struct Stat st {};
    REQUIRE(t.raw->get(t.root + "/pool/" + l, &owner, &st) == ZOK);
    if (owner == mine->owner()) {
      found = true;
      CHECK(l.size() == 32);
      CHECK(mine->fence() == static_cast<std::uint64_t>(st.czxid));
    }
  }
  CHECK(found);
  CHECK(t.nodes("pool-__lock__").empty());  // the gate is let go once a lease is taken
  auto listed = a->list();
  CHECK(std::count_if(listed.begin(), listed.end(), [](const dblock::LeaseInfo& l) { return l.name == "pool"; }) == 2);
  // Full: Kazoo's non-blocking acquire fails too; a permit given back lets it in.
  CHECK(kazoo_try(t, "pool", "Semaphore:2", t.f.dir.path() + "/try-full") == "0");
  CHECK(kazoo_lease.stop() == 0);
  auto second = b->lock("pool", o).try_acquire(5s);
  REQUIRE(second);
  CHECK(second->fence() > mine->fence());
  CHECK(kazoo_try(t, "pool", "Semaphore:2", t.f.dir.path() + "/try-full2") == "0");
  mine->release();
  CHECK(kazoo_try(t, "pool", "Semaphore:2", t.f.dir.path() + "/try-free") == "1");
  // Another number of permits on the same path is refused on both sides, as Kazoo does.
  CHECK(kazoo_try(t, "pool", "Semaphore:3", t.f.dir.path() + "/try-mismatch") == "E");
  auto three = zk_opts();
  three.permits = 3;
  CHECK_THROWS_WITH(a->lock("pool", three).try_acquire(), Catch::Contains("semaphore of 2 permits, not 3"));
  second->release();
  CHECK(t.nodes("pool").empty());
}

TEST_CASE("a semaphore waiter waits in the gate's queue and is woken by a lease going", "[zookeeper][shapes]") {
  Tree t;
  auto ns = t.f.make();
  auto a = ns.open(), b = ns.open(), c = ns.open();
  auto o = zk_opts();
  o.permits = 2;
  auto first = a->lock("pool", o).acquire();
  auto second = b->lock("pool", o).acquire();
  std::atomic<bool> in{false};
  std::thread waiter([&] {
    auto l = c->lock("pool", o).try_acquire(20s);
    in = l.has_value();
  });
  // The waiter holds the gate while it waits (one __lock__ node), and takes no lease.
  REQUIRE(eventually([&] { return t.nodes("pool-__lock__").size() == 1; }));
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(in.load());
  CHECK(t.nodes("pool").size() == 2);
  auto t0 = Clock::now();
  second.release();
  waiter.join();
  CHECK(in.load());
  CHECK(Clock::now() - t0 < 2s);  // woken by the lease's deletion, not by polling
  first.release();
  CHECK(t.nodes("pool").empty());
  CHECK(t.nodes("pool-__lock__").empty());
}

TEST_CASE("nodes are named like Kazoo's and fences are their creation zxids", "[zookeeper]") {
  Tree t;
  auto c = t.f.make().open();
  std::uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    auto lease = c->lock("job", zk_opts()).acquire();
    auto nodes = t.nodes("job");
    REQUIRE(nodes.size() == 1);
    auto k = zk::parse_contender(nodes[0]);
    REQUIRE(k);
    CHECK(nodes[0].size() == 32 + 8 + 10);  // <uuid hex>__lock__<10-digit sequence>
    CHECK(nodes[0].substr(32, 8) == "__lock__");
    struct Stat st {};
    std::string data;
    REQUIRE(t.raw->get(t.root + "/job/" + nodes[0], &data, &st) == ZOK);
    CHECK(data == lease.owner());
    CHECK(lease.fence() == static_cast<std::uint64_t>(st.czxid));
    CHECK(lease.fence() > last);
    last = lease.fence();
    auto held = c->list();
    REQUIRE(held.size() == 1);
    CHECK(held[0].name == "job");
    CHECK(held[0].fence == lease.fence());
    CHECK(held[0].owner == lease.owner());
  }
}

TEST_CASE("waiters queue in creation order and each wakes after its predecessor", "[zookeeper]") {
  Tree t;
  auto ns = t.f.make();
  auto holder = ns.open();
  auto first = holder->lock("q", zk_opts()).acquire();
  std::vector<std::shared_ptr<dblock::Client>> clients;
  std::vector<std::thread> waiters;
  std::mutex m;
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(ns.open());
    waiters.emplace_back([&, i, c = clients.back()] {
      auto lease = c->lock("q", zk_opts()).acquire();
      {
        std::lock_guard lk(m);
        order.push_back(i);
      }
      std::this_thread::sleep_for(50ms);
    });
    // The next waiter starts once this one's node is queued, so creation order is i's order.
    REQUIRE(eventually([&] { return t.nodes("q").size() == static_cast<std::size_t>(i + 2); }));
  }
  std::this_thread::sleep_for(200ms);
  {
    std::lock_guard lk(m);
    CHECK(order.empty());  // nobody jumps the holder
  }
  first.release();
  for (auto& w : waiters) w.join();
  CHECK(order == std::vector<int>{0, 1, 2});
  CHECK(t.nodes("q").empty());
}

TEST_CASE("a failed try-lock and a timed wait that ends leave no node behind", "[zookeeper]") {
  Tree t;
  auto ns = t.f.make();
  auto a = ns.open(), b = ns.open();
  auto held = a->lock("job", zk_opts()).acquire();
  auto lock = b->lock("job", zk_opts());
  CHECK_FALSE(lock.try_acquire());
  CHECK(t.nodes("job").size() == 1);
  auto t0 = Clock::now();
  CHECK_FALSE(lock.try_acquire(400ms));
  CHECK(Clock::now() - t0 >= 400ms);
  CHECK(t.nodes("job").size() == 1);
  CHECK_FALSE(lock.try_lock_for(150ms));
  CHECK(t.nodes("job").size() == 1);
  held.release();
  CHECK(lock.try_acquire());
}

TEST_CASE("session expiry while holding loses the lease once; a fresh session serves later acquires",
          "[zookeeper]") {
  Tree t;
  auto c = t.f.make().open();
  std::atomic<int> calls{0};
  auto o = zk_opts(3s);
  o.renew_every = 100ms;
  o.on_lost = [&](const std::string&, std::uint64_t) { calls++; };
  auto lease = c->lock("job", o).acquire();
  auto nodes = t.nodes("job");
  REQUIRE(nodes.size() == 1);
  struct Stat st {};
  REQUIRE(t.raw->exists(t.root + "/job/" + nodes[0], &st) == ZOK);
  // The standard trick: a second handle on the same session (id and password), closed,
  // ends that session on the server.
  clientid_t id{};
  id.client_id = st.ephemeralOwner;
  std::string password;
  REQUIRE(zk::Session::credentials(st.ephemeralOwner, &password));
  std::copy(password.begin(), password.end(), id.passwd);
  // Once more if the session outlived it: under TSan a closeSession was once not delivered
  // (the node stayed, renewals went on, no loss for 20 s). The node going shows it worked.
  const auto node = t.root + "/job/" + nodes[0];
  bool ended = false;
  for (int attempt = 0; attempt < 3 && !ended; ++attempt) {
    zhandle_t* dup = zookeeper_init(t.hosts.c_str(), nullptr, 3000, &id, nullptr, 0);
    REQUIRE(dup);
    // Only a connected handle sends closeSession; under the sanitizers connecting can take a while.
    bool connected = eventually([&] { return zoo_state(dup) == ZOO_CONNECTED_STATE; }, 20s);
    zookeeper_close(dup);
    REQUIRE(connected);
    ended = eventually([&] { return t.raw->exists(node, nullptr) == ZNONODE; }, 10s);
  }
  REQUIRE(ended);
  REQUIRE(eventually([&] { return calls.load() > 0; }, 20s));
  CHECK(lease.lost());
  std::this_thread::sleep_for(500ms);
  CHECK(calls == 1);
  CHECK_THROWS_AS(lease.release(), dblock::LockLostError);
  auto again = c->lock("job", o).try_acquire(5s);  // the pool opens a new session
  REQUIRE(again);
  CHECK(again->fence() > lease.fence());
  CHECK_FALSE(again->lost());
}

TEST_CASE("without renewal a ZooKeeper lease is lost locally and its node deleted", "[zookeeper]") {
  Tree t;
  auto c = t.f.make().open();
  auto o = zk_opts(200ms);
  o.auto_renew = false;
  auto lease = c->lock("job", o).acquire();
  CHECK(t.nodes("job").size() == 1);
  REQUIRE(eventually([&] { return lease.lost(); }, 5s));
  CHECK(eventually([&] { return t.nodes("job").empty(); }, 2s));  // it blocks nobody
  CHECK(t.f.make().open()->lock("job", zk_opts()).try_acquire());
}

TEST_CASE("zookeeper roots and names are checked; odd names are escaped", "[zookeeper]") {
  Tree t;
  auto base = dblock::test::server_url("DBLOCK_TEST_ZK_URL");
  auto server = base.substr(0, base.find('/', std::string("zookeeper://").size()));
  for (const char* root : {"", "/", "/a/", "/a//b", "/a/./b", "/a/../b", "/.", "/a\x01"})
    CHECK_THROWS_AS(dblock::Client::open(server + root), dblock::UsageError);
  auto c = t.f.make().open();
  for (std::string bad : {"a/b", "/", ".", "..", "ctl\x01", "del\x7f", "\xef\xbf\xb5" /* U+FFF5 */})
    CHECK_THROWS_AS(c->lock(bad, zk_opts()).try_acquire(), dblock::UsageError);
  CHECK_THROWS_AS(c->force_release("a/b"), dblock::UsageError);
  CHECK(c->list().empty());
  // Outside the BMP ZooKeeper refuses paths, so emoji (and '%', the escape) are %XX-encoded;
  // every other name is its node name, as a Kazoo user would write it.
  CHECK(zk::node_name("plain name") == "plain name");
  CHECK(zk::node_name("100%") == "100%25");
  CHECK(zk::node_name("\xf0\x9f\x94\x92") == "%F0%9F%94%92");
  auto lease = c->lock("🔒 100%", zk_opts()).acquire();
  auto held = c->list();
  REQUIRE(held.size() == 1);
  CHECK(held[0].name == "🔒 100%");
  CHECK(t.nodes("%F0%9F%94%92 100%25").size() == 1);
}

TEST_CASE("an unreachable ZooKeeper is UnavailableError within the connect timeout", "[zookeeper]") {
  dblock::ClientOptions o;
  o.connect_timeout = 700ms;
  auto t0 = Clock::now();
  CHECK_THROWS_AS(dblock::Client::open("zookeeper://127.0.0.1:1/dblock", o), dblock::UnavailableError);
  CHECK(Clock::now() - t0 < 700ms + 1s);
}

// zookeeper://user:password@...: digest authentication, and every node dblock creates (the root,
// a name's node, a contender's) is that identity's alone (docs/backends/zookeeper.md). A
// holder's node cannot be deleted, nor a contender added, by a client without the identity:
// deleting a child takes DELETE on its parent, and the parent is ours too.
TEST_CASE("with a user and password dblock's nodes are that identity's alone", "[zookeeper][auth]") {
  Tree t;
  const std::string scheme = "zookeeper://", digest = "locker:s3cret-canary";
  auto authed = [&](const std::string& credentials) {
    return scheme + credentials + "@" + t.f.url.substr(scheme.size());
  };
  auto c = dblock::Client::open(authed(digest));
  auto lease = c->lock("job", zk_opts()).acquire();
  const auto dir = t.root + "/job";

  // Anonymous, and the same user with another password: neither reads, adds or deletes.
  zk::Session wrong(t.hosts, 10s, 5s, "locker:guess");
  for (zk::Session* s : {t.raw.get(), &wrong}) {
    std::vector<std::string> names;
    CHECK_THROWS_WITH(s->children(dir, &names), Catch::Contains("another identity"));
    CHECK_THROWS_AS(s->create(dir + "/__lock__x", "", 0, nullptr, nullptr), dblock::UnavailableError);
  }
  zk::Session same(t.hosts, 10s, 5s, digest);
  std::vector<std::string> held;
  REQUIRE(same.children(dir, &held) == ZOK);
  REQUIRE(held.size() == 1);
  CHECK_THROWS_AS(t.raw->remove(dir + "/" + held[0]), dblock::UnavailableError);
  CHECK_THROWS_AS(wrong.remove(dir + "/" + held[0]), dblock::UnavailableError);
  CHECK_FALSE(lease.lost());

  // A Client with the wrong password is refused in one line that holds no password.
  try {
    auto l = dblock::Client::open(authed("locker:guess"))->lock("job", zk_opts()).try_acquire();
    (void)l;
    FAIL("a client with the wrong password was let in");
  } catch (const dblock::UnavailableError& e) {
    CHECK_THAT(e.what(), Catch::Contains("another identity") && !Catch::Contains("guess"));
  }

  // Kazoo with the same credentials is the same identity: excluded while dblock holds, then in.
  auto out = t.f.dir.path() + "/try";
  CHECK(dblock::test::wait_exit(kazoo(t, "job", "try", out + "1", "Lock", digest)) == 0);
  CHECK(slurp(out + "1") == "0");
  lease.release();
  CHECK(dblock::test::wait_exit(kazoo(t, "job", "try", out + "2", "Lock", digest)) == 0);
  CHECK(slurp(out + "2") == "1");
  CHECK(dblock::test::wait_exit(kazoo(t, "job", "try", out + "3")) == 0);
  CHECK(slurp(out + "3") == "N");  // anonymous: NoAuthError
  CHECK(c->lock("job", zk_opts()).try_acquire());
}

TEST_CASE("zookeeper URLs: parameters and half credentials are refused, TLS with its reason", "[zookeeper][auth]") {
  const std::string server = "zookeeper://127.0.0.1:1/dblock";  // refused before any connection
  CHECK_THROWS_WITH(dblock::Client::open(server + "?ssl-ca=/ca.pem"),
                    Catch::Contains("no TLS") && Catch::Contains("built without it"));
  CHECK_THROWS_WITH(dblock::Client::open(server + "?secure=true"), Catch::Contains("no TLS"));
  CHECK_THROWS_WITH(dblock::Client::open(server + "?timeout=5"), Catch::Contains("unknown zookeeper URL parameter"));
  for (const char* half : {"zookeeper://alice@127.0.0.1:1/dblock", "zookeeper://:pw@127.0.0.1:1/dblock"})
    CHECK_THROWS_AS(dblock::Client::open(half), dblock::UsageError);
}
