// A database server restarted while locks are held, for every server dblock supports:
// lease strategies keep the lock (the row is durable) and renew after reconnecting; session
// strategies report the loss. Each server's restart command comes from the environment
// (DBLOCK_TEST_PG_RESTART, DBLOCK_TEST_MYSQL_RESTART, DBLOCK_TEST_ZK_RESTART,
// DBLOCK_TEST_ETCD_RESTART: scripts/test sets them through scripts/services).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>
#include <thread>

#include "support/eventually.hpp"
#include "support/servers.hpp"

using namespace std::chrono_literals;

namespace {

using Server = dblock::test::ScratchTable::Server;

// The servers under test: the table's server (which also picks its URL variable,
// DBLOCK_TEST_PG_URL or DBLOCK_TEST_MYSQL_URL) and the variable with its restart command.
struct ServerUnderTest {
  Server server;
  const char* restart_var;
};
[[maybe_unused]] constexpr ServerUnderTest postgresql{Server::postgresql, "DBLOCK_TEST_PG_RESTART"};
[[maybe_unused]] constexpr ServerUnderTest mysql{Server::mysql, "DBLOCK_TEST_MYSQL_RESTART"};
// ZooKeeper has no table: its ScratchTable server is not used, only its restart command.
[[maybe_unused]] constexpr ServerUnderTest zookeeper{Server::postgresql, "DBLOCK_TEST_ZK_RESTART"};
// Nor has etcd.
[[maybe_unused]] constexpr ServerUnderTest etcd{Server::postgresql, "DBLOCK_TEST_ETCD_RESTART"};

void restart_server(const ServerUnderTest& s) {
  const char* cmd = std::getenv(s.restart_var);
  if (!cmd || !*cmd) FAIL(s.restart_var << " is not set: scripts/test sets it to restart the test server");
  REQUIRE(std::system(cmd) == 0);
}

// The server's restart command with `restart` replaced by `stop` or `start` (scripts/services
// takes all three).
void server_command(const ServerUnderTest& s, const std::string& action) {
  const char* cmd = std::getenv(s.restart_var);
  if (!cmd || !*cmd) FAIL(s.restart_var << " is not set: scripts/test sets it to restart the test server");
  std::string text = cmd;
  auto at = text.rfind(" restart ");
  REQUIRE(at != std::string::npos);
  text.replace(at, 9, " " + action + " ");
  REQUIRE(std::system(text.c_str()) == 0);
}

dblock::LockOptions options(dblock::Strategy s, std::chrono::milliseconds ttl, std::atomic<int>* lost) {
  dblock::LockOptions o;
  o.strategy = s;
  o.ttl = ttl;
  o.renew_every = 300ms;
  o.on_lost = [lost](const std::string&, std::uint64_t) { ++*lost; };
  return o;
}

// Long enough that a restart on a loaded CI machine fits in it (MariaDB once took 21.8 s to
// stop and start under the sanitizer suite): the test is about the renewal after the restart,
// not about the TTL, and waits for that renewal, never for the TTL.
constexpr auto restart_ttl = std::chrono::seconds(60);

void leases_survive_session_locks_are_lost(const ServerUnderTest& server) {
  dblock::test::ScratchTable table(server.server);
  auto c = table.ns().open();
  std::atomic<int> insert_lost{0}, optimistic_lost{0}, for_update_lost{0}, advisory_lost{0};
  auto insert = c->lock("insert", options(dblock::Strategy::insert, restart_ttl, &insert_lost)).acquire();
  auto optimistic = c->lock("optimistic", options(dblock::Strategy::optimistic, restart_ttl, &optimistic_lost)).acquire();
  auto for_update = c->lock("for-update", options(dblock::Strategy::for_update, restart_ttl, &for_update_lost)).acquire();
  auto advisory = c->lock("advisory", options(dblock::Strategy::advisory, restart_ttl, &advisory_lost)).acquire();

  restart_server(server);
  auto restarted = std::chrono::steady_clock::now();
  auto until = restarted + 10s;  // session losses show within a few pings
  while ((for_update_lost == 0 || advisory_lost == 0) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  auto noticed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - restarted);
  INFO("session losses noticed " << noticed.count() << " ms after the restart command returned");
  CHECK(for_update_lost == 1);
  CHECK(advisory_lost == 1);
  CHECK(for_update.lost());
  CHECK(advisory.lost());

  // remaining() counts from when the last successful renewal was sent: wait for one sent
  // after the server was back to succeed (the TTL alone would keep the leases this long).
  // Renewals come every 300 ms; reconnecting can take seconds under the sanitizers.
  auto back = std::chrono::steady_clock::now();
  auto renewed_since_back = [&](const dblock::Lease& l) {
    return l.remaining() > restart_ttl - (std::chrono::steady_clock::now() - back);
  };
  bool renewed = dblock::test::eventually([&] { return renewed_since_back(insert) && renewed_since_back(optimistic); });
  if (!renewed) {
    // Seen once in CI and once in ~60 local runs (issue 3 note): tell a stall from a
    // renewal that never comes back, for whoever reads the failure.
    bool later = dblock::test::eventually(
        [&] { return renewed_since_back(insert) && renewed_since_back(optimistic); }, 20s);
    auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
    INFO("renewed " << (later ? "at last" : "still not") << " " << ms(std::chrono::steady_clock::now() - back)
                    << " ms after the server was back; insert remaining " << ms(insert.remaining()) << " ms (lost "
                    << insert.lost() << "), optimistic remaining " << ms(optimistic.remaining()) << " ms (lost "
                    << optimistic.lost() << ")");
    CHECK(renewed);
  }
  CHECK(insert_lost == 0);
  CHECK(optimistic_lost == 0);
  CHECK_FALSE(insert.lost());
  CHECK_FALSE(optimistic.lost());
  auto other = table.ns().open();
  CHECK_FALSE(other->lock("insert").try_acquire());  // still held, by the row
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::optimistic;
  CHECK_FALSE(other->lock("optimistic", o).try_acquire());
  o.strategy = dblock::Strategy::for_update;
  auto taken = other->lock("for-update", o).try_acquire(5s);  // freed by the server
  REQUIRE(taken);
  CHECK(taken->fence() > for_update.fence());
  o.strategy = dblock::Strategy::advisory;
  auto taken_advisory = other->lock("advisory", o).try_acquire(5s);
  REQUIRE(taken_advisory);
  CHECK(taken_advisory->fence() > advisory.fence());
  CHECK_THROWS_AS(for_update.release(), dblock::LockLostError);
  CHECK_THROWS_AS(advisory.release(), dblock::LockLostError);
  insert.release();
  optimistic.release();
  taken->release();
  taken_advisory->release();
}

// Stops the server, releases `lease` while it is down (it is started again 1 s later) and
// returns how long the release took; the failure messages say when the server was back.
std::chrono::steady_clock::duration release_while_down(const ServerUnderTest& server, dblock::Lease& lease) {
  server_command(server, "stop");
  auto t0 = std::chrono::steady_clock::now();
  std::atomic<long long> back_ms{-1};
  std::thread starter([&] {
    std::this_thread::sleep_for(1s);
    server_command(server, "start");
    back_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  });
  CHECK_NOTHROW(lease.release());
  auto took = std::chrono::steady_clock::now() - t0;
  starter.join();
  UNSCOPED_INFO("the server was back " << back_ms << " ms after the stop");
  return took;
}

// A lease released while its server is down: the release is retried until the server is back,
// instead of leaving the lock taken until its TTL (what `dblock run` did after a restart).
void release_waits_out_a_restart(const ServerUnderTest& server) {
  dblock::test::ScratchTable table(server.server);
  auto ns = table.ns();
  ns.options.statement_timeout = restart_ttl;  // the release's retry budget: the restart must fit
  auto c = ns.open();
  std::atomic<int> lost{0};
  auto lease = c->lock("job", options(dblock::Strategy::insert, 2 * restart_ttl, &lost)).acquire();
  auto took = release_while_down(server, lease);
  CHECK(took >= 900ms);  // it did wait for the server
  CHECK(lost == 0);
  auto other = table.ns().open();
  CHECK(other->lock("job").try_acquire());  // freed now, not at the TTL
}

// The same for a ZooKeeper lock: its node lives as long as its session, which outlives a
// server restart shorter than the session timeout; a release during the restart waits for
// the session to reconnect and deletes the node, instead of leaving it to the session timeout.
void zookeeper_release_waits_out_a_restart() {
  std::random_device rd;
  auto url = dblock::test::server_url("DBLOCK_TEST_ZK_URL") + "/dblock-fault-" + std::to_string(rd());
  auto c = dblock::Client::open(url);
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::zookeeper;
  o.ttl = restart_ttl;  // the session timeout: the restart fits in it
  std::atomic<int> lost{0};
  o.on_lost = [&lost](const std::string&, std::uint64_t) { ++lost; };
  auto held = c->lock("job", o).acquire();
  auto took = release_while_down(zookeeper, held);
  INFO("release took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took >= 900ms);  // it did wait for the server
  CHECK(took < restart_ttl);  // not for the session timeout
  CHECK(lost == 0);
  o.on_lost = nullptr;
  auto other = dblock::Client::open(url);
  CHECK(other->lock("job", o).try_acquire());  // freed now, not when the session expires
}

// etcd under a held lock (docs/ARCHITECTURE.md, "etcd"): keys, leases and revisions are
// persisted, and a restarted member gives every lease its whole TTL again, so a restart
// shorter than the holder's local deadline keeps the lock, which renews once the server is
// back; a longer outage is reported as a loss at the local deadline (on_lost once), the
// server frees the lock after the lease's TTL, and the next holder's fence (a create
// revision) is higher. A fence never goes backwards across either.
[[maybe_unused]] std::string etcd_url() {
  std::random_device rd;
  return dblock::test::server_url("DBLOCK_TEST_ETCD_URL") + "-fault-" + std::to_string(rd());
}

[[maybe_unused]] dblock::LockOptions etcd_options(std::chrono::milliseconds ttl, std::atomic<int>* lost) {
  auto o = options(dblock::Strategy::etcd, ttl, lost);
  return o;
}

[[maybe_unused]] void etcd_lock_survives_a_restart() {
  auto url = etcd_url();
  auto c = dblock::Client::open(url);
  std::atomic<int> lost{0};
  auto held = c->lock("job", etcd_options(restart_ttl, &lost)).acquire();
  restart_server(etcd);
  // A renewal sent after the server was back succeeded (see leases_survive_session_locks_are_lost).
  auto back = std::chrono::steady_clock::now();
  auto renewed_since_back = [&] { return held.remaining() > restart_ttl - (std::chrono::steady_clock::now() - back); };
  bool renewed = dblock::test::eventually(renewed_since_back, 10s);
  INFO("held remaining " << std::chrono::duration_cast<std::chrono::milliseconds>(held.remaining()).count() << " ms");
  CHECK(renewed);
  CHECK(lost == 0);
  CHECK_FALSE(held.lost());
  auto other = dblock::Client::open(url);
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::etcd;
  CHECK_FALSE(other->lock("job", o).try_acquire());  // still held: its key outlived the restart
  const auto fence = held.fence();
  CHECK_NOTHROW(held.release());
  auto next = other->lock("job", o).try_acquire(5s);
  REQUIRE(next);
  CHECK(next->fence() > fence);
  next->release();
}

[[maybe_unused]] void etcd_release_waits_out_a_restart() {
  auto url = etcd_url();
  dblock::ClientOptions patient;
  patient.statement_timeout = restart_ttl;  // the release's retry budget: the restart must fit
  auto c = dblock::Client::open(url, patient);
  std::atomic<int> lost{0};
  auto held = c->lock("job", etcd_options(restart_ttl, &lost)).acquire();
  auto took = release_while_down(etcd, held);
  INFO("release took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  CHECK(took >= 900ms);  // it did wait for the server
  CHECK(took < restart_ttl);  // not for the lease's TTL
  CHECK(lost == 0);
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::etcd;
  auto other = dblock::Client::open(url);
  CHECK(other->lock("job", o).try_acquire());  // freed now, not when the lease expires
}

[[maybe_unused]] void etcd_outage_past_the_deadline_is_a_loss() {
  auto url = etcd_url();
  auto c = dblock::Client::open(url);
  std::atomic<int> lost{0};
  auto held = c->lock("job", etcd_options(1s, &lost)).acquire();  // a lease of 1 s
  std::this_thread::sleep_for(700ms);
  REQUIRE(lost == 0);  // renewals pass
  server_command(etcd, "stop");
  auto stopped = std::chrono::steady_clock::now();
  // Reported at the local deadline: the last renewal sent before the stop + the TTL.
  bool reported = dblock::test::eventually([&] { return lost > 0; }, 5s);
  auto after = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - stopped);
  INFO("on_lost " << after.count() << " ms after the stop");
  CHECK(reported);
  CHECK(after < 1s + 300ms + 500ms);  // the TTL, a renewal interval, slack
  CHECK(held.lost());
  std::this_thread::sleep_for(1s);  // down past the lease's TTL
  server_command(etcd, "start");
  // The restarted member gives the lease its TTL again, or the holder's lost hook revokes it:
  // either way the lock is free within seconds, with a higher fence.
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::etcd;
  auto other = dblock::Client::open(url);
  auto next = other->lock("job", o).try_acquire(10s);
  REQUIRE(next);
  CHECK(next->fence() > held.fence());
  CHECK_THROWS_AS(held.release(), dblock::LockLostError);
  CHECK(lost == 1);
  next->release();
}

// A crash (no clean shutdown: `scripts/services crash`) right after a grant, for every
// strategy: every fence drawn after the crash is above the one granted before it. The
// PostgreSQL sequence WAL-logs one record per 32 values, ahead of them, and that record is
// flushed only when the drawing transaction commits: the sequence is first brought to its
// last pre-logged value, so that the grant's own draw is the one that writes the record. A
// draw inside a transaction that stays open (for-update's held lock) was lost with the crash
// and the same fence was granted again (issue 3 note). MariaDB's sequence hands out blocks
// of 1000 reserved by a write of its row: the crash drops the block in use, and every draw
// after it (advisory's is taken from a block a grant just before it reserved) comes from
// above it.
void fences_survive_a_crash(const ServerUnderTest& server) {
  dblock::test::ScratchTable table(server.server);
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic, dblock::Strategy::for_update,
                        dblock::Strategy::advisory}) {
    const std::string name = "crash-" + std::string(dblock::to_string(strategy));
    INFO("strategy " << name);
    if (server.server == Server::postgresql) {
      auto raw = dblock::test::server_connection(table.url());
      const std::string seq = table.name() + "_fence";
      for (int i = 0; i < 40 && dblock::detail::sqldb::as_int(raw->run("SELECT log_cnt FROM " + seq).rows.at(0).at(0)) != 0;
           ++i)
        raw->run("SELECT nextval('" + seq + "')");
    }
    std::atomic<int> lost{0};
    auto c = table.ns().open();
    if (server.server == Server::mysql && strategy == dblock::Strategy::advisory)
      c->lock(name, options(strategy, 2s, &lost)).acquire().release();
    auto held = c->lock(name, options(strategy, 2s, &lost)).acquire();
    server_command(server, "crash");
    try {
      held.release();  // a lease: once the server is back; a session lock was lost with it
    } catch (const dblock::LockLostError&) {
    }
    dblock::LockOptions o;
    o.strategy = strategy;
    auto again = table.ns().open()->lock(name, o).try_acquire(30s);  // the restart after a crash, on a loaded machine
    REQUIRE(again);
    CHECK(again->fence() > held.fence());
    again->release();
  }
}

}  // namespace

#ifdef DBLOCK_TEST_ZOOKEEPER
TEST_CASE("zookeeper restart: a release while the server is down waits for it", "[zookeeper][restart]") {
  zookeeper_release_waits_out_a_restart();
}
#endif

#ifdef DBLOCK_TEST_ETCD
TEST_CASE("etcd restart: a held lock outlives a restart shorter than its TTL and renews", "[etcd][restart]") {
  etcd_lock_survives_a_restart();
}
TEST_CASE("etcd restart: a release while the server is down waits for it", "[etcd][restart]") {
  etcd_release_waits_out_a_restart();
}
TEST_CASE("etcd restart: an outage past the local deadline is reported lost, fences go on", "[etcd][restart]") {
  etcd_outage_past_the_deadline_is_a_loss();
}
#endif

#ifdef DBLOCK_TEST_POSTGRESQL
TEST_CASE("postgresql restart: leases survive and renew, session locks are reported lost", "[postgresql][restart]") {
  leases_survive_session_locks_are_lost(postgresql);
}
TEST_CASE("postgresql restart: a release while the server is down waits for it", "[postgresql][restart]") {
  release_waits_out_a_restart(postgresql);
}
TEST_CASE("postgresql crash: fences granted just before it stay below every later one", "[postgresql][restart]") {
  fences_survive_a_crash(postgresql);
}
#endif

#ifdef DBLOCK_TEST_MYSQL
TEST_CASE("mysql restart: leases survive and renew, session locks are reported lost", "[mysql][restart]") {
  leases_survive_session_locks_are_lost(mysql);
}
TEST_CASE("mysql restart: a release while the server is down waits for it", "[mysql][restart]") {
  release_waits_out_a_restart(mysql);
}
TEST_CASE("mysql crash: fences granted just before it stay below every later one", "[mysql][restart]") {
  fences_survive_a_crash(mysql);
}
#endif
