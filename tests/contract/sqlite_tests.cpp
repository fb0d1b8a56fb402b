// What only the SQLite backend promises (its URL forms, file checks, auto-migration).
#include <SQLiteCpp/SQLiteCpp.h>
#include <catch2/catch.hpp>
#include <atomic>
#include <future>
#include <optional>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "dblock/dblock.hpp"
#include "backends/sqlite/sqlite_connection.hpp"
#include "backends/sqlite/sqlite_dialect.hpp"
#include "contract/dead_ticket_check.hpp"
#include "contract/handed_ticket_check.hpp"
#include "contract/upgrade_check.hpp"
#include "contract/wait_mark_check.hpp"
#include "core/validate.hpp"
#include "sql/lease_drivers.hpp"
#include "support/eventually.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;

namespace {
// The database clock in milliseconds, as the dialect reads it.
const std::string sqlite_now = "CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)";
}  // namespace

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
  CHECK(c->migrate() == std::vector<std::string>{"V1__create_dblock_locks.sql"});
  CHECK(c->migrate().empty());
  CHECK(c->lock("x").try_acquire());
}

TEST_CASE("sqlite: a later migration upgrades a V1 table in place, keeping held locks", "[sqlite]") {
  dblock::test::TempDir dir;
  auto url = "sqlite:" + dir.path() + "/l.db";
  dblock::Client::open(url);  // V1
  dblock::detail::sqldb::SqliteConnection raw(dir.path() + "/l.db", std::chrono::milliseconds(5000));
  // A column added and a trigger every grant fires replaced, as a real V2 would.
  dblock::test::check_later_migration(
      [&] { return dblock::Client::open(url); }, raw, dblock::detail::sqldb::sqlite_dialect(), "dblock_locks",
      "ALTER TABLE ${table} ADD COLUMN note TEXT NOT NULL DEFAULT '';\n"
      "DROP TRIGGER ${table}_queue_served_on_insert;\n"
      "CREATE TRIGGER ${table}_queue_served_on_insert AFTER INSERT ON ${table_name}\n"
      "BEGIN\n"
      "    DELETE FROM ${table_name}_queue WHERE name = NEW.name AND owner = NEW.owner;\n"
      "END;\n");
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
        (void)dblock::Client::open(url)->lock("x");
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
    SQLite::Statement st(db, "INSERT INTO dblock_locks_queue (name, owner, ticket, valid_until, lease_ms) VALUES "
                             "('job', ?1, 1, " + sqlite_now + " + ?2, 30000)");
    st.bind(1, owner);
    st.bind(2, ms);
    st.exec();
    // And its mark, on the row it found held, which the holder's release freed and kept.
    SQLite::Statement mark(db, "INSERT INTO dblock_locks (name, owner, fence, holds, acquired_at, valid_until, version, "
                               "waited_until) VALUES ('job', '', 0, 0, 0, 0, 0, " + sqlite_now + " + ?1) "
                               "ON CONFLICT (name) DO UPDATE SET waited_until = excluded.waited_until");
    mark.bind(1, ms);
    mark.exec();
  });
}

// The waiters' mark (wait_mark_check.hpp).
TEST_CASE("sqlite: a waiter marks the name's row, and the release wakes it", "[sqlite][fair]") {
  dblock::test::TempDir dir;
  const auto url = "sqlite:" + dir.path() + "/l.db";
  auto h = dblock::Client::open(url), w = dblock::Client::open(url);
  SQLite::Database db(dir.path() + "/l.db", SQLite::OPEN_READWRITE, 5000);
  dblock::test::check_wait_mark(
      *h, *w,
      [&]() -> std::optional<bool> {
        SQLite::Statement st(db, "SELECT waited_until > " + sqlite_now + " FROM dblock_locks WHERE name = 'job'");
        if (!st.executeStep()) return std::nullopt;
        return st.getColumn(0).getInt() == 1;
      },
      [&] { db.exec("UPDATE dblock_locks SET waited_until = 0"); });
}

// The hand-over: the release of a grant made after waiting names the head of
// the line as the row's owner, with a new fence and the TTL the head asked for, and wakes it;
// the head reads the row handed to its ticket (queue_ahead) instead of writing a grant. The
// releaser, asking again, joins the line at once. Both strategies.
namespace {
std::int64_t sqlite_scalar(SQLite::Database& db, const std::string& sql, std::int64_t none = -1) {
  SQLite::Statement st(db, sql);
  return st.executeStep() ? st.getColumn(0).getInt64() : none;
}
}  // namespace

TEST_CASE("sqlite: a release hands the row to the head of the line, for the TTL it asked", "[sqlite][fair]") {
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic}) {
    dblock::test::TempDir dir;
    const auto url = "sqlite:" + dir.path() + "/l.db";
    auto x = dblock::Client::open(url), h = dblock::Client::open(url), w = dblock::Client::open(url);
    SQLite::Database db(dir.path() + "/l.db", SQLite::OPEN_READONLY);
    auto left = [&] { return sqlite_scalar(db, "SELECT valid_until - " + sqlite_now + " FROM dblock_locks WHERE name = 'job'"); };
    auto queued = [&] { return sqlite_scalar(db, "SELECT count(*) FROM dblock_locks_queue"); };
    auto handed = [&] { return sqlite_scalar(db, "SELECT handed_to FROM dblock_locks WHERE name = 'job'"); };
    dblock::LockOptions o;
    o.strategy = strategy;
    o.ttl = 20s;
    auto taken_after_waiting = [&](dblock::Client& first, dblock::Client& c) {
      auto before = first.lock("job", o).acquire();
      auto waited = std::async(std::launch::async, [&] { return c.lock("job", o).try_acquire(60s); });
      std::this_thread::sleep_for(300ms);
      before.release();
      auto l = waited.get();
      REQUIRE(l);
      return std::move(*l);
    };
    auto held = taken_after_waiting(*x, *h);
    auto waiter = std::async(std::launch::async, [&] { return w->lock("job", o).try_acquire(60s); });
    REQUIRE(dblock::test::eventually([&] { return queued() == 1; }, 20s));
    std::this_thread::sleep_for(100ms);
    held.release();
    auto got = waiter.get();
    REQUIRE(got);
    CHECK(got->fence() > held.fence());
    CHECK(left() > 15000);  // handed over for the 20 s asked (a ticket's life, 3 s, was too short)
    CHECK(left() <= 20000);
    CHECK(handed() > 0);
    CHECK(queued() == 0);
    CHECK_FALSE(got->lost());
    auto again = std::async(std::launch::async, [&] { return h->lock("job", o).try_acquire(60s); });
    REQUIRE(dblock::test::eventually([&] { return queued() == 1; }, 20s));
    std::this_thread::sleep_for(100ms);
    got->release();
    auto back = again.get();
    REQUIRE(back);
    CHECK(back->fence() > got->fence());
    CHECK(handed() > 0);
    back->release();
    CHECK(left() <= 0);  // freed: nobody waits
    CHECK(handed() == 0);
  }
}

// A renewal of a ticket the release just handed the row to (handed_ticket_check.hpp).
TEST_CASE("sqlite: a renewal crossing the hand-over does not write the ticket back", "[sqlite][fair]") {
  namespace sq = dblock::detail::sqldb;
  dblock::test::TempDir dir;
  const auto path = dir.path() + "/l.db";
  auto c = dblock::Client::open("sqlite:" + path);
  const auto d = sq::sqlite_dialect().rendered(dblock::detail::parse_table_name("dblock_locks"));
  REQUIRE(c->lock("warm-up").try_acquire());  // the schema is in place
  sq::SqliteConnection raw(path, 10s);
  dblock::test::check_handed_ticket(*c, raw, d, "dblock_locks_queue");
}

// A waiter that gives up after a release handed it the row (its read never took it) frees the
// row after its ticket; a release of a row that is not ours any more answers so.
TEST_CASE("sqlite: a waiter that gives up after the row was handed to it frees it", "[sqlite][fair]") {
  namespace sq = dblock::detail::sqldb;
  dblock::test::TempDir dir;
  const auto path = dir.path() + "/l.db";
  auto c = dblock::Client::open("sqlite:" + path);
  const auto d = sq::sqlite_dialect().rendered(dblock::detail::parse_table_name("dblock_locks"));
  sq::ConnectionPool::Open open = [path] { return std::make_unique<sq::SqliteConnection>(path, 10s); };
  sq::ConnectionPool pool(open, {2, 2, 10s, "test connections"});
  sq::InsertDriver driver(pool, d, nullptr, nullptr, 10s);
  sq::SqliteConnection raw(path, 10s);
  dblock::LockOptions o;
  o.auto_renew = false;  // the test takes the row away from this lease
  auto held = c->lock("job", o).acquire();
  const std::string me = "test:1:0:t1";
  dblock::detail::AcquireRequest req{"job", me, 30s, 10s, nullptr};
  auto a = driver.try_acquire(req);
  REQUIRE_FALSE(a.acquired());
  REQUIRE(a.place);
  const auto ticket = sq::as_int(raw.run("SELECT ticket FROM dblock_locks_queue WHERE owner = ?1", {me}).rows.at(0).at(0));
  const std::vector<sq::Value> release{std::string("job"), held.owner(), static_cast<std::int64_t>(held.fence())};
  auto released = raw.run(d[sq::Statement::insert_handover], release);
  REQUIRE(released.rows.size() == 1);
  CHECK(sq::as_text(released.rows.front()[0]) == me);  // the one to wake
  CHECK(sq::as_int(released.rows.front()[1]) == -1);   // handed over
  auto row = [&] { return raw.run("SELECT owner, fence, handed_to, holds FROM dblock_locks WHERE name = 'job'", {}).rows.at(0); };
  CHECK(sq::as_text(row()[0]) == me);
  CHECK(sq::as_int(row()[1]) > static_cast<std::int64_t>(held.fence()));
  CHECK(sq::as_int(row()[2]) == ticket);
  CHECK(raw.run("SELECT 1 FROM dblock_locks_queue", {}).rows.empty());  // the trigger took the ticket
  CHECK(raw.run(d[sq::Statement::insert_handover], release).rows.empty());  // not ours any more
  a.place.reset();  // the acquire gives up
  CHECK(sq::as_text(row()[0]).empty());
  CHECK(sq::as_int(row()[3]) == 0);
  CHECK(dblock::Client::open("sqlite:" + path)->lock("job").try_acquire());
}
