// What only the MySQL/MariaDB backend promises, and the text handling it relies on.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <random>
#include <thread>

#include "backends/mysql/mysql_dialect.hpp"
#include "backends/mysql/mysql_connection.hpp"
#include "backends/mysql/mysql_turn_keys.hpp"
#include "contract/share_lock_check.hpp"
#include "contract/client_rows_check.hpp"
#include "contract/dead_ticket_check.hpp"
#include "contract/handed_ticket_check.hpp"
#include "contract/connection_slot_check.hpp"
#include "contract/multiplexed_advisory_check.hpp"
#include "contract/least_privilege_check.hpp"
#include "contract/upgrade_check.hpp"
#include "core/url.hpp"
#include "core/validate.hpp"
#include "sql/dialect.hpp"
#include "sql/lease_drivers.hpp"
#include "sql/migration_files.hpp"
#include "support/eventually.hpp"
#include "support/servers.hpp"

using namespace std::chrono_literals;
using dblock::detail::sqldb::splice_params;
using dblock::detail::sqldb::split_statements;
using dblock::detail::sqldb::Value;
using dblock::detail::sqldb::Statement;

namespace {
int mysql_migrations() {
  const auto& all = dblock::detail::sqldb::embedded_migrations();
  return static_cast<int>(std::count_if(all.begin(), all.end(), [](const auto& m) { return m.dialect == "mysql"; }));
}
// V1's definition of <table>_<name>, from its CREATE PROCEDURE to its END//, for a test's
// own later migration to create again.
std::string v1_procedure(const std::string& name) {
  const auto& all = dblock::detail::sqldb::embedded_migrations();
  auto v1 = std::find_if(all.begin(), all.end(), [](const auto& m) { return m.dialect == "mysql"; });
  REQUIRE(v1 != all.end());
  auto from = v1->text.find("CREATE PROCEDURE ${table}_" + name + "(");
  REQUIRE(from != std::string::npos);
  auto to = v1->text.find("\nEND//\n", from);
  REQUIRE(to != std::string::npos);
  return v1->text.substr(from, to + 7 - from) + "\n";
}
}  // namespace

TEST_CASE("mysql: parameters are spliced as literals no byte of which is SQL", "[mysql]") {
  CHECK(splice_params("SELECT ?1, ?2", {std::int64_t{-42}, std::string("a'b\\;")}) == "SELECT -42, X'6127625C3B'");
  CHECK(splice_params("?2 ?1 ?2", {std::string(""), std::int64_t{7}}) == "7 X'' 7");
  std::vector<Value> ten(10, Value{std::int64_t{1}});
  ten[9] = std::int64_t{10};
  CHECK(splice_params("?10 + ?1", ten) == "10 + 1");
  CHECK(splice_params("SELECT '?' ? 1", {}) == "SELECT '?' ? 1");  // a ? without a number is text
  CHECK_THROWS_AS(splice_params("SELECT ?3", {std::int64_t{1}}), dblock::InternalError);
  CHECK_THROWS_AS(splice_params("SELECT ?0", {std::int64_t{1}}), dblock::InternalError);
}

TEST_CASE("mysql: scripts split at semicolons outside quotes and comments", "[mysql]") {
  auto s = split_statements(
      "-- a comment; not a statement\n"
      "CREATE TABLE t (a TEXT DEFAULT 'x;y'); # another; comment\n"
      "/* block; comment */ INSERT INTO t VALUES ('it''s; \\' fine');\n"
      "SELECT \"a;b\", `c;d`  ;  \n  ;\n"
      "SELECT 1");
  REQUIRE(s.size() == 4);
  CHECK(s[0] == "CREATE TABLE t (a TEXT DEFAULT 'x;y')");
  CHECK(s[1] == "INSERT INTO t VALUES ('it''s; \\' fine')");
  CHECK(s[2] == "SELECT \"a;b\", `c;d`");
  CHECK(s[3] == "SELECT 1");
  CHECK(split_statements("-- only a comment\n").empty());
}

TEST_CASE("mysql: DELIMITER lines keep a procedure body whole; a CALL answers two results", "[mysql]") {
  auto s = split_statements(
      "DROP PROCEDURE IF EXISTS p;\n"
      "DELIMITER //\n"
      "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT ';'; END//\n"
      "delimiter ;  \n"
      "SELECT 2; DELIMITERS are words too;\n"
      "DELIMITER $$\nSELECT 3$$");
  REQUIRE(s.size() == 5);
  CHECK(s[0] == "DROP PROCEDURE IF EXISTS p");
  CHECK(s[1] == "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT ';'; END");
  CHECK(s[2] == "SELECT 2");
  CHECK(s[3] == "DELIMITERS are words too");
  CHECK(s[4] == "SELECT 3");
  CHECK(dblock::detail::sqldb::results_of("START TRANSACTION; SELECT 1; COMMIT") == 3);
  CHECK(dblock::detail::sqldb::results_of("CALL t_acquire(?1, ?2, ?3)") == 2);
  CHECK(dblock::detail::sqldb::results_of("call t_take(1); SELECT 1") == 3);
  CHECK(dblock::detail::sqldb::results_of("CALLS") == 1);
}

TEST_CASE("mysql: the backend offers all four strategies, insert first", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto c = table.ns().open();
  CHECK(c->backend() == "mysql");
  CHECK(c->strategies() == std::vector<dblock::Strategy>{dblock::Strategy::insert, dblock::Strategy::optimistic,
                                                         dblock::Strategy::for_update, dblock::Strategy::advisory});
}

TEST_CASE("mysql: an InnoDB deadlock surfaces as a TimeoutError, and the session stays usable", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto s1 = dblock::test::server_connection(table.url());
  auto s2 = dblock::test::server_connection(table.url());
  const auto t = table.name();
  s1->run("INSERT INTO " + t + " (name, owner, fence, holds, acquired_at, valid_until, version) "
          "VALUES ('a', '', 0, 0, 0, 0, 0), ('b', '', 0, 0, 0, 0, 0)", {});
  s1->begin();
  s2->begin();
  s1->run("UPDATE " + t + " SET version = 1 WHERE name = 'a'", {});
  s2->run("UPDATE " + t + " SET version = 1 WHERE name = 'b'", {});
  std::atomic<int> timeouts{0};
  std::thread first([&] {
    try {
      s1->run("UPDATE " + t + " SET version = 2 WHERE name = 'b'", {});  // waits for s2
    } catch (const dblock::TimeoutError&) {
      ++timeouts;
    }
  });
  std::this_thread::sleep_for(200ms);
  try {
    s2->run("UPDATE " + t + " SET version = 2 WHERE name = 'a'", {});  // closes the cycle
  } catch (const dblock::TimeoutError&) {
    ++timeouts;
  }
  first.join();
  CHECK(timeouts == 1);  // InnoDB picks one victim; the other goes on
  s1->rollback();
  s2->rollback();
  CHECK(s1->usable());
  CHECK(s2->usable());
  CHECK(s1->run("SELECT 1", {}).rows.size() == 1);
}

TEST_CASE("mysql: names that differ only in case or trailing spaces are different locks", "[mysql]") {
  // GET_LOCK names are case-insensitive and utf8mb4 collations pad: dblock hashes the
  // first and stores names as bytes, so neither folds two names into one lock.
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::for_update, dblock::Strategy::advisory}) {
    auto a = table.ns().open(), b = table.ns().open(), c = table.ns().open();
    dblock::LockOptions o;
    o.strategy = strategy;
    auto first = a->lock("Job", o).try_acquire();
    auto second = b->lock("job", o).try_acquire();
    auto third = c->lock("job ", o).try_acquire();
    CHECK(first);
    CHECK(second);
    CHECK(third);
  }
}

TEST_CASE("mysql: advisory names past GET_LOCK's 64 characters stay distinct", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto a = table.ns().open(), b = table.ns().open();
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::advisory;
  const std::string prefix(100, 'n');
  auto x = a->lock(prefix + "x", o).try_acquire();
  auto y = b->lock(prefix + "y", o).try_acquire();  // same first 100 bytes, another lock
  REQUIRE(x);
  REQUIRE(y);
  CHECK_FALSE(b->lock(prefix + "x", o).try_acquire());
}

TEST_CASE("mysql: the sweep skips a row a for-update holder has locked instead of waiting for it", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto c = table.ns().open();
  dblock::LockOptions session;
  session.strategy = dblock::Strategy::for_update;
  auto held = c->lock("held", session).acquire();  // its row is free-looking but locked
  auto raw = dblock::test::server_connection(table.url());  // five leases long expired
  for (int i = 0; i < 5; ++i)
    raw->run("INSERT INTO " + table.name() + " (name, owner, fence, holds, acquired_at, valid_until, version) "
             "VALUES (?1, 'gone', 1, 1, 0, 1, 1)", {"brief" + std::to_string(i)});
  auto t0 = std::chrono::steady_clock::now();
  CHECK(c->sweep(2) == 5);                            // in batches of two, not held up by the locked row
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);  // no lock wait (it would last 5 s)
  auto other = table.ns().open();
  CHECK_FALSE(other->lock("held", session).try_acquire());  // the holder still holds it
  held.release();
  CHECK(c->sweep(10) == 1);  // now its row goes too
}

TEST_CASE("mysql: concurrent migrations apply the script once", "[mysql]") {
  auto url = dblock::test::server_url("DBLOCK_TEST_MYSQL_URL");
  dblock::ClientOptions o;
  o.table = "dblock_mig_" + std::to_string(std::random_device{}());
  std::atomic<int> applied{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] { applied += static_cast<int>(dblock::Client::open(url, o)->migrate().size()); });
  for (auto& t : ts) t.join();
  CHECK(applied == mysql_migrations());  // each once
  auto s = dblock::test::server_connection(url);
  CHECK(s->run("SELECT COUNT(*) FROM " + o.table + "_schema_history", {}).rows[0][0] == Value{std::int64_t{mysql_migrations()}});
  const auto& d = dblock::detail::sqldb::mysql_dialect();
  s->run_script(dblock::detail::sqldb::render(d[Statement::drop_schema], dblock::detail::parse_table_name(o.table), d.now_ms));
}

// A table migrated by an older dblock lacks what a later migration adds: a procedure
// (error 1305) or a column (1054). Here V1's lease grants, session fence draw and the
// waiters' mark stand for them. Every strategy that needs one asks for `dblock migrate`
// (exit 78 from the command) and writes nothing; the migration that adds them back (a test
// V2 made of V1's own definitions) then makes them work, keeping held locks held.
TEST_CASE("mysql: a table lacking a later migration asks for `dblock migrate`, which adds what it lacks", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto c = table.ns().open();
  dblock::LockOptions session;
  session.strategy = dblock::Strategy::advisory;
  auto held = c->lock("held", session).try_acquire();
  REQUIRE(held);
  auto raw = dblock::test::server_connection(table.url());
  const auto t = table.name();
  raw->run_script("DROP PROCEDURE " + t + "_lease_grant; DROP PROCEDURE " + t + "_lease_take; DROP PROCEDURE " + t +
                  "_fence_draw; ALTER TABLE " + t + " DROP COLUMN waited_until");
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic, dblock::Strategy::for_update,
                        dblock::Strategy::advisory}) {
    INFO(dblock::to_string(strategy));
    dblock::LockOptions o;
    o.strategy = strategy;
    try {
      (void)c->lock("job", o).try_acquire();
      FAIL("an acquire worked without what it needs");
    } catch (const dblock::SchemaError& e) {
      CHECK_THAT(e.what(), Catch::Contains("dblock migrate"));
    }
  }
  CHECK(c->list().empty());  // nothing is held but the advisory lock, which is no row
  const auto& d = dblock::detail::sqldb::mysql_dialect();
  const std::string later = "ALTER TABLE ${table} ADD COLUMN waited_until BIGINT NOT NULL DEFAULT 0;\nDELIMITER //\n" +
                            v1_procedure("lease_grant") + v1_procedure("lease_take") + v1_procedure("fence_draw") +
                            "DELIMITER ;\n";
  CHECK(dblock::test::migrate_with(*raw, d, t, later) == std::vector<std::string>{dblock::test::later_script});
  auto other = table.ns().open();
  CHECK_FALSE(other->lock("held", session).try_acquire());  // still held
  const auto fence = held->fence();
  held->release();
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic, dblock::Strategy::for_update,
                        dblock::Strategy::advisory}) {
    INFO(dblock::to_string(strategy));
    dblock::LockOptions o;
    o.strategy = strategy;
    auto lease = other->lock("held-" + std::string(dblock::to_string(strategy)), o).try_acquire();
    REQUIRE(lease);
    CHECK(lease->fence() > fence);
  }
}

TEST_CASE("mysql: a later migration upgrades a V1 table in place, keeping held locks", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto ns = table.ns();
  auto raw = dblock::test::server_connection(table.url());
  // A column added and a procedure the client calls replaced, as a real V2 would.
  dblock::test::check_later_migration(
      [&] { return ns.open(); }, *raw, dblock::detail::sqldb::mysql_dialect(), table.name(),
      "ALTER TABLE ${table} ADD COLUMN note VARBINARY(64) NOT NULL DEFAULT '';\nDELIMITER //\n"
      "DROP PROCEDURE ${table}_lease_release//\n" + v1_procedure("lease_release") + "DELIMITER ;\n");
}

// What the migrations make, drop_schema removes (the bench and the tests drop their tables
// with it; a procedure left behind made the next migration of the same name fail).
TEST_CASE("mysql: drop_schema removes every object the migrations made", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto raw = dblock::test::server_connection(table.url());
  const auto t = table.name();
  auto objects = [&] {
    return raw->run("SELECT (SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() "
                    "AND ROUTINE_NAME LIKE ?1) + (SELECT COUNT(*) FROM information_schema.TABLES "
                    "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE ?1)",
                    {t + "%"})
        .rows.at(0)
        .at(0);
  };
  CHECK(std::get<std::int64_t>(objects()) > 0);
  const auto& d = dblock::detail::sqldb::mysql_dialect();
  raw->run_script(dblock::detail::sqldb::render(d[Statement::drop_schema], dblock::detail::parse_table_name(t), d.now_ms));
  CHECK(std::get<std::int64_t>(objects()) == 0);
}

namespace {
// Above every fence drawn so far: MariaDB's sequence row, written (and acknowledged by a
// semi-synchronous replica) before the first value of a reserved block is handed out, and
// where a restart starts drawing again.
std::int64_t fence_bound(dblock::detail::sqldb::Connection& raw, const std::string& table) {
  return dblock::detail::sqldb::as_int(
      raw.run("SELECT next_not_cached_value FROM " + table + "_fence_seq").rows.at(0).at(0));
}
std::int64_t fence_counter(dblock::detail::sqldb::Connection& raw, const std::string& table) {
  return dblock::detail::sqldb::as_int(raw.run("SELECT value FROM " + table + "_fence WHERE id = 1").rows.at(0).at(0));
}
}  // namespace

// On MariaDB every strategy draws from the table's SEQUENCE, once it holds the name: fences
// grow per table, across strategies, so moving a name from one strategy to another never
// goes back, and none is ahead of the sequence's stored row. A session lock's fence (drawn
// outside any transaction) is handed out only once the counter says its block is durable.
TEST_CASE("mysql: every strategy draws its fence from the sequence, growing across strategies", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto raw = dblock::test::server_connection(table.url());
  auto c = table.ns().open();
  std::uint64_t last = 0;
  for (int i = 0; i < 24; ++i) {
    const auto strategy = c->strategies().at(static_cast<std::size_t>(i) % c->strategies().size());
    INFO(dblock::to_string(strategy));
    dblock::LockOptions o;
    o.strategy = strategy;
    auto held = c->lock("job", o).try_acquire();
    REQUIRE(held);
    CHECK(held->fence() > last);
    CHECK(static_cast<std::int64_t>(held->fence()) < fence_bound(*raw, table.name()));
    if (strategy == dblock::Strategy::advisory || strategy == dblock::Strategy::for_update)
      CHECK(static_cast<std::int64_t>(held->fence()) <= fence_counter(*raw, table.name()));
    last = held->fence();
    held->release();
  }
}

// What lets a name's readers commit side by side (ARCHITECTURE, "Lock shapes"): a reader
// beside live readers locks the name's row shared, writes nothing of it, and draws its fence
// from the sequence, above every grant before it.
TEST_CASE("mysql: a reader beside live readers takes the name's row shared and its fence from the sequence",
          "[mysql][shapes]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto raw = dblock::test::server_connection(table.url());
  auto a = table.ns().open(), b = table.ns().open();
  dblock::LockOptions o;
  o.ttl = 30s;
  auto row = [&] {
    auto r = raw->run("SELECT owner, version FROM " + table.name() + " WHERE name = 'doc'");
    return dblock::detail::sqldb::as_text(r.rows.at(0).at(0)) + " " +
           std::to_string(dblock::detail::sqldb::as_int(r.rows.at(0).at(1)));
  };
  auto first = a->lock("doc", o).acquire_shared();
  const auto before = row();
  CHECK(before.rfind(":readers ", 0) == 0);
  // Another reader's grant under way holds the row shared: this reader does not wait for it.
  auto other = dblock::test::server_connection(table.url());
  auto second = dblock::test::acquire_shared_beside(*other, "START TRANSACTION",
                                                 "SELECT 1 FROM " + table.name() + " WHERE name = 'doc' LOCK IN SHARE MODE",
                                                 b->lock("doc", o));
  CHECK(row() == before);  // neither owner nor version moved
  CHECK(second.fence() > first.fence());
  CHECK(static_cast<std::int64_t>(second.fence()) < fence_bound(*raw, table.name()));
  first.release();
  second.release();
  // A writer after them draws above both; readers after the writer draw above it.
  auto writer = a->lock("doc", o).try_acquire(5s);
  REQUIRE(writer);
  CHECK(writer->fence() > second.fence());
  writer->release();
  auto third = a->lock("doc", o).acquire_shared();
  auto fourth = b->lock("doc", o).acquire_shared();
  CHECK(third.fence() > writer->fence());
  CHECK(fourth.fence() > third.fence());
}

TEST_CASE("mysql: a missing database is a schema error, a wrong password never shows", "[mysql]") {
  auto url = dblock::test::server_url("DBLOCK_TEST_MYSQL_URL");
  auto base = url.substr(0, url.rfind('/'));
  CHECK_THROWS_AS(dblock::Client::open(base + "/no_such_database_here"), dblock::SchemaError);
  auto at = url.find('@');
  auto colon = url.rfind(':', at);
  auto wrong = url.substr(0, colon + 1) + "S3cretWrong" + url.substr(at);
  try {
    dblock::Client::open(wrong);
    FAIL("a wrong password was accepted");
  } catch (const dblock::UnavailableError& e) {
    CHECK(std::string(e.what()).find("S3cretWrong") == std::string::npos);
  }
  CHECK_THROWS_AS(dblock::Client::open(base + "/dblock?sslmode=require"), dblock::UsageError);  // not a MySQL option
}

TEST_CASE("mysql: an advisory acquire sent again on its session is freed by one release", "[mysql]") {
  // A text whose CALL was a deadlock victim (1213) is sent again whole. GET_LOCK counts per
  // session: taken twice, one RELEASE_LOCK would leave the name held until the connection
  // closes.
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto raw = dblock::test::server_connection(table.url()), other = dblock::test::server_connection(table.url());
  const auto& d = dblock::detail::sqldb::mysql_dialect();
  const auto t = dblock::detail::parse_table_name(table.name());
  const std::vector<Value> key{std::int64_t{0x5eed}};
  const auto acquire = dblock::detail::sqldb::render(d[Statement::advisory_try], t, d.now_ms);
  raw->run(acquire, key);
  raw->run(acquire, key);
  const std::string used = "SELECT IS_USED_LOCK(CONCAT('dblock:', LPAD(HEX(?1), 16, '0')))";
  CHECK(other->run(used, key).rows.at(0).at(0) != Value{nullptr});
  raw->run(dblock::detail::sqldb::render(d[Statement::advisory_unlock], t, d.now_ms), key);
  CHECK(other->run(used, key).rows.at(0).at(0) == Value{nullptr});
}

TEST_CASE("mysql: <table>_check refuses a stale fence and holds off a takeover until commit", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto a = table.ns().open(), b = table.ns().open();
  auto s = dblock::test::server_connection(table.url());
  const std::string check = "CALL " + table.name() + "_check(?1, ?2)";
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic}) {
    INFO(dblock::to_string(strategy));
    dblock::LockOptions o;
    o.strategy = strategy;
    o.ttl = 1000ms;  // MySQL's lock waits count in whole seconds: a TTL the test can outwait
    o.auto_renew = false;
    auto old = a->lock("job", o).acquire();
    std::this_thread::sleep_for(1100ms);
    auto next = b->lock("job", o).try_acquire(2s);
    REQUIRE(next);
    s->begin();
    CHECK_THROWS_AS(s->run(check, {std::string("job"), std::int64_t(old.fence())}), dblock::LockLostError);
    s->rollback();
    next->release();

    // Checked in time, the lease stays its holder's until the transaction commits, even once
    // it has expired: the takeover waits.
    auto lease = a->lock("job", o).acquire();
    s->begin();
    s->run(check, {std::string("job"), std::int64_t(lease.fence())});
    std::this_thread::sleep_for(1100ms);  // expired now
    std::atomic<bool> taken{false};
    dblock::LockOptions patient;
    patient.strategy = strategy;
    std::thread thief([&] { taken = b->lock("job", patient).try_acquire(4s).has_value(); });
    std::this_thread::sleep_for(500ms);
    CHECK_FALSE(taken);
    s->commit();
    thief.join();
    CHECK(taken);
    b->force_release("job");
  }
}

// A primary and its replicas in one URL: each connection goes to the first server that answers
// and accepts writes. Here the first refuses connections; every connection dblock opens (the
// pool, a session lock's pinned one, the fence connection) must reach the second. (A
// read-only server passed over is in the CLI test, which may set read_only.)
TEST_CASE("mysql: a URL of several servers reaches the one that accepts writes", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto ns = table.ns();
  const auto at = ns.url.find('@');
  REQUIRE(at != std::string::npos);
  ns.url = ns.url.substr(0, at + 1) + "127.0.0.1:1," + ns.url.substr(at + 1);
  auto a = ns.open(), b = ns.open();
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::for_update, dblock::Strategy::advisory}) {
    INFO(dblock::to_string(strategy));
    dblock::LockOptions o;
    o.strategy = strategy;
    auto held = a->lock("job", o).try_acquire();
    REQUIRE(held);
    CHECK_FALSE(b->lock("job", o).try_acquire());
    const auto fence = held->fence();
    held->release();
    auto next = b->lock("job", o).try_acquire();
    REQUIRE(next);
    CHECK(next->fence() > fence);
  }
}

// Fair waiting: a dead waiter's ticket (dead_ticket_check.hpp).
TEST_CASE("mysql: a dead waiter's ticket holds the queue up only until it expires", "[mysql][fair]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto c = table.ns().open();
  auto raw = dblock::test::server_connection(table.url());
  dblock::test::check_dead_ticket(*c, [&](const std::string& owner, int ms) {
    const std::string until =
        "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 + " + std::to_string(ms);
    raw->run_script("INSERT INTO " + table.name() +
                    "_queue (name, owner, ticket, valid_until, lease_ms) VALUES ('job', '" + owner + "', 1, " + until +
                    ", 30000)");
    // and the name's row marked, as every waiter's join does (waited_until)
    raw->run_script("INSERT INTO " + table.name() +
                    " (name, owner, fence, holds, acquired_at, valid_until, version, waited_until) VALUES ('job', '', "
                    "0, 0, 0, 0, 0, " + until + ") ON DUPLICATE KEY UPDATE waited_until = " + until);
  });
}

// Turn keys (docs/ARCHITECTURE.md, "Fair waiting"): each queued waiter holds a GET_LOCK key of
// its own while it waits and, once it wins, until its release, which is what wakes the one
// behind it; a waiter that gives up lets its key go.
TEST_CASE("mysql: a queued waiter holds its turn key until it gives up or releases", "[mysql][fair]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto a = table.ns().open();
  auto b = table.ns().open();
  auto c = table.ns().open();
  auto raw = dblock::test::server_connection(table.url());
  const std::string queue = table.name() + "_queue";
  // The owners queued for "job", in ticket order, each with whether its key is held now.
  auto queued = [&] {
    std::vector<std::pair<std::string, bool>> out;
    auto r = raw->run("SELECT owner, IS_USED_LOCK(CONCAT('dblock:turn:', SHA1(CONCAT(DATABASE(), '.', '" +
                      table.name() + "', CHAR(0), name, CHAR(0), owner)))) IS NOT NULL FROM " + queue +
                      " WHERE name = 'job' ORDER BY ticket");
    for (const auto& row : r.rows)
      out.emplace_back(dblock::detail::sqldb::as_text(row[0]), dblock::detail::sqldb::as_int(row[1]) != 0);
    return out;
  };
  auto key_held = [&](const std::string& owner) {
    auto r = raw->run("SELECT IS_USED_LOCK(CONCAT('dblock:turn:', SHA1(CONCAT(DATABASE(), '.', '" + table.name() +
                      "', CHAR(0), 'job', CHAR(0), '" + owner + "')))) IS NOT NULL");
    return dblock::detail::sqldb::as_int(r.rows.at(0)[0]) != 0;
  };
  auto until_queued = [&](std::size_t n) {
    for (int i = 0; i < 500 && queued().size() < n; ++i) std::this_thread::sleep_for(10ms);
    return queued();
  };

  auto first = a->lock("job").try_acquire();
  REQUIRE(first);
  auto wait_b = std::async(std::launch::async, [&] { return b->lock("job").try_acquire(20s); });
  auto one = until_queued(1);
  REQUIRE(one.size() == 1);
  CHECK(one[0].second);  // b's key, taken before its ticket
  auto wait_c = std::async(std::launch::async, [&] { return c->lock("job").try_acquire(20s); });
  auto two = until_queued(2);
  REQUIRE(two.size() == 2);
  CHECK(two[1].second);
  const std::string owner_b = two[0].first, owner_c = two[1].first;

  first->release();  // a never waited, so it had no key: b finds the release by polling
  auto held_b = wait_b.get();
  REQUIRE(held_b);
  CHECK(key_held(owner_b));  // kept while b holds: c is blocked on it
  CHECK(key_held(owner_c));
  CHECK(wait_c.wait_for(200ms) == std::future_status::timeout);
  held_b->release();  // lets b's key go, which wakes c
  // c's wait takes b's key for a moment as it wakes (and lets it go in the same text): what
  // must hold is that nobody keeps it.
  auto b_key_let_go = [&] {
    for (int i = 0; i < 500 && key_held(owner_b); ++i) std::this_thread::sleep_for(10ms);
    return !key_held(owner_b);
  };
  CHECK(b_key_let_go());
  auto held_c = wait_c.get();
  REQUIRE(held_c);
  CHECK(held_c->fence() > held_b->fence());

  // A waiter that gives up lets its key go with its ticket.
  auto gave_up = b->lock("job").try_acquire(300ms);
  CHECK_FALSE(gave_up);
  for (const auto& q : queued()) CHECK(q.first != owner_b);  // (c's own ticket goes with its release)
  CHECK_FALSE(key_held(owner_b));
  held_c->release();
  CHECK_FALSE(key_held(owner_c));
}

// The hand-over (<table>_lease_release): the release of a grant made after waiting grants the row to
// the head of the line, whose turn key the same text lets go; the head's turn grant answers
// the row handed to its ticket without writing it, for the TTL the head asked for. Both
// lease strategies.
namespace {
std::int64_t mysql_left(dblock::detail::sqldb::Connection& raw, const std::string& table) {
  auto r = raw.run("SELECT valid_until - TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 "
                   "FROM " + table + " WHERE name = 'job'");
  return r.rows.empty() ? std::int64_t{-1} : dblock::detail::sqldb::as_int(r.rows.front()[0]);
}
std::int64_t mysql_handed(dblock::detail::sqldb::Connection& raw, const std::string& table) {
  return dblock::detail::sqldb::as_int(
      raw.run("SELECT handed_to FROM " + table + " WHERE name = 'job'").rows.at(0).at(0));
}
std::int64_t mysql_queued(dblock::detail::sqldb::Connection& raw, const std::string& table) {
  return dblock::detail::sqldb::as_int(raw.run("SELECT count(*) FROM " + table + "_queue").rows.front()[0]);
}
// A grant of `name` made after waiting (behind `first`, a Client that takes it and lets go):
// the kind whose release hands over.
dblock::Lease mysql_taken_after_waiting(dblock::Client& first, dblock::Client& c, const dblock::LockOptions& o) {
  auto before = first.lock("job", o).acquire();
  auto waited = std::async(std::launch::async, [&] { return c.lock("job", o).try_acquire(60s); });
  std::this_thread::sleep_for(300ms);
  before.release();
  auto l = waited.get();
  REQUIRE(l);
  return std::move(*l);
}
}  // namespace

TEST_CASE("mysql: a release hands the row to the head of the line, for the TTL it asked", "[mysql][fair]") {
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic}) {
    dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
    auto h = table.ns().open(), w = table.ns().open(), x = table.ns().open();
    auto raw = dblock::test::server_connection(table.url());
    const std::string t = table.name();
    dblock::LockOptions o;
    o.strategy = strategy;
    o.ttl = 20s;
    auto held = mysql_taken_after_waiting(*x, *h, o);
    auto waiter = std::async(std::launch::async, [&] { return w->lock("job", o).try_acquire(60s); });
    REQUIRE(dblock::test::eventually([&] { return mysql_queued(*raw, t) == 1; }, 20s));
    std::this_thread::sleep_for(100ms);  // into its turn key's wait
    const auto fence = held.fence();
    held.release();
    auto got = waiter.get();
    REQUIRE(got);
    CHECK(got->fence() > fence);
    const auto left = mysql_left(*raw, t);
    CHECK(left > 15000);  // handed over for the 20 s asked (a ticket's life, 3 s, was too short)
    CHECK(left <= 20000);
    CHECK(mysql_handed(*raw, t) > 0);
    CHECK(mysql_queued(*raw, t) == 0);
    CHECK_FALSE(got->lost());
    // The releaser asks again: it queues, and the next release hands the name back to it.
    auto again = std::async(std::launch::async, [&] { return h->lock("job", o).try_acquire(60s); });
    REQUIRE(dblock::test::eventually([&] { return mysql_queued(*raw, t) == 1; }, 20s));
    std::this_thread::sleep_for(100ms);
    got->release();
    auto back = again.get();
    REQUIRE(back);
    CHECK(back->fence() > got->fence());
    CHECK(mysql_handed(*raw, t) > 0);
    back->release();
    CHECK(mysql_left(*raw, t) <= 0);  // freed: nobody waits
  }
}

// An acquire the core does not renew (auto_renew off) gets its TTL at once when handed the
// row, under the fence the release drew for it.
TEST_CASE("mysql: a waiter that renews nothing is handed the row with its own TTL", "[mysql][fair]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto h = table.ns().open(), w = table.ns().open(), x = table.ns().open();
  auto raw = dblock::test::server_connection(table.url());
  auto held = mysql_taken_after_waiting(*x, *h, {});
  dblock::LockOptions o;
  o.auto_renew = false;
  o.ttl = 20s;
  auto waiter = std::async(std::launch::async, [&] { return w->lock("job", o).try_acquire(60s); });
  REQUIRE(dblock::test::eventually([&] { return mysql_queued(*raw, table.name()) == 1; }, 20s));
  std::this_thread::sleep_for(100ms);
  held.release();
  auto got = waiter.get();
  REQUIRE(got);
  CHECK(mysql_left(*raw, table.name()) > 15000);
  auto fence = raw->run("SELECT fence, handed_to <> 0 FROM " + table.name() + " WHERE name = 'job'");
  CHECK(dblock::detail::sqldb::as_int(fence.rows.at(0)[0]) == static_cast<std::int64_t>(got->fence()));
  CHECK(dblock::detail::sqldb::as_int(fence.rows.at(0)[1]) == 1);  // the hand-over's grant, not a new one
  got->release();
}

// A renewal of a ticket the release just handed the row to (handed_ticket_check.hpp).
TEST_CASE("mysql: a renewal crossing the hand-over does not write the ticket back", "[mysql][fair]") {
  namespace sq = dblock::detail::sqldb;
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto c = table.ns().open();
  auto raw = dblock::test::server_connection(table.url());
  const auto d = sq::mysql_dialect().rendered(dblock::detail::parse_table_name(table.name()));
  dblock::test::check_handed_ticket(*c, *raw, d, table.name() + "_queue");
}

// A renewal that crossed the hand-over all the same (handed_ticket_check.hpp; <table>_lease_release).
TEST_CASE("mysql: a ticket written back across the hand-over goes with the holder's release", "[mysql][fair]") {
  namespace sq = dblock::detail::sqldb;
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto c = table.ns().open();
  auto raw = dblock::test::server_connection(table.url());
  const auto d = sq::mysql_dialect().rendered(dblock::detail::parse_table_name(table.name()));
  dblock::test::check_written_back_ticket(*c, *raw, d, table.name());
}

// A Client holds at most pool_size turn keys: its threads waiting on more names than that
// wait without a key (they poll), so that its connections stay bounded, and are granted all
// the same.
TEST_CASE("mysql: a Client waiting on many names holds at most pool_size turn keys", "[mysql][fair]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto holder = table.ns().open();
  auto ns = table.ns();
  ns.options.pool_size = 2;
  auto waiters = ns.open();
  auto raw = dblock::test::server_connection(table.url());
  constexpr int names = 5;
  std::vector<dblock::Lease> held;
  for (int i = 0; i < names; ++i) held.push_back(holder->lock("job" + std::to_string(i)).acquire());
  std::vector<std::future<std::optional<dblock::Lease>>> waits;
  for (int i = 0; i < names; ++i)
    waits.push_back(std::async(std::launch::async, [&, i] {
      return waiters->lock("job" + std::to_string(i)).try_acquire(30s);
    }));
  const auto count = [&](const std::string& what) {
    return dblock::detail::sqldb::as_int(raw->run(what).rows.at(0).at(0));
  };
  const auto queued = "SELECT count(*) FROM " + table.name() + "_queue";
  const auto keys = "SELECT count(*) FROM " + table.name() + "_queue WHERE IS_USED_LOCK(CONCAT('dblock:turn:', "
                    "SHA1(CONCAT(DATABASE(), '.', '" + table.name() + "', CHAR(0), name, CHAR(0), owner)))) IS NOT NULL";
  REQUIRE(dblock::test::eventually([&] { return count(queued) == names; }, 20s));
  std::this_thread::sleep_for(300ms);  // every waiter has made its join and its next attempts
  CHECK(count(keys) == 2);
  for (auto& l : held) l.release();
  for (auto& w : waits) {
    auto got = w.get();
    REQUIRE(got);
    got->release();
  }
}

// A waiter that gives up after the release handed it the row (its grant never took it) frees
// the row with its ticket, and the next waiter, woken by its turn key, gets it at once; a
// release of a row that is not ours any more answers so.
TEST_CASE("mysql: a waiter that gives up after the row was handed to it frees it", "[mysql][fair]") {
  namespace sq = dblock::detail::sqldb;
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  const auto url = table.url();
  auto raw = dblock::test::server_connection(url);
  const auto d = sq::mysql_dialect().rendered(dblock::detail::parse_table_name(table.name()));
  sq::ConnectionPool::Open open = [url] { return dblock::test::server_connection(url); };
  sq::ConnectionPool pool(open, {2, 2, 10s, "test connections"});
  sq::InsertDriver driver(pool, d, nullptr, sq::mysql_turn_keys(sq::mysql_dialect(), dblock::detail::parse_table_name(table.name()), 2), 10s);
  auto c = table.ns().open();
  dblock::LockOptions o;
  o.auto_renew = false;  // the test takes the row away from this lease
  auto held = c->lock("job", o).acquire();
  const std::string me = "test:1:0:t1";
  dblock::detail::AcquireRequest req{"job", me, 30s, 10s, nullptr};
  auto a = driver.try_acquire(req);
  REQUIRE_FALSE(a.acquired());
  REQUIRE(a.place);
  const auto ticket = sq::as_int(
      raw->run("SELECT ticket FROM " + table.name() + "_queue WHERE owner = ?1", {me}).rows.at(0).at(0));
  const auto released = raw->run(d[Statement::insert_handover],
                                 {std::string("job"), held.owner(), static_cast<std::int64_t>(held.fence())});
  CHECK(sq::as_int(released.rows.at(0).at(0)) == -1);  // handed over
  auto row = [&] {
    auto r = raw->run("SELECT owner, fence, handed_to, holds FROM " + table.name() + " WHERE name = 'job'");
    REQUIRE(r.rows.size() == 1);
    return r.rows.front();
  };
  CHECK(sq::as_text(row()[0]) == me);
  CHECK(sq::as_int(row()[1]) > static_cast<std::int64_t>(held.fence()));
  CHECK(sq::as_int(row()[2]) == ticket);
  CHECK(mysql_queued(*raw, table.name()) == 0);
  CHECK(raw->run(d[Statement::insert_handover],
                 {std::string("job"), held.owner(), static_cast<std::int64_t>(held.fence())}).rows.empty());
  a.place.reset();  // the acquire gives up
  CHECK(sq::as_text(row()[0]).empty());
  CHECK(sq::as_int(row()[3]) == 0);
  CHECK(table.ns().open()->lock("job").try_acquire());
}

// The TLS-only server (scripts/services start mysql-tls): what each wrong setup answers, and
// that every connection is encrypted. The contract suite itself runs there too (MySqlTlsInsert).
namespace {

// A scratch table where Client b holds "job" with its turn key (granted after waiting behind
// a), and Client c's asynchronous acquire then waits on that key inside the server.
struct KeyedHolder {
  dblock::test::ScratchTable table{dblock::test::ScratchTable::Server::mysql};
  std::shared_ptr<dblock::Client> a = table.ns().open(), b = table.ns().open(), c = table.ns().open();
  std::unique_ptr<dblock::detail::sqldb::Connection> raw = dblock::test::server_connection(table.url());
  std::int64_t queued() {
    return dblock::detail::sqldb::as_int(
        raw->run("SELECT COUNT(*) FROM " + table.name() + "_queue WHERE name = 'job'").rows.at(0).at(0));
  }
  dblock::Lease hold_with_key() {
    auto first = a->lock("job").try_acquire();
    REQUIRE(first);
    auto wait_b = std::async(std::launch::async, [&] { return b->lock("job").try_acquire(20s); });
    REQUIRE(dblock::test::eventually([&] { return queued() == 1; }, 5s));
    first->release();
    auto held = wait_b.get();
    REQUIRE(held);
    return std::move(*held);
  }
};

}  // namespace

// The turn-key wait and the grant after it go to the server as one text; a cancel kills it
// (KILL QUERY) instead of leaving the waiter there until the wait's bound.
TEST_CASE("mysql: a cancelled asynchronous acquire waiting on a turn key ends at once and leaves nothing", "[mysql][fair]") {
  KeyedHolder k;
  auto held_b = k.hold_with_key();
  std::promise<std::exception_ptr> ended;
  auto pending = k.c->lock("job").async_acquire(
      [&](std::exception_ptr e, std::optional<dblock::Lease>) { ended.set_value(e); }, 20s);
  REQUIRE(dblock::test::eventually([&] { return k.queued() == 1; }, 5s));  // c's ticket
  std::this_thread::sleep_for(300ms);  // c's attempt waits on b's key inside the server
  const auto cancelled_at = std::chrono::steady_clock::now();
  CHECK(pending.cancel());
  auto result = ended.get_future();
  REQUIRE(result.wait_for(5s) == std::future_status::ready);
  const auto took = std::chrono::steady_clock::now() - cancelled_at;
  std::printf("mysql turn key: the wait ended %.1f ms after its cancel\n",
              std::chrono::duration<double, std::milli>(took).count());
  CHECK(took < 500ms);  // not the wait's bound (the backoff's, up to 1 s)
  auto error = result.get();
  REQUIRE(error);
  CHECK_THROWS_AS(std::rethrow_exception(error), dblock::CancelledError);
  CHECK(k.queued() == 0);  // c's ticket went with it
  held_b.release();
  CHECK(k.a->lock("job").try_acquire(2s));  // and no lease of c's holds the name
}

// The same cancel, racing the release that wakes the wait: the kill may land in the grant
// after the wait, whose answer is then lost; the lease it may have committed is given back.
TEST_CASE("mysql: a cancel racing a turn-key grant leaves no lease behind", "[mysql][fair]") {
  KeyedHolder k;
  int cancelled = 0, granted = 0;
  for (int round = 0; round < 12; ++round) {
    auto held_b = k.hold_with_key();
    std::promise<std::pair<std::exception_ptr, std::optional<dblock::Lease>>> ended;
    auto pending = k.c->lock("job").async_acquire(
        [&](std::exception_ptr e, std::optional<dblock::Lease> l) { ended.set_value({e, std::move(l)}); }, 20s);
    REQUIRE(dblock::test::eventually([&] { return k.queued() == 1; }, 5s));
    std::this_thread::sleep_for(100ms);
    auto release = std::async(std::launch::async, [&] { held_b.release(); });
    std::this_thread::sleep_for(std::chrono::microseconds(500 * round));  // later into the wake-up
    const bool took = pending.cancel();
    release.get();
    auto result = ended.get_future();
    REQUIRE(result.wait_for(5s) == std::future_status::ready);
    auto [error, lease] = result.get();
    if (took) {
      CHECK(error);
      ++cancelled;
    } else {
      CHECK(lease);
      ++granted;
    }
    lease.reset();
    auto next = k.a->lock("job").try_acquire(3s);  // not held off until a lost grant's TTL
    REQUIRE(next);
    next->release();
  }
  std::printf("mysql turn key: %d cancels and %d grants that came first\n", cancelled, granted);
  CHECK(cancelled > 0);
}

TEST_CASE("mysql over TLS: the server is verified, and each wrong setup fails in one line", "[mysql-tls]") {
  const auto tls_url = dblock::test::server_url("DBLOCK_TEST_MYSQL_TLS_URL");
  const char* certs_env = std::getenv("DBLOCK_TEST_CERTS");
  if (!certs_env || !*certs_env) FAIL("DBLOCK_TEST_CERTS is not set (scripts/services env mysql-tls sets it)");
  const std::string certs = certs_env;
  const auto at = [](const std::string& url) {
    auto u = dblock::detail::parse_url(url);
    return u.hosts.at(0).host + ":" + std::to_string(u.hosts[0].port) + "/" + u.path;
  };
  const auto server = at(tls_url);
  const auto plain_server = at(dblock::test::server_url("DBLOCK_TEST_MYSQL_URL"));
  const auto ca = "ssl-ca=" + certs + "/ca.pem", other_ca = "ssl-ca=" + certs + "/other-ca.pem";
  const auto cert = "&ssl-cert=" + certs + "/client.pem&ssl-key=" + certs + "/client.key";
  dblock::ClientOptions quick;
  quick.connect_timeout = 2s;
  auto refused = [&](const std::string& url, const char* says) {
    INFO(dblock::detail::parse_url(url).redacted());
    try {
      dblock::Client::open(url, quick);
      FAIL("let in");
    } catch (const dblock::UnavailableError& e) {
      CHECK_THAT(e.what(), Catch::Contains(says) && !Catch::Contains("locker-pw") && !Catch::Contains("Wr0ng"));
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  };
  refused("mysql://locker:locker-pw@" + server + "?" + other_ca + cert, "TLS/SSL error");  // a CA that signed nothing of ours
  refused("mysql://locker:locker-pw@" + server + "?" + ca, "client certificate");          // none given: denied, and why
  refused("mysql://locker:locker-pw@" + server + "?ssl-mode=DISABLED", "requires TLS");     // plaintext to a TLS-only server
  refused("mysql://locker:Wr0ng@" + server + "?" + ca + cert, "wrong user or password");
  // TLS asked of a server that offers none: refused by the client (VERIFY_IDENTITY), or on the
  // server's word that the connection is plaintext (REQUIRED, VERIFY_CA).
  refused("mysql://dblock:dblock@" + plain_server + "?" + ca, "the server does not support it");
  refused("mysql://dblock:dblock@" + plain_server + "?ssl-mode=REQUIRED", "not encrypted");
  refused("mysql://dblock:dblock@" + plain_server + "?ssl-mode=VERIFY_CA&" + ca, "not encrypted");

  // Every connection of the test URL is encrypted; so is one with no TLS parameter at all
  // (PREFERRED, as the mysql client: TLS whenever the server offers it).
  auto cipher = [](const std::string& url) {
    auto r = dblock::test::server_connection(url)->run("SHOW SESSION STATUS LIKE 'Ssl_cipher'", {});
    REQUIRE(r.rows.size() == 1);
    return dblock::detail::sqldb::as_text(r.rows[0].at(1));
  };
  CHECK_FALSE(cipher(tls_url).empty());
  CHECK_FALSE(cipher("mysql://dblock:dblock@" + server).empty());
  CHECK(cipher("mysql://dblock:dblock@" + plain_server).empty());  // PREFERRED, to a server without TLS

  // The doctor's transport line says so.
  auto transport = [](const std::string& url) {
    auto checks = dblock::Client::open(url)->check_settings();
    REQUIRE_FALSE(checks.empty());
    CHECK(checks.back().setting == "transport");
    return checks.back().value;
  };
  CHECK_THAT(transport(tls_url), Catch::StartsWith("TLSv1.") && Catch::EndsWith("server verified (chain and name)"));
  CHECK_THAT(transport("mysql://locker:locker-pw@" + server + "?ssl-mode=VERIFY_CA&" + ca + cert),
             Catch::EndsWith("server's chain verified (not its name)"));
  CHECK_THAT(transport("mysql://dblock:dblock@" + server), Catch::EndsWith("server not verified"));
  CHECK(transport("mysql://dblock:dblock@" + plain_server) == "plaintext");
}

// docs/SECURITY.md's three accounts, as its recipe grants them, on a database that holds only
// dblock's tables (so that database-wide grants give nothing else away).
TEST_CASE("mysql: the least-privilege accounts lock and sweep, and cannot migrate", "[mysql]") {
  const auto server = dblock::detail::parse_url(dblock::test::server_url("DBLOCK_TEST_MYSQL_URL"));
  const auto suffix = std::to_string(std::random_device{}());
  const std::string db = "dblock_lp_" + suffix, migrator = "mig_" + suffix, locker = "lck_" + suffix,
                    sweeper = "swp_" + suffix;
  auto as = [&](const std::string& user) {
    return "mysql://" + user + ":" + user + "-pw@" + server.hosts.at(0).host + ":" +
           std::to_string(server.hosts[0].port) + "/" + db;
  };
  auto admin = dblock::test::server_connection(server.original);
  struct Cleanup {
    dblock::test::Connection& admin;
    std::string db, users;
    ~Cleanup() {
      try {
        admin.run_script("DROP DATABASE IF EXISTS " + db + "; DROP USER IF EXISTS " + users);
      } catch (...) {  // leftovers in a throwaway server are harmless
      }
    }
  } cleanup{*admin, db, "'" + migrator + "'@'127.0.0.1', '" + locker + "'@'127.0.0.1', '" + sweeper + "'@'127.0.0.1'"};
  // The recipe (docs/SECURITY.md, "Least privilege").
  admin->run_script("CREATE DATABASE " + db);
  for (const auto& user : {migrator, locker, sweeper})
    admin->run_script("CREATE USER '" + user + "'@'127.0.0.1' IDENTIFIED BY '" + user + "-pw'");
  admin->run_script("GRANT CREATE, ALTER, DROP, INDEX, CREATE ROUTINE, ALTER ROUTINE, EXECUTE, SELECT, INSERT, UPDATE, "
                    "DELETE ON " + db + ".* TO '" + migrator + "'@'127.0.0.1'; "
                    "GRANT SELECT, INSERT, UPDATE, DELETE, EXECUTE ON " + db + ".* TO '" + locker + "'@'127.0.0.1'; "
                    "GRANT SELECT, UPDATE, DELETE ON " + db + ".* TO '" + sweeper + "'@'127.0.0.1'");
  dblock::ClientOptions migrating;
  migrating.auto_migrate = true;
  dblock::Client::open(as(migrator), migrating);

  dblock::test::check_locker_and_sweeper(as(locker), as(sweeper), {});
  dblock::ClientOptions other = migrating;
  other.table = "dblock_other";
  CHECK_THROWS_AS(dblock::Client::open(as(locker), other), dblock::UnavailableError);  // CREATE denied
}

TEST_CASE("mysql: an account with no connection slot left waits for one within the acquire's wait", "[mysql]") {
  const auto server = dblock::detail::parse_url(dblock::test::server_url("DBLOCK_TEST_MYSQL_URL"));
  const std::string user = "slots_" + std::to_string(std::random_device{}());
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto admin = dblock::test::server_connection(server.original);
  admin->run_script("CREATE USER '" + user + "'@'127.0.0.1' IDENTIFIED BY '" + user +
                    "-pw' WITH MAX_USER_CONNECTIONS 2; GRANT ALL ON " + server.path + ".* TO '" + user + "'@'127.0.0.1'");
  struct Cleanup {
    dblock::test::Connection& admin;
    std::string user;
    ~Cleanup() {
      try {
        admin.run_script("DROP USER IF EXISTS '" + user + "'@'127.0.0.1'");
      } catch (...) {  // a leftover account in a throwaway server is harmless
      }
    }
  } cleanup{*admin, user};
  dblock::test::check_waits_for_a_connection_slot(
      "mysql://" + user + ":" + user + "-pw@" + server.hosts.at(0).host + ":" + std::to_string(server.hosts[0].port) +
          "/" + server.path,
      "max_user_connections", table.options(),
      [&] {
        for (const auto& row : admin->run("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?1", {user}).rows)
          admin->run("KILL ?1", {row.at(0)});
        REQUIRE(dblock::test::eventually([&] {
          return dblock::detail::sqldb::as_int(
                     admin->run("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?1", {user})
                         .rows.at(0)
                         .at(0)) == 0;
        }));
      });
}

TEST_CASE("mysql: one Client's advisory locks share a few connections", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  auto admin = dblock::test::server_connection(table.url());
  dblock::test::check_multiplexed_advisory(table.ns(), [&](const std::string& name) {
    REQUIRE(dblock::test::terminate_lock_holders(*admin, table.url(), table.name(), name) >= 1);
  });
}

// Renewal by Client row (client_rows_check.hpp).
TEST_CASE("mysql: one Client row keeps a Client's leases, and its expiry loses them all", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  dblock::test::check_client_rows(table, "client <> ''", dblock::detail::sqldb::mysql_dialect().now_ms);
}

TEST_CASE("mysql: a lease declared lost is let go by its Client row", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  dblock::test::check_lost_lease_detached(table, "client <> ''");
}

TEST_CASE("mysql: a renewal waits for no other Client's row", "[mysql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::mysql);
  dblock::test::check_renewal_reads_its_own_row(table, "client <> ''", dblock::detail::sqldb::mysql_dialect().now_ms);
}
