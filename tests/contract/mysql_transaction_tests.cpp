// Locks in the caller's own transaction and fences checked there (dblock/mysql.hpp), against
// the test server, on the caller's own Connector/C++ connections.
#include <catch2/catch.hpp>
#include <cppconn/connection.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include <atomic>
#include <thread>

#include "core/url.hpp"
#include "dblock/dblock.hpp"
#include "dblock/mysql.hpp"
#include "support/servers.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using dblock::Strategy;
using dblock::mysql::LockTable;
using dblock::test::ScratchTable;
using Clock = std::chrono::steady_clock;

namespace {

dblock::LockOptions with(Strategy s, std::chrono::milliseconds ttl = 30s) {
  dblock::LockOptions o;
  o.strategy = s;
  o.ttl = ttl;
  return o;
}

// A service's own connection, as it would open it: autocommit off, so that a transaction is
// always open (REPEATABLE READ, the server's default).
std::unique_ptr<sql::Connection> service_connection(const ScratchTable& table, bool autocommit = false) {
  auto u = dblock::detail::parse_url(table.url());
  auto port = u.hosts.at(0).port ? u.hosts.at(0).port : 3306;
  std::unique_ptr<sql::Connection> c(sql::mysql::get_mysql_driver_instance()->connect(
      "tcp://" + u.hosts.at(0).host + ":" + std::to_string(port), u.user, u.password));
  c->setSchema(u.path);
  c->setAutoCommit(autocommit);
  return c;
}

std::int64_t query_int(sql::Connection& c, const std::string& sql) {
  std::unique_ptr<sql::Statement> s(c.createStatement());
  std::unique_ptr<sql::ResultSet> r(s->executeQuery(sql));
  REQUIRE(r->next());
  return r->getInt64(1);
}

void exec(sql::Connection& c, const std::string& sql) {
  std::unique_ptr<sql::Statement> s(c.createStatement());
  s->execute(sql);
}

}  // namespace

TEST_CASE("mysql: lock_in holds until commit or rollback, and keeps out every strategy but advisory", "[mysql]") {
  ScratchTable table(ScratchTable::Server::mysql);
  auto c = table.ns().open();
  LockTable locks(c);
  auto a = service_connection(table), b = service_connection(table);
  auto first = locks.lock_in(*a, "job");
  CHECK(first > 0);
  CHECK_FALSE(locks.try_lock_in(*b, "job"));
  CHECK_FALSE(locks.try_lock_in(*b, "job", 100ms));
  CHECK(locks.try_lock_in(*b, "another"));
  CHECK(query_int(*b, "SELECT 1") == 1);  // busy attempts left it usable
  b->rollback();
  // Its fence, drawn in a's open transaction (MariaDB's sequence), holds nothing of the
  // table's: every strategy grants another name at once, above it.
  for (auto s : c->strategies()) {
    INFO(dblock::to_string(s));
    auto t0 = Clock::now();
    auto other = c->lock("other", with(s)).try_acquire();
    REQUIRE(other);
    CHECK(other->fence() > first);
    CHECK(Clock::now() - t0 < 1s);
    other->release();
  }
  // A lease acquire waits for the row like for another grant, up to its own wait (a try: a
  // second, InnoDB's least), and is then busy.
  for (auto s : c->strategies()) {
    if (s == Strategy::advisory) continue;  // GET_LOCK does not see a row lock (dblock/mysql.hpp)
    INFO(dblock::to_string(s));
    auto t0 = Clock::now();
    CHECK_FALSE(c->lock("job", with(s)).try_acquire());
    CHECK(Clock::now() - t0 < 2s);
  }
  a->commit();
  auto lease = c->lock("job").try_acquire();  // freed by the commit
  REQUIRE(lease);
  CHECK(lease->fence() > first);  // one counter for every grant on the table

  // Busy behind a lease at once, even with time to wait (the transaction's snapshot would
  // not see it go), and the attempt locked nothing: the holder's release does not wait for
  // the open transaction.
  auto t0 = Clock::now();
  CHECK_FALSE(locks.try_lock_in(*a, "job", 2s));
  CHECK(Clock::now() - t0 < 1s);
  CHECK_THROWS_AS(locks.lock_in(*a, "job"), dblock::BusyError);  // busy, not a timeout
  t0 = Clock::now();
  lease->release();
  CHECK(Clock::now() - t0 < 1s);
  a->rollback();
  auto fence = locks.try_lock_in(*a, "job");
  REQUIRE(fence);
  CHECK(*fence > lease->fence());
  a->rollback();
  CHECK(locks.try_lock_in(*b, "job"));  // freed by the rollback
  b->rollback();

  for (auto s : {Strategy::for_update, Strategy::advisory}) {
    INFO(dblock::to_string(s));
    auto held = c->lock("job", with(s)).acquire();
    CHECK_FALSE(locks.try_lock_in(*a, "job", 50ms));
    std::thread later([&] {
      std::this_thread::sleep_for(200ms);
      held.release();
    });
    auto after = locks.try_lock_in(*a, "job", 5s);
    later.join();
    REQUIRE(after);
    CHECK(*after > held.fence());
    a->rollback();
  }
}

TEST_CASE("mysql: a transaction's lock goes with its connection", "[mysql]") {
  ScratchTable table(ScratchTable::Server::mysql);
  auto c = table.ns().open();
  LockTable locks(c);
  auto holder = service_connection(table), waiter = service_connection(table), admin = service_connection(table, true);
  locks.lock_in(*holder, "job");
  auto id = query_int(*holder, "SELECT CONNECTION_ID()");
  std::thread kill([&] {
    std::this_thread::sleep_for(200ms);
    exec(*admin, "KILL " + std::to_string(id));
  });
  auto t0 = Clock::now();
  CHECK(locks.try_lock_in(*waiter, "job", 10s));
  CHECK(Clock::now() - t0 < 5s);  // at once, not after a TTL
  kill.join();
  waiter->rollback();
}

TEST_CASE("mysql: a lease granted after the transaction's snapshot makes lock_in ask for a rollback", "[mysql]") {
  ScratchTable table(ScratchTable::Server::mysql);
  auto c = table.ns().open();
  LockTable locks(c);
  auto a = service_connection(table);
  // With no row for the name when the snapshot is taken (a lease's release deletes it), and
  // with one (for-update's stays).
  for (auto row : {false, true}) {
    INFO((row ? "a row" : "no row"));
    if (row) c->lock("job", with(Strategy::for_update)).acquire().release();
    // REPEATABLE READ: the first read takes the snapshot, before the lease below.
    CHECK(query_int(*a, "SELECT COUNT(*) FROM " + table.name()) == (row ? 1 : 0));
    auto lease = c->lock("job").acquire();
    CHECK_THROWS_AS(locks.try_lock_in(*a, "job"), dblock::BusyError);
    a->rollback();  // which frees the row: the holder can release
    auto t0 = Clock::now();
    lease.release();
    CHECK(Clock::now() - t0 < 1s);
    CHECK(locks.try_lock_in(*a, "job"));  // a new snapshot sees it free
    a->rollback();
  }
}

TEST_CASE("mysql: check_in refuses a stale fence and holds off a takeover until commit", "[mysql]") {
  ScratchTable table(ScratchTable::Server::mysql);
  LockTable locks(table.name());  // check_in needs no client
  auto conn = service_connection(table);
  const std::string data = table.data_table();
  exec(*conn, "CREATE TABLE " + data + " (id INT PRIMARY KEY, fence BIGINT) ENGINE=InnoDB");
  exec(*conn, "INSERT INTO " + data + " VALUES (1, 0)");
  conn->commit();
  auto write = [&](std::uint64_t fence) {
    exec(*conn, "UPDATE " + data + " SET fence = " + std::to_string(fence) + " WHERE id = 1");
  };
  auto a = table.ns().open(), b = table.ns().open();
  for (auto s : {Strategy::insert, Strategy::optimistic}) {
    INFO(dblock::to_string(s));
    // A holder paused past its TTL (no renewal) whose lock was taken: its write is refused.
    auto o = with(s, 1000ms);  // MySQL's lock waits count in whole seconds: a TTL the test can outwait
    o.auto_renew = false;
    auto old = a->lock("job", o).acquire();
    std::this_thread::sleep_for(1100ms);
    auto next = b->lock("job", with(s)).try_acquire(2s);
    REQUIRE(next);
    CHECK_THROWS_AS(locks.check_in(*conn, "job", old.fence()), dblock::LockLostError);
    conn->rollback();
    locks.check_in(*conn, *next);
    write(next->fence());
    conn->commit();
    CHECK(query_int(*conn, "SELECT fence FROM " + data) == static_cast<std::int64_t>(next->fence()));
    conn->commit();
    next->release();

    // Checked in time, the lease stays the holder's until the transaction commits, even
    // once it has expired: the takeover waits.
    auto lease = a->lock("job", o).acquire();
    locks.check_in(*conn, lease);
    std::this_thread::sleep_for(1100ms);  // expired now
    std::atomic<bool> taken{false};
    std::thread thief([&] { taken = b->lock("job", with(s)).try_acquire(4s).has_value(); });
    std::this_thread::sleep_for(500ms);
    CHECK_FALSE(taken);
    write(lease.fence());
    conn->commit();
    thief.join();
    CHECK(taken);
    b->force_release("job");
  }
}

// A takeover that meets the row of a lease checked in by an open transaction waits for it
// no longer than its own deadline (in InnoDB's whole seconds), and is then busy, as behind
// any holder: not a timeout.
TEST_CASE("mysql: a takeover behind a checked-in row is busy by its own deadline", "[mysql]") {
  ScratchTable table(ScratchTable::Server::mysql);
  LockTable locks(table.name());
  auto conn = service_connection(table);
  auto a = table.ns().open(), b = table.ns().open();
  for (auto s : {Strategy::insert, Strategy::optimistic}) {
    INFO(dblock::to_string(s));
    auto o = with(s, 1000ms);
    o.auto_renew = false;
    auto lease = a->lock("job", o).acquire();
    locks.check_in(*conn, lease);
    std::this_thread::sleep_for(1100ms);  // expired now, its row share-locked by conn's transaction
    auto t0 = Clock::now();
    CHECK_FALSE(b->lock("job", with(s)).try_acquire(1s));
    const auto waited = Clock::now() - t0;
    CHECK(waited >= 900ms);
    CHECK(waited < 2s);
    conn->commit();
    CHECK(b->lock("job", with(s)).try_acquire(2s));
    b->force_release("job");
  }
}

// MariaDB draws lock_in's fence from the table's sequence inside the caller's transaction: a
// LockTable made from the table's name alone needs no Client (MySQL 8's counter would).
TEST_CASE("mysql: a LockTable of the table's name alone locks in the transaction, with a fence", "[mysql]") {
  ScratchTable table(ScratchTable::Server::mysql);
  auto c = table.ns().open();
  auto before = c->lock("job").acquire();
  const auto before_fence = before.fence();
  before.release();
  LockTable locks(table.name());
  auto a = service_connection(table), b = service_connection(table);
  auto fence = locks.try_lock_in(*a, "job");
  REQUIRE(fence);
  CHECK(*fence > before_fence);
  CHECK_FALSE(locks.try_lock_in(*b, "job"));
  CHECK_FALSE(c->lock("job").try_acquire());
  a->commit();
  b->rollback();
  auto after = c->lock("job").acquire();
  CHECK(after.fence() > *fence);
}

TEST_CASE("mysql: in-transaction locks refuse bad input and write nothing", "[mysql]") {
  ScratchTable table(ScratchTable::Server::mysql);
  auto c = table.ns().open();
  LockTable locks(c);
  CHECK_THROWS_AS(LockTable("bad-table"), dblock::UsageError);
  CHECK_THROWS_AS(LockTable(std::shared_ptr<dblock::Client>()), dblock::UsageError);
  dblock::test::TempDir dir;
  auto sqlite = dblock::Client::open("sqlite:" + dir.path() + "/l.db");
  CHECK_THROWS_AS(LockTable(sqlite), dblock::UsageError);  // a client on another database
  auto conn = service_connection(table);
  CHECK_THROWS_AS(locks.try_lock_in(*conn, std::string(256, 'x')), dblock::UsageError);
  CHECK_THROWS_AS(locks.try_lock_in(*conn, ""), dblock::UsageError);
  CHECK_THROWS_AS(locks.check_in(*conn, "job", 0), dblock::UsageError);
  conn->rollback();
  auto autocommit = service_connection(table, true);  // no transaction: the lock would end with its statement
  CHECK_THROWS_AS(locks.try_lock_in(*autocommit, "job"), dblock::UsageError);
  CHECK_THROWS_AS(locks.check_in(*autocommit, "job", 1), dblock::UsageError);
  // A table without the migration.
  CHECK_THROWS_AS(LockTable("dblock_never_migrated").check_in(*conn, "job", 1), dblock::SchemaError);
  conn->rollback();
  CHECK(c->list().empty());
  CHECK(query_int(*conn, "SELECT COUNT(*) FROM " + table.name()) == 0);
}
