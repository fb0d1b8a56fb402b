// Locks in the caller's own transaction and fences checked there (dblock/postgresql.hpp),
// against the test server, on the caller's own libpqxx connections.
#include <catch2/catch.hpp>
#include <future>
#include <optional>
#include <pqxx/pqxx>
#include <thread>

#include "dblock/dblock.hpp"
#include "dblock/postgresql.hpp"
#include "support/eventually.hpp"
#include "support/servers.hpp"

using namespace std::chrono_literals;
using dblock::Strategy;
using dblock::postgresql::LockTable;
using dblock::test::ScratchTable;

namespace {

dblock::LockOptions with(Strategy s, std::chrono::milliseconds ttl = 30s) {
  dblock::LockOptions o;
  o.strategy = s;
  o.ttl = ttl;
  return o;
}

// Both ways of sending the statements: a run of the test case each.
dblock::LockTableOptions either_way() {
  dblock::LockTableOptions o;
  o.prepared_statements = GENERATE(false, true);
  return o;
}

int prepared_by_dblock(pqxx::connection& c) {
  return pqxx::nontransaction(c)
      .exec("SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'dblock\\_%'")[0][0]
      .as<int>();
}

}  // namespace

TEST_CASE("postgresql: lock_in holds until commit or rollback, and keeps out every strategy", "[postgresql]") {
  const auto options = either_way();
  INFO("prepared statements: " << options.prepared_statements);
  ScratchTable table(ScratchTable::Server::postgresql);
  LockTable locks(table.name(), options);
  pqxx::connection a(table.url()), b(table.url());
  auto c = table.ns().open();
  std::uint64_t first;
  {
    pqxx::work tx(a);
    first = locks.lock_in(tx, "job");
    CHECK(first > 0);
    {
      pqxx::work other(b);
      CHECK_FALSE(locks.try_lock_in(other, "job"));
      CHECK_FALSE(locks.try_lock_in(other, "job", 100ms));
      CHECK(locks.try_lock_in(other, "another"));
      CHECK(other.exec("SELECT 1").size() == 1);  // busy attempts left it usable
    }
    CHECK(prepared_by_dblock(b) == (options.prepared_statements ? 1 : 0));  // lock_in's, once
    for (auto s : c->strategies()) {
      INFO(dblock::to_string(s));
      CHECK_FALSE(c->lock("job", with(s)).try_acquire());
    }
    tx.commit();
  }
  auto lease = c->lock("job").try_acquire();  // freed by the commit
  REQUIRE(lease);
  CHECK(lease->fence() > first);  // one sequence for every grant on the table
  {
    pqxx::work tx(a);
    CHECK_FALSE(locks.try_lock_in(tx, "job", 100ms));  // a lease holds it
    std::thread release([&] {
      std::this_thread::sleep_for(200ms);
      lease->release();
    });
    auto fence = locks.try_lock_in(tx, "job", 5s);  // and waits for its release
    release.join();
    REQUIRE(fence);
    CHECK(*fence > lease->fence());
    tx.abort();
  }
  {
    pqxx::work tx(b);  // freed by the rollback
    CHECK(locks.try_lock_in(tx, "job"));
  }
  for (auto s : {Strategy::for_update, Strategy::advisory}) {
    INFO(dblock::to_string(s));
    auto held = c->lock("job", with(s)).acquire();
    pqxx::work tx(a);
    CHECK_FALSE(locks.try_lock_in(tx, "job", 50ms));
    std::thread release([&] {
      std::this_thread::sleep_for(200ms);
      held.release();
    });
    CHECK(locks.try_lock_in(tx, "job", 5s));  // woken by the server at the release
    release.join();
  }
}

// A waiter marks the name's row (the waiters' mark) without waiting for it: a caller's
// transaction that checked the lease in holds it share-locked for as long as it runs, longer
// here than the waiter's statement timeout. The waiter polls meanwhile and gets the name once
// the transaction ends and the holder releases.
TEST_CASE("postgresql: a waiter is not held up by a checked-in row it would mark", "[postgresql][fair]") {
  ScratchTable table(ScratchTable::Server::postgresql);
  LockTable locks(table.name());
  auto holder = table.ns().open();
  auto options = table.ns().options;
  options.statement_timeout = 1s;
  auto waiting = dblock::Client::open(table.url(), options);
  auto lease = holder->lock("job").acquire();
  pqxx::connection conn(table.url());
  pqxx::work tx(conn);
  locks.check_in(tx, lease);
  auto waiter = std::async(std::launch::async, [&] { return waiting->lock("job").try_acquire(20s); });
  std::this_thread::sleep_for(2500ms);  // more than the waiter's statement timeout
  tx.commit();
  lease.release();
  std::optional<dblock::Lease> got;
  REQUIRE_NOTHROW(got = waiter.get());
  REQUIRE(got);
  CHECK(got->fence() > lease.fence());
}

TEST_CASE("postgresql: a transaction's lock goes with its connection", "[postgresql]") {
  ScratchTable table(ScratchTable::Server::postgresql);
  LockTable locks(table.name());
  auto holder = std::make_unique<pqxx::connection>(table.url());
  auto tx = std::make_unique<pqxx::work>(*holder);
  locks.lock_in(*tx, "job");
  auto pid = holder->backendpid();
  pqxx::connection waiter(table.url()), admin(table.url());
  pqxx::work wtx(waiter);
  std::thread kill([&] {
    std::this_thread::sleep_for(200ms);
    pqxx::nontransaction(admin).exec("SELECT pg_terminate_backend(" + std::to_string(pid) + ")");
  });
  auto t0 = std::chrono::steady_clock::now();
  CHECK(locks.try_lock_in(wtx, "job", 10s));
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);  // at once, not after a TTL
  kill.join();
  tx.reset();  // the connection is gone: libpqxx cannot roll back, and must not throw here
  holder.reset();
}

TEST_CASE("postgresql: check_in refuses a stale fence and holds off a takeover until commit", "[postgresql]") {
  const auto options = either_way();
  INFO("prepared statements: " << options.prepared_statements);
  ScratchTable table(ScratchTable::Server::postgresql);
  LockTable locks(table.name(), options);
  pqxx::connection conn(table.url());
  const std::string data = table.data_table();
  {
    pqxx::work ddl(conn);
    ddl.exec("CREATE TABLE " + data + " (id int PRIMARY KEY, fence bigint)");
    ddl.exec("INSERT INTO " + data + " VALUES (1, 0)");
    ddl.commit();
  }
  auto write = [&](pqxx::work& tx, std::uint64_t fence) {
    tx.exec("UPDATE " + data + " SET fence = " + std::to_string(fence) + " WHERE id = 1");
  };
  auto a = table.ns().open(), b = table.ns().open();
  for (auto s : {Strategy::insert, Strategy::optimistic}) {
    INFO(dblock::to_string(s));
    // A holder paused past its TTL (no renewal) whose lock was taken: its write is refused.
    auto paused = a->lock("job", with(s, 300ms));
    auto o = with(s, 300ms);
    o.auto_renew = false;
    auto old = a->lock("job", o).acquire();
    std::this_thread::sleep_for(400ms);
    auto next = b->lock("job", with(s)).try_acquire(2s);
    REQUIRE(next);
    {
      pqxx::work tx(conn);
      CHECK_THROWS_AS(locks.check_in(tx, "job", old.fence()), dblock::LockLostError);
    }
    {
      pqxx::work tx(conn);
      locks.check_in(tx, *next);
      write(tx, next->fence());
      tx.commit();
    }
    CHECK(pqxx::nontransaction(conn).exec("SELECT fence FROM " + data)[0][0].as<std::uint64_t>() ==
          next->fence());
    next->release();

    // Checked in time, the lease stays the holder's until the transaction commits, even
    // once it has expired: the takeover waits.
    auto lease = a->lock("job", o).acquire();
    pqxx::work tx(conn);
    locks.check_in(tx, lease);
    std::this_thread::sleep_for(400ms);  // expired now
    std::atomic<bool> taken{false};
    std::thread thief([&] {
      auto l = b->lock("job", with(s)).try_acquire(4s);
      taken = l.has_value();
    });
    std::this_thread::sleep_for(300ms);
    CHECK_FALSE(taken);
    write(tx, lease.fence());
    tx.commit();
    thief.join();
    CHECK(taken);
  }
}

// A takeover that meets the row of a lease checked in by an open transaction waits for it
// no longer than its own deadline, and is then busy, as behind any holder: not a timeout
// (the server's lock_timeout, set by the grant statement from the acquire's wait).
TEST_CASE("postgresql: a takeover behind a checked-in row is busy by its own deadline", "[postgresql]") {
  using Clock = std::chrono::steady_clock;
  ScratchTable table(ScratchTable::Server::postgresql);
  LockTable locks(table.name());
  pqxx::connection conn(table.url());
  auto a = table.ns().open(), b = table.ns().open();
  for (auto s : {Strategy::insert, Strategy::optimistic}) {
    INFO(dblock::to_string(s));
    auto o = with(s, 300ms);
    o.auto_renew = false;
    auto lease = a->lock("job", o).acquire();
    pqxx::work tx(conn);
    locks.check_in(tx, lease);
    std::this_thread::sleep_for(400ms);  // expired now, its row share-locked by tx
    auto t0 = Clock::now();
    CHECK_FALSE(b->lock("job", with(s)).try_acquire(1s));
    const auto waited = Clock::now() - t0;
    CHECK(waited >= 900ms);
    CHECK(waited < 2s);
    t0 = Clock::now();
    CHECK_FALSE(b->lock("job", with(s)).try_acquire());
    CHECK(Clock::now() - t0 < 500ms);
    tx.commit();
    CHECK(b->lock("job", with(s)).try_acquire(2s));
  }
}

TEST_CASE("postgresql: a shared holder's fence is not a grant for check_in, and lock_in waits for readers",
          "[postgresql]") {
  ScratchTable table(ScratchTable::Server::postgresql);
  LockTable locks(table.name());
  pqxx::connection conn(table.url());
  auto c = table.ns().open();
  for (auto s : {Strategy::insert, Strategy::optimistic}) {
    INFO(dblock::to_string(s));
    auto reader = c->lock("doc", with(s)).acquire_shared();
    {
      pqxx::work tx(conn);
      CHECK_THROWS_AS(locks.check_in(tx, reader), dblock::LockLostError);  // several hold it: no one's grant
    }
    {
      pqxx::work tx(conn);
      CHECK_FALSE(locks.try_lock_in(tx, "doc"));  // a writer in the transaction: busy behind the reader
    }
    reader.release();
    pqxx::work tx(conn);
    CHECK(locks.try_lock_in(tx, "doc"));
  }
}

TEST_CASE("postgresql: in-transaction locks refuse bad input and write nothing", "[postgresql]") {
  const auto options = either_way();
  INFO("prepared statements: " << options.prepared_statements);
  ScratchTable table(ScratchTable::Server::postgresql);
  LockTable locks(table.name(), options);
  CHECK_THROWS_AS(LockTable("bad-table"), dblock::UsageError);
  pqxx::connection conn(table.url());
  {
    pqxx::work tx(conn);
    CHECK_THROWS_AS(locks.try_lock_in(tx, std::string(256, 'x')), dblock::UsageError);
    CHECK_THROWS_AS(locks.try_lock_in(tx, ""), dblock::UsageError);
    CHECK_THROWS_AS(locks.check_in(tx, "job", 0), dblock::UsageError);
  }
  {
    pqxx::work tx(conn);
    CHECK_THROWS(tx.exec("SELECT 1/0"));
    CHECK_THROWS_AS(locks.try_lock_in(tx, "job"), dblock::UsageError);  // a failed transaction
  }
  {
    pqxx::work tx(conn);  // made from a Client: its table
    CHECK(LockTable(table.ns().open(), options).try_lock_in(tx, "job"));
  }
  {
    pqxx::work tx(conn);  // a table without the migration
    CHECK_THROWS_AS(LockTable("dblock_never_migrated", options).try_lock_in(tx, "job"), dblock::SchemaError);
  }
  CHECK(table.ns().open()->list().empty());
  CHECK(pqxx::nontransaction(conn).exec("SELECT count(*) FROM " + table.name())[0][0].as<int>() == 0);
}
