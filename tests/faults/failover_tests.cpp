// Locks across the failover of a replicated server, on the topologies scripts/services starts
// by name: the leader of a three-node ZooKeeper ensemble (zookeeper-ensemble), killed with
// SIGKILL while a lock is held, another elected, the killed node brought back
// (DBLOCK_TEST_ZK_ENSEMBLE_FAILOVER does all three); a PostgreSQL primary killed and its
// synchronous standby promoted (postgresql-replicated, DBLOCK_TEST_PG_REPLICATED_FAILOVER); a
// MariaDB primary killed and its semi-synchronous replica promoted (mysql-replicated); a Redis
// primary killed and its replica promoted by three Sentinels (redis-sentinel).
// A ZooKeeper session outlives a leader change that fits in its timeout, so the lock stays
// held, and a fence (the node's creation zxid, whose high half is the leader's epoch) never
// goes backwards across one. On PostgreSQL and MariaDB, fences of lock_in in the caller's own
// transaction are checked across failovers beside the leases'. Five failovers in CI (the
// ZooKeeper client's server is one of three at random, so it loses its own connection in
// some); DBLOCK_FAILOVER_ROUNDS=N for a longer run (docs/RELIABILITY.md, "Failover").
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/url.hpp"
#ifdef DBLOCK_TEST_POSTGRESQL
#include <pqxx/pqxx>

#include "dblock/postgresql.hpp"
#endif
#ifdef DBLOCK_TEST_MYSQL
#include <cppconn/connection.h>
#include <cppconn/exception.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include "dblock/mysql.hpp"
#endif
#ifdef DBLOCK_TEST_REDIS
#include "support/redis_db.hpp"
#endif
#include "support/servers.hpp"

using namespace std::chrono_literals;

namespace {

// A call through a client whose server may have been the one killed: retried for up to 10 s
// while the client reconnects (it answers unavailable or timed out meanwhile).
template <class Call>
auto reconnecting(Call call) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    try {
      return call();
    } catch (const dblock::Error& e) {
      const bool reconnect = e.kind() == dblock::ErrorKind::unavailable || e.kind() == dblock::ErrorKind::timeout;
      if (!reconnect || std::chrono::steady_clock::now() >= until) throw;
      std::this_thread::sleep_for(100ms);
    }
  }
}

// DBLOCK_FAILOVER_ROUNDS when set (a longer run), else `rounds`.
int failover_rounds(int rounds) {
  const char* env = std::getenv("DBLOCK_FAILOVER_ROUNDS");
  return env && *env ? std::atoi(env) : rounds;
}

// A connection of the test's own (the service's, in lock_in), opened while a promotion may
// still be settling: tried for up to 30 s.
template <class Connect>
auto retried_connect(Connect connect) {
  const auto until = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    try {
      return connect();
    } catch (const std::exception&) {
      if (std::chrono::steady_clock::now() >= until) throw;
      std::this_thread::sleep_for(200ms);
    }
  }
}

// What hold_across_failovers saw, for topologies where a held lock may be lost (Redis).
struct Tally {
  int rounds = 0;
  int lost = 0;   // rounds in which the holder's lock was lost (lost(), on_lost, or its release said so)
  int taken = 0;  // rounds in which another client got the lock while its holder still held it
};

// Holds `name` with `o` on `url` across DBLOCK_FAILOVER_ROUNDS (else `rounds`) runs of
// `failover`: the next holder's fence is above every earlier fence, and (must_hold) the lock
// stays held by its holder and another client is kept out; otherwise those are counted.
Tally hold_across_failovers(const std::string& url, const char* failover, dblock::LockOptions o, int rounds = 5,
                            bool must_hold = true, bool outage_is_command = false) {
  // A server that just failed over may still refuse a connection now and then.
  auto open = [&url] { return reconnecting([&url] { return dblock::Client::open(url); }); };
  auto a = open(), b = open();
  std::atomic<int> lost{0};
  o.on_lost = [&lost](const std::string&, std::uint64_t) { ++lost; };
  // Meanwhile a third client takes and gives back another lock without pause: the longest
  // gap between its grants in a round is how long the servers could not grant (printed).
  std::atomic<bool> done{false};
  std::atomic<long long> gap_ms{0};
  std::atomic<long> probe_grants{0};
  std::string probe_error;  // written by the probe before it ends, read after the join
  std::thread probe([&] {
    std::shared_ptr<dblock::Client> c;
    try {
      c = open();
    } catch (const std::exception& e) {
      probe_error = e.what();
      return;
    }
    auto lock = c->lock("probe", o);
    auto last_grant = std::chrono::steady_clock::now();
    while (!done) {
      try {
        if (auto l = lock.try_acquire(20s)) l->release();
      } catch (const dblock::Error&) {  // the connection lost mid-call: try again
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_grant).count();
      long long seen = gap_ms.load();
      while (ms > seen && !gap_ms.compare_exchange_weak(seen, ms)) {
      }
      last_grant = now;
      ++probe_grants;
    }
  });
  struct Join {  // the probe stops however this returns, so that a failed check is reported
    std::atomic<bool>& done;
    std::thread& probe;
    ~Join() { stop(); }
    void stop() {
      done = true;
      if (probe.joinable()) probe.join();
    }
  } join{done, probe};
  rounds = failover_rounds(rounds);
  Tally tally;
  int excused_lost = 0;    // on_lost calls in rounds whose failover outlasted the TTL
  std::uint64_t last = 0;  // the greatest fence granted so far
  for (int round = 0; round < rounds; ++round) {
    INFO("round " << round + 1);
    auto held = reconnecting([&] { return a->lock("job", o).acquire(); });
    CHECK(held.fence() > last);
    last = std::max(last, held.fence());
    gap_ms = 0;
    const int lost_before = lost;
    const auto started = std::chrono::steady_clock::now();
    REQUIRE(std::system(failover) == 0);
    // The promise covers an outage that fits in the TTL, with a renewal's period to spare.
    // Where the outage lasts until the topology is whole again (outage_is_command: Redis with
    // replicas=N, whose renewals wait for the restarted replica's resync), the command, which
    // returns only then, bounds it from above: a failover slower than that (a loaded machine:
    // up to 30 s seen) excuses a loss in its round, said here; fences are checked all the same.
    const auto took = std::chrono::steady_clock::now() - started;
    const bool must = must_hold && (!outage_is_command || took < o.ttl * 2 / 3);
    if (must_hold && !must)
      std::printf("failover %d took %lld ms, past what a %lld ms TTL covers: a loss is not failed\n", round + 1,
                  static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
                  static_cast<long long>(o.ttl.count()));
    // The pause ends with the probe's first grant after it, which may come after the command
    // returned: waited for, so that the pause is counted in its own round.
    const auto after = probe_grants.load();
    for (int i = 0; i < 300 && probe_grants.load() == after; ++i)
      std::this_thread::sleep_for(50ms);
    std::printf("failover %d: the probe's longest wait between grants: %lld ms\n", round + 1, gap_ms.load());
    ++tally.rounds;
    bool was_lost = held.lost();
    if (must) CHECK_FALSE(was_lost);
    if (auto thief = reconnecting([&] { return b->lock("job", o).try_acquire(); })) {  // else still held
      if (must) FAIL_CHECK("another client got the lock its holder still held");
      ++tally.taken;
      CHECK(thief->fence() > last);
      last = std::max(last, thief->fence());
      CHECK_NOTHROW(thief->release());
    }
    try {
      reconnecting([&] {
        held.release();
        return 0;
      });
    } catch (const dblock::LockLostError&) {
      if (must) FAIL_CHECK("the holder's release found the lock lost");
      was_lost = true;
    }
    if (was_lost || lost != lost_before) ++tally.lost;
    if (!must) excused_lost += lost - lost_before;
    auto next = reconnecting([&] { return b->lock("job", o).try_acquire(10s); });
    REQUIRE(next);
    CHECK(next->fence() > last);
    last = std::max(last, next->fence());
    CHECK_NOTHROW(next->release());
  }
  join.stop();
  CHECK(probe_error == "");
  if (must_hold) CHECK(lost == excused_lost);
  return tally;
}

// Each round a lease, then `lock_in_committed` (the test's own connection to the current
// primary: lock_in in a transaction, committed; answers the fence), then a failover: every
// fence is above all before it, the leases' and the lock_ins' alike. (A lock_in whose
// transaction never committed may see its fence again after a crash: nothing it guarded was
// kept, so that is not checked.)
template <class LockIn>
void lock_in_across_failovers(const std::string& url, const char* failover, LockIn lock_in_committed) {
  dblock::ClientOptions co;
  co.auto_migrate = true;
  auto client = reconnecting([&] { return dblock::Client::open(url, co); });
  dblock::LockOptions o;
  o.ttl = 20s;
  std::uint64_t last = 0;
  const int rounds = failover_rounds(3);
  for (int round = 0; round <= rounds; ++round) {
    INFO("round " << round + 1);
    auto lease = reconnecting([&] { return client->lock("lease-beside", o).acquire(); });
    CHECK(lease.fence() > last);
    last = std::max(last, lease.fence());
    lease.release();
    const std::uint64_t fence = lock_in_committed();
    CHECK(fence > last);
    last = std::max(last, fence);
    if (round < rounds) REQUIRE(std::system(failover) == 0);
  }
}

#ifdef DBLOCK_TEST_MYSQL
// A service's own connection (autocommit off) to whichever of the URL's hosts is the primary
// now (read_only off), as a service behind a proxy or a DNS switch would get after a failover.
std::unique_ptr<sql::Connection> mysql_primary_connection(const std::string& url) {
  const auto u = dblock::detail::parse_url(url);
  return retried_connect([&u] {
    for (const auto& h : u.hosts) try {
        std::unique_ptr<sql::Connection> c(sql::mysql::get_mysql_driver_instance()->connect(
            "tcp://" + h.host + ":" + std::to_string(h.port ? h.port : 3306), u.user, u.password));
        c->setSchema(u.path);
        std::unique_ptr<sql::Statement> st(c->createStatement());
        std::unique_ptr<sql::ResultSet> r(st->executeQuery("SELECT @@GLOBAL.read_only"));
        if (r->next() && r->getInt(1) == 0) {
          c->setAutoCommit(false);
          return c;
        }
      } catch (const sql::SQLException&) {  // the killed node, not back yet
      }
    throw std::runtime_error("no host of " + u.redacted() + " is a writable primary");
  });
}
#endif

const char* failover_command(const char* variable) {
  const char* failover = std::getenv(variable);
  if (!failover || !*failover)
    FAIL(variable << " is not set: scripts/test sets it (scripts/services env names its topology)");
  return failover;
}

}  // namespace

TEST_CASE("zookeeper ensemble: a held lock outlives leader failovers, and fences keep increasing",
          "[zookeeper][failover]") {
  std::random_device rd;
  const auto url = dblock::test::server_url("DBLOCK_TEST_ZK_ENSEMBLE_URL") + "/dblock-failover-" + std::to_string(rd());
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::zookeeper;
  o.ttl = 10s;  // the session timeout: an election and a rejoin take 1-2 s here
  hold_across_failovers(url, failover_command("DBLOCK_TEST_ZK_ENSEMBLE_FAILOVER"), o);
}

// A primary with a synchronous standby: a commit returns once the standby has it, so a lease
// granted or renewed before the failover is on the promoted standby, and so is the fence
// sequence's WAL record (logged ahead of the values handed out, flushed with the commit that
// used one). Clients reach the new primary through the two-host URL. Commits wait while the
// old primary is rebuilt as a standby (the failover command does it): the lease's TTL covers it.
TEST_CASE("postgresql primary and synchronous standby: a held lease outlives failovers, and fences keep "
          "increasing",
          "[postgresql][failover]") {
  const auto url = dblock::test::server_url("DBLOCK_TEST_PG_REPLICATED_URL");
  const char* failover = failover_command("DBLOCK_TEST_PG_REPLICATED_FAILOVER");
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic}) {
    INFO(dblock::to_string(strategy));
    dblock::ClientOptions co;
    co.auto_migrate = true;
    auto checks = reconnecting([&] { return dblock::Client::open(url, co); })->check_settings();  // the table too
    auto standbys = std::find_if(checks.begin(), checks.end(), [](const auto& c) { return c.setting == "standbys"; });
    REQUIRE(standbys != checks.end());
    CHECK(standbys->value == "1 streaming, synchronous_standby_names = '*'");
    CHECK(standbys->verdict == dblock::Verdict::ok);
    dblock::LockOptions o;
    o.strategy = strategy;
    o.ttl = 20s;  // a failover and a rebuilt standby take 3-5 s here, during which commits wait
    hold_across_failovers(url, failover, o);
  }
}

#ifdef DBLOCK_TEST_POSTGRESQL
// lock_in in the caller's transaction (a libpqxx connection of its own to the URL, which
// libpq takes as it is: both hosts, target_session_attrs=read-write) draws from the same
// sequence and timeline as the leases.
TEST_CASE("postgresql primary and synchronous standby: fences of lock_in in the caller's transaction never go "
          "backwards across failovers",
          "[postgresql][failover]") {
  const auto url = dblock::test::server_url("DBLOCK_TEST_PG_REPLICATED_URL");
  const dblock::postgresql::LockTable locks;
  lock_in_across_failovers(url, failover_command("DBLOCK_TEST_PG_REPLICATED_FAILOVER"), [&] {
    auto c = retried_connect([&] { return std::make_unique<pqxx::connection>(url); });
    pqxx::work tx(*c);
    const auto fence = locks.lock_in(tx, "in-transaction");
    tx.commit();
    return fence;
  });
}
#endif

// The same with MariaDB: a primary and a semi-synchronous replica (AFTER_SYNC: a commit
// returns once the replica has its events), the URL naming both. Fences come from the
// table's SEQUENCE, whose every block is reserved by a write of its row that the replica
// acknowledges before the block's first value is handed out, inside a grant's transaction
// or not (the session strategies draw outside one). The killed node restarts as the new
// primary's replica, having dropped what was never acknowledged (--init-rpl-role=SLAVE).
// Session locks end with the primary that held them; their fences must still grow.
TEST_CASE("mysql primary and semi-synchronous replica: a held lease outlives failovers, and fences keep "
          "increasing",
          "[mysql][failover]") {
  const auto url = dblock::test::server_url("DBLOCK_TEST_MYSQL_REPLICATED_URL");
  const char* failover = failover_command("DBLOCK_TEST_MYSQL_REPLICATED_FAILOVER");
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic}) {
    INFO(dblock::to_string(strategy));
    dblock::ClientOptions co;
    co.auto_migrate = true;
    auto checks = reconnecting([&] { return dblock::Client::open(url, co); })->check_settings();  // the table too
    auto replicas = std::find_if(checks.begin(), checks.end(), [](const auto& c) { return c.setting == "replicas"; });
    REQUIRE(replicas != checks.end());
    CHECK(replicas->value == "1 connected, semi-synchronous ON (1 acknowledging, AFTER_SYNC)");
    CHECK(replicas->verdict == dblock::Verdict::ok);
    dblock::LockOptions o;
    o.strategy = strategy;
    o.ttl = 20s;  // commits wait from the kill until the restarted node acknowledges
    hold_across_failovers(url, failover, o);
  }
  for (auto strategy : {dblock::Strategy::for_update, dblock::Strategy::advisory}) {
    INFO(dblock::to_string(strategy));
    dblock::LockOptions o;
    o.strategy = strategy;
    o.ttl = 20s;
    hold_across_failovers(url, failover, o, 2, /*must_hold=*/false);
  }
}

#ifdef DBLOCK_TEST_MYSQL
// lock_in draws its fence from the same SEQUENCE inside the caller's transaction: a fence of a
// committed lock_in, or a lease's, is never handed out again after a promotion.
TEST_CASE("mysql primary and semi-synchronous replica: fences of lock_in in the caller's transaction never go "
          "backwards across failovers",
          "[mysql][failover]") {
  const auto url = dblock::test::server_url("DBLOCK_TEST_MYSQL_REPLICATED_URL");
  const dblock::mysql::LockTable locks;  // MariaDB: the fence comes with the CALL
  lock_in_across_failovers(url, failover_command("DBLOCK_TEST_MYSQL_REPLICATED_FAILOVER"), [&] {
    auto tx = mysql_primary_connection(url);
    const auto fence = locks.lock_in(*tx, "in-transaction");
    tx->commit();
    return fence;
  });
}
#endif

// An asynchronous standby (postgresql-async): a commit does not wait for it, so a failover can
// lose the last grants. In the rounds, each lease was granted long before the failover and
// has streamed by then, so it is kept as on a synchronous standby. Then the loss is made
// certain: the standby stops receiving WAL (DBLOCK_TEST_PG_ASYNC_DETACH), forty fences are
// drawn (past the 32 the sequence logs ahead of its values), a lease is granted, and the
// primary fails over. The new primary lacks the grant and the sequence's last values: another client gets
// the lock at once while the first still runs under its lease (what asynchronous replication
// costs, and what dblock doctor warns of), and the holder learns it at its next renewal. The
// new grant's fence is still above the lost one: the fence carries the timeline, which the
// promotion raised (<table>_fence_next), while its sequence part went back.
TEST_CASE("postgresql primary and asynchronous standby: a failover loses the grants it did not stream, and "
          "fences keep increasing",
          "[postgresql-async][failover]") {
  const auto url = dblock::test::server_url("DBLOCK_TEST_PG_ASYNC_URL");
  const char* failover = failover_command("DBLOCK_TEST_PG_ASYNC_FAILOVER");
  const char* detach = failover_command("DBLOCK_TEST_PG_ASYNC_DETACH");
  dblock::ClientOptions co;
  co.auto_migrate = true;
  auto checks = reconnecting([&] { return dblock::Client::open(url, co); })->check_settings();
  auto standbys = std::find_if(checks.begin(), checks.end(), [](const auto& c) { return c.setting == "standbys"; });
  REQUIRE(standbys != checks.end());
  CHECK(standbys->value == "1 streaming, synchronous_standby_names = ''");
  CHECK(standbys->verdict == dblock::Verdict::weakens_exclusion);
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::insert;
  o.ttl = 20s;
  hold_across_failovers(url, failover, o, 3);

  std::atomic<int> lost{0};
  o.on_lost = [&lost](const std::string&, std::uint64_t) { ++lost; };
  o.ttl = 30s;  // far longer than the failover: the other client's grant is not a takeover
  o.renew_every = 1s;
  auto a = reconnecting([&] { return dblock::Client::open(url); });
  auto b = reconnecting([&] { return dblock::Client::open(url); });
  REQUIRE(std::system(detach) == 0);
  for (int i = 0; i < 40; ++i) a->lock("async-draws", o).acquire().release();
  auto held = a->lock("async-tail", o).acquire();
  REQUIRE(std::system(failover) == 0);
  auto next = reconnecting([&] { return b->lock("async-tail", o).try_acquire(); });
  REQUIRE(next);  // the grant was lost with the WAL the standby never had
  constexpr std::uint64_t sequence_part = (std::uint64_t{1} << 40) - 1;
  std::printf("async failover: lost grant's fence %llu (sequence part %llu), the next grant's %llu (%llu)\n",
              static_cast<unsigned long long>(held.fence()), static_cast<unsigned long long>(held.fence() & sequence_part),
              static_cast<unsigned long long>(next->fence()),
              static_cast<unsigned long long>(next->fence() & sequence_part));
  CHECK((next->fence() & sequence_part) < (held.fence() & sequence_part));  // the sequence went back...
  CHECK(next->fence() > held.fence());                                      // ...the timeline did not
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!held.lost() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(50ms);
  CHECK(held.lost());
  CHECK(lost == 1);
  next->release();
}

#ifdef DBLOCK_TEST_REDIS
// Redis with Sentinel: replication is asynchronous, so a promoted replica may lack the last
// grants and renewals (the lock free while its holder runs on) and the fence counter's last
// writes; the fence's clock floor (the server's TIME, here the same machine's clock) keeps
// fences increasing anyway. Without WAIT a held lock may therefore be lost: counted and
// printed, not failed (the grant here is minutes old in Redis terms by the time of the kill,
// so a loss is rare in this shape; the torture run grants during the kill). With replicas=1 a
// grant and each renewal are answered only once the replica has them, and the replica is the
// one promoted: the lock must stay held. Fences must increase either way.
TEST_CASE("redis primary, replica and three sentinels: fences keep increasing across failovers; with "
          "replicas=1 a held lease outlives them",
          "[redis][failover]") {
  const auto url = dblock::test::server_url("DBLOCK_TEST_REDIS_SENTINEL_URL");
  const char* failover = failover_command("DBLOCK_TEST_REDIS_SENTINEL_FAILOVER");
  // A database of its own (the topology has 4096), so that no earlier run's keys are met.
  const auto db = "db=" + std::to_string(1 + std::random_device{}() % 4095);
  for (const std::string query : {"?" + db, "?" + db + "&replicas=1"}) {
    INFO(query);
    dblock::LockOptions o;
    o.strategy = dblock::Strategy::redis;
    // Renewals fail from the kill until a master answers (and, with replicas=1, until the
    // restarted node has resynced and acknowledges): 3-5 s on a quiet machine, 10-30 s while
    // the rest of the suite runs beside it. The lease that must outlive it gets 30 s.
    const bool waits = query.find("replicas=") != std::string::npos;
    o.ttl = waits ? 30s : 10s;
    auto t = hold_across_failovers(url + query, failover, o, 3, waits, true);
    std::printf("redis-sentinel %s: %d failovers, held lock lost in %d, taken by another while held in %d\n",
                waits ? "replicas=1" : "without WAIT", t.rounds, t.lost, t.taken);
  }
}

// The loss made to happen: the master's link to its replica is cut (CLIENT KILL TYPE replica;
// the replica reconnects within its replication cron's second), a lock is granted, and the
// master is SIGKILLed at once (its pid from INFO: the topology runs on this machine), before the
// replica can have the grant; then the Sentinels promote the replica. Without WAIT the grant is
// gone: another client gets the lock while its holder still believes it holds it (printed: the
// replica could in principle reconnect within the microseconds between grant and kill). With
// replicas=1 the grant is answered only once the replica reconnected and acknowledged it, and
// the lock must survive. The next fence must be above the lost one: the new master's counter
// lacks the grant's INCR, and the clock floor (the same machine's clock) carries the fences.
TEST_CASE("redis sentinel: a grant the replica never got is lost without WAIT, kept with replicas=1; fences "
          "keep increasing",
          "[redis][failover]") {
  const auto base = dblock::test::server_url("DBLOCK_TEST_REDIS_SENTINEL_URL");
  const char* failover = failover_command("DBLOCK_TEST_REDIS_SENTINEL_FAILOVER");
  const auto db = "db=" + std::to_string(1 + std::random_device{}() % 4095);
  for (const std::string query : {"?" + db, "?" + db + "&replicas=1"}) {
    INFO(query);
    const bool waits = query.find("replicas=") != std::string::npos;
    const auto url = base + query;
    auto a = reconnecting([&] { return dblock::Client::open(url); });
    auto b = reconnecting([&] { return dblock::Client::open(url); });
    dblock::LockOptions o;
    o.strategy = dblock::Strategy::redis;
    o.ttl = 10s;
    const auto master = dblock::test::sentinel_master(dblock::detail::parse_url(url));
    const auto info = dblock::test::redis_raw(master, {"INFO", "server"});
    const auto at = info.find("process_id:");
    REQUIRE(at != std::string::npos);
    const pid_t pid = std::stoi(info.substr(at + 11));
    REQUIRE(dblock::test::redis_raw(master, {"CLIENT", "KILL", "TYPE", "replica"}) == "1");
    auto held = a->lock("unreplicated", o).acquire();
    REQUIRE(::kill(pid, SIGKILL) == 0);
    REQUIRE(std::system(failover) == 0);
    auto thief = reconnecting([&] { return b->lock("unreplicated", o).try_acquire(); });
    std::printf("redis-sentinel %s: a grant made while the replica was cut off, then the master killed: %s\n",
                waits ? "replicas=1" : "without WAIT",
                thief ? "lost (another client got the lock)" : "kept");
    if (waits) {
      CHECK_FALSE(thief);
      CHECK_FALSE(held.lost());
      CHECK_NOTHROW(reconnecting([&] {
        held.release();
        return 0;
      }));
      thief = reconnecting([&] { return b->lock("unreplicated", o).try_acquire(10s); });
      REQUIRE(thief);
    }
    if (thief) {
      CHECK(thief->fence() > held.fence());
      std::printf("  the holder's fence %llu, the next holder's %llu\n",
                  static_cast<unsigned long long>(held.fence()), static_cast<unsigned long long>(thief->fence()));
      thief->release();
    }
  }
}

// SENTINEL FAILOVER promotes the replica while the old master keeps running: it still says it
// is the master, and takes writes from the connections it has, until the Sentinels make it a
// replica seconds later. A holder that kept renewing there would lose its key on the new master
// at its TTL while it believes it holds the lock. Its connections ask a Sentinel again at most a
// second apart (Connection::still_connected), so its renewals move to the new master in time:
// the new master's key lives a TTL from the last renewal it got (up to a renewal interval before
// the promotion), and the holder's first renewal there comes after the Sentinels' switch (their
// INFO polls are a second apart during a failover) and up to another interval. With a TTL of 3 s
// (1 s renewals) that is the whole TTL at worst, and a run under ASan lost the lease so; 9 s
// leaves 2 s (docs/ARCHITECTURE.md, "Redis Sentinel").
TEST_CASE("redis sentinel: after a forced failover that leaves the old master running, a held lease "
          "outlives its TTL on the new master",
          "[redis][failover]") {
  const auto url = dblock::test::server_url("DBLOCK_TEST_REDIS_SENTINEL_URL") + "?db=" +
                   std::to_string(1 + std::random_device{}() % 4095);
  const auto parsed = dblock::detail::parse_url(url);
  auto a = reconnecting([&] { return dblock::Client::open(url); });
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::redis;
  o.ttl = 9s;
  auto held = a->lock("forced", o).acquire();
  const auto old_master = dblock::test::sentinel_master(parsed);
  auto moved = [&] {
    auto m = dblock::test::sentinel_master(parsed);
    return m.host != old_master.host || m.port != old_master.port;
  };
  // A forced failover is refused (NOGOODSLAVE) while the Sentinels see no replica fit to
  // promote yet, as right after the failovers of the tests before (a replica that rejoined
  // seconds ago), and aborted when the leader does not see the promotion within the
  // failover-timeout (it polls INFO a second apart, later on a loaded machine): ask again, for
  // up to a minute, each time once the replica streams from the master (state=online in the
  // master's INFO). A replica that an aborted failover had told SLAVEOF NO ONE is a master of
  // its own, which gets none of the holder's renewals, until a Sentinel makes it a replica
  // again, within a second or 20 s later (each waits 8 s from the role change it saw, and polls
  // a replica's INFO 10 s apart when no failover runs). Asked again meanwhile, they promote it
  // with its copy of the lease expired, and the holder's next renewal finds the key gone: how a
  // run under TSan lost its lease. No client keeps a lease across that without WAIT (with
  // replicas=1 its renewals go unacknowledged while the replica is away, and it is told of the
  // loss); this case is about a failover to a replica that has it.
  auto streams = [&] {
    return dblock::test::redis_raw(old_master, {"INFO", "replication"}).find(",state=online,") != std::string::npos;
  };
  std::string answer;
  for (int ask = 0; ask < 6 && !moved(); ++ask) {
    for (int i = 0; i < 300 && !streams(); ++i) std::this_thread::sleep_for(100ms);
    REQUIRE(streams());
    if (ask > 0) std::printf("forced failover: SENTINEL FAILOVER answered %s, the master did not move\n", answer.c_str());
    answer = dblock::test::redis_raw(parsed.hosts[0], {"SENTINEL", "FAILOVER", parsed.path});
    for (int i = 0; i < 100 && !moved(); ++i) std::this_thread::sleep_for(100ms);
  }
  INFO("the last SENTINEL FAILOVER answered: " << answer);
  REQUIRE(moved());
  std::this_thread::sleep_for(2 * o.ttl);  // past the TTL the new master had from the last renewal it saw
  // Opened now, so on the new master (a client opened before could still be on the old one).
  auto b = reconnecting([&] { return dblock::Client::open(url); });
  CHECK_FALSE(held.lost());
  CHECK_FALSE(reconnecting([&] { return b->lock("forced", o).try_acquire(); }));
  const auto fence = held.fence();
  CHECK_NOTHROW(reconnecting([&] {
    held.release();
    return 0;
  }));
  auto next = reconnecting([&] { return b->lock("forced", o).try_acquire(10s); });
  REQUIRE(next);
  CHECK(next->fence() > fence);
  next->release();
  // The old master made a replica again, for the next test's failover.
  auto demoted = [&] {
    return dblock::test::redis_raw(old_master, {"INFO", "replication"}).find("role:slave") != std::string::npos;
  };
  for (int i = 0; i < 300 && !demoted(); ++i) std::this_thread::sleep_for(100ms);
  CHECK(demoted());
}
#endif  // DBLOCK_TEST_REDIS
