// What only the SQLite backend promises (its URL forms, file checks, auto-migration).
#include <SQLiteCpp/SQLiteCpp.h>
#include <catch2/catch.hpp>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "dblock/dblock.hpp"
#include "contract/dead_ticket_check.hpp"
#include "contract/upgrade_check.hpp"
#include "support/temp_dir.hpp"

TEST_CASE("sqlite: the strategies it does not offer are refused by name", "[sqlite]") {
  dblock::test::TempDir dir;
  auto c = dblock::Client::open("sqlite:" + dir.path() + "/l.db");
  CHECK(c->backend() == "sqlite");
  REQUIRE(c->strategies().front() == dblock::Strategy::insert);
  for (auto s : {dblock::Strategy::for_update, dblock::Strategy::advisory, dblock::Strategy::redis}) {
    dblock::LockOptions o;
    o.strategy = s;
    CHECK_THROWS_WITH(c->lock("job", o), Catch::Contains("not offered by the sqlite backend"));
  }
}

TEST_CASE("sqlite: URL forms and bad paths", "[sqlite]") {
  dblock::test::TempDir dir;
  CHECK(dblock::Client::open("sqlite://" + dir.path() + "/abs.db")->lock("x").try_acquire());
  CHECK(std::filesystem::exists(dir.path() + "/abs.db"));
  CHECK_THROWS_AS(dblock::Client::open("sqlite:" + dir.path() + "/missing/l.db"), dblock::UsageError);
  CHECK_FALSE(std::filesystem::exists(dir.path() + "/missing"));
  CHECK_THROWS_AS(dblock::Client::open("sqlite:" + dir.path()), dblock::UsageError);  // a directory
  CHECK_THROWS_AS(dblock::Client::open("sqlite://host/x.db"), dblock::UsageError);
  CHECK_THROWS_AS(dblock::Client::open("sqlite:"), dblock::UsageError);
  CHECK_THROWS_AS(dblock::Client::open("oracle://db/x"), dblock::UsageError);
  CHECK_THROWS_AS(dblock::Client::open("sqlite:" + dir.path() + "/l.db?bogus=1"), dblock::UsageError);
}

TEST_CASE("sqlite: a file that is not a database is unavailable, not a crash", "[sqlite]") {
  dblock::test::TempDir dir;
  auto path = dir.path() + "/junk.db";
  {
    std::ofstream out(path);
    out << std::string(4096, 'j');
  }
  CHECK_THROWS_AS(dblock::Client::open("sqlite:" + path), dblock::UnavailableError);
}

TEST_CASE("sqlite: without auto-migration a missing table names dblock migrate", "[sqlite]") {
  dblock::test::TempDir dir;
  auto url = "sqlite:" + dir.path() + "/l.db?auto_migrate=false";
  auto c = dblock::Client::open(url);
  CHECK_THROWS_AS(c->lock("x").try_acquire(), dblock::SchemaError);
  CHECK_THROWS_WITH(c->list(), Catch::Contains("dblock migrate"));
  CHECK(c->migrate() ==
        std::vector<std::string>{"V1__create_dblock_locks.sql", "V2__in_transaction.sql", "V3__shared_holders.sql",
                                 "V4__fair_queue.sql"});
  CHECK(c->migrate().empty());
  CHECK(c->lock("x").try_acquire());
}

TEST_CASE("sqlite: V3 (shared holders) upgrades a table in place, keeping held locks", "[sqlite]") {
  dblock::test::TempDir dir;
  auto url = "sqlite:" + dir.path() + "/l.db";
  dblock::test::check_holders_upgrade(
      [&] { return dblock::Client::open(url); },
      [&] {
        SQLite::Database db(dir.path() + "/l.db", SQLite::OPEN_READWRITE);
        db.exec("DROP TABLE dblock_locks_holders; DROP TRIGGER dblock_locks_shared_on_delete; "
                "DELETE FROM dblock_locks_schema_history WHERE version = '3'");
      },
      "V3__shared_holders.sql");
}

TEST_CASE("sqlite: separate tables are separate lock spaces", "[sqlite]") {
  dblock::test::TempDir dir;
  dblock::ClientOptions a, b;
  a.table = "locks_a";
  b.table = "main.locks_b";
  auto url = "sqlite:" + dir.path() + "/l.db";
  auto ca = dblock::Client::open(url, a), cb = dblock::Client::open(url, b);
  auto la = ca->lock("same").try_acquire();
  auto lb = cb->lock("same").try_acquire();
  CHECK(la);
  CHECK(lb);
}

TEST_CASE("sqlite: many clients opening a new file at once migrate it once", "[sqlite]") {
  dblock::test::TempDir dir;
  auto url = "sqlite:" + dir.path() + "/race.db";
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int i = 0; i < 6; ++i)
    ts.emplace_back([&] {
      try {
        dblock::Client::open(url)->lock("x");
      } catch (const std::exception&) {
        failures++;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(failures == 0);
}

TEST_CASE("sqlite: a moved-from Lease names nothing and holds nothing", "[sqlite]") {
  dblock::test::TempDir dir;
  auto c = dblock::Client::open("sqlite:" + dir.path() + "/locks.db");
  auto lease = c->lock("job").acquire();
  auto moved = std::move(lease);
  CHECK(lease.name().empty());  // NOLINT(bugprone-use-after-move): what this test is about
  CHECK(lease.owner().empty());
  CHECK(lease.fence() == 0);
  CHECK_FALSE(lease.held());
  CHECK_FALSE(lease.lost());
  CHECK(lease.remaining().count() == 0);
  CHECK_NOTHROW(lease.release());
  CHECK(moved.name() == "job");
  CHECK(moved.fence() > 0);
  moved.release();
  CHECK(c->list().empty());
}

// Fair waiting: a dead waiter's ticket (dead_ticket_check.hpp).
TEST_CASE("sqlite: a dead waiter's ticket holds the queue up only until it expires", "[sqlite][fair]") {
  dblock::test::TempDir dir;
  auto c = dblock::Client::open("sqlite:" + dir.path() + "/l.db");
  SQLite::Database db(dir.path() + "/l.db", SQLite::OPEN_READWRITE);
  dblock::test::check_dead_ticket(*c, [&](const std::string& owner, int ms) {
    SQLite::Statement st(db, "INSERT INTO dblock_locks_queue (name, owner, ticket, valid_until) VALUES ('job', ?1, 1, "
                             "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) + ?2)");
    st.bind(1, owner);
    st.bind(2, ms);
    st.exec();
  });
}
