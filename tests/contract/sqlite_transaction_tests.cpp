// Locks in the caller's own SQLite transaction and fences checked there (dblock/sqlite.hpp),
// on the caller's own SQLiteCpp connections.
#include <SQLiteCpp/SQLiteCpp.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "dblock/dblock.hpp"
#include "dblock/sqlite.hpp"
#include "support/temp_dir.hpp"

using namespace std::chrono_literals;
using dblock::sqlite::LockTable;

namespace {

struct Db {
  dblock::test::TempDir dir;
  std::string path = dir.path() + "/locks.db";
  std::shared_ptr<dblock::Client> client = dblock::Client::open("sqlite:" + path);  // migrates
  SQLite::Database connect() const { return SQLite::Database(path, SQLite::OPEN_READWRITE, 5000); }
};

}  // namespace

TEST_CASE("sqlite: lock_in is the write transaction itself, with a fence, unless a lease holds the name",
          "[sqlite]") {
  Db db;
  LockTable locks;
  auto conn = db.connect();
  auto before = db.client->lock("job").acquire();
  auto f0 = before.fence();
  before.release();
  {
    SQLite::Transaction tx(conn);
    auto fence = locks.lock_in(conn, "job");
    CHECK(fence > f0);
    tx.commit();
  }
  CHECK(db.client->lock("job").acquire().fence() > f0 + 1);  // one counter for every grant

  auto lease = db.client->lock("job").acquire();
  conn.exec("BEGIN IMMEDIATE");
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(locks.try_lock_in(conn, "job", 2s));  // busy at once: waiting would keep the holder out
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  CHECK_THROWS_AS(locks.lock_in(conn, "job"), dblock::BusyError);  // busy, not a timeout
  CHECK(locks.try_lock_in(conn, "another"));  // the transaction is still usable
  conn.exec("ROLLBACK");
  lease.release();
  CHECK_THROWS_AS(locks.lock_in(conn, "job"), dblock::UsageError);  // no transaction open
}

TEST_CASE("sqlite: check_in refuses a stale fence and holds off a takeover until commit", "[sqlite]") {
  Db db;
  LockTable locks;
  auto conn = db.connect();
  auto other = dblock::Client::open("sqlite:" + db.path);
  dblock::LockOptions o;
  o.ttl = 300ms;
  o.auto_renew = false;
  auto old = db.client->lock("job", o).acquire();
  std::this_thread::sleep_for(400ms);
  auto next = other->lock("job").try_acquire(2s);
  REQUIRE(next);
  {
    SQLite::Transaction tx(conn);
    CHECK_THROWS_AS(locks.check_in(conn, old), dblock::LockLostError);
  }
  {
    SQLite::Transaction tx(conn);
    locks.check_in(conn, *next);
    tx.commit();
  }
  CHECK(conn.execAndGet("SELECT count(*) FROM dblock_locks_check").getInt() == 0);  // the guard keeps nothing
  next->release();

  auto lease = db.client->lock("job", o).acquire();
  SQLite::Transaction tx(conn);
  locks.check_in(conn, lease);
  std::this_thread::sleep_for(400ms);  // expired now, but checked in
  std::atomic<bool> taken{false};
  std::thread thief([&] { taken = other->lock("job").try_acquire(4s).has_value(); });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(taken);
  tx.commit();
  thief.join();
  CHECK(taken);
}

TEST_CASE("sqlite: in-transaction locks refuse bad input and write nothing", "[sqlite]") {
  Db db;
  LockTable locks;
  CHECK_THROWS_AS(LockTable("bad-table"), dblock::UsageError);
  auto conn = db.connect();
  SQLite::Transaction tx(conn);
  CHECK_THROWS_AS(locks.try_lock_in(conn, std::string(256, 'x')), dblock::UsageError);
  CHECK_THROWS_AS(locks.check_in(conn, "job", 0), dblock::UsageError);
  CHECK_THROWS_AS(LockTable("never_migrated").try_lock_in(conn, "job"), dblock::SchemaError);
  CHECK(conn.execAndGet("SELECT value FROM dblock_locks_fence").getInt64() == 0);
}
