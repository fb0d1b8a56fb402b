// The backend x strategy combinations the contract suite runs against. A later backend
// adds its fixtures here (and to DBLOCK_CONTRACT_FIXTURES), nothing else.
//
// A fixture makes a fresh lock namespace per test (a new SQLite file; on a server, a new
// table) and tells what the strategy promises where strategies differ.
#pragma once

#include <memory>
#include <string>

#include "dblock/dblock.hpp"
#include "support/servers.hpp"
#include "support/temp_dir.hpp"

namespace dblock::test {

// Every fixture has:
//   lease_based   true: a lease (a row with a TTL, listed by Client::list, freed by expiry);
//                 false: a session lock (freed when its connection drops, not listed)
//   make()        the namespace (URL and table) of this test
//   steal(c, n)   takes lock n away from its holder behind its back: an operator's force
//                 release for leases, the holder's connection terminated for session locks
struct SqliteFixture {
  static constexpr bool lease_based = true;
  TempDir dir;
  Namespace make() const { return Namespace{"sqlite:" + dir.path() + "/locks.db", ClientOptions{}}; }
  void steal(Client& c, const std::string& name) const { REQUIRE(c.force_release(name)); }
};

struct SqliteInsert : SqliteFixture {
  static constexpr Strategy strategy = Strategy::insert;
};
struct SqliteOptimistic : SqliteFixture {
  static constexpr Strategy strategy = Strategy::optimistic;
};

#ifdef DBLOCK_TEST_POSTGRESQL
// A fresh, migrated table on the server in DBLOCK_TEST_PG_URL, dropped afterwards.
struct PgFixture {
  TempDir dir;
  ScratchTable table{ScratchTable::Server::postgresql};
  Namespace make() const { return table.ns(); }
};

struct PgLeaseFixture : PgFixture {
  static constexpr bool lease_based = true;
  void steal(Client& c, const std::string& name) const { REQUIRE(c.force_release(name)); }
};
struct PgSessionFixture : PgFixture {
  static constexpr bool lease_based = false;
  void steal(Client&, const std::string& name) const {
    REQUIRE(terminate_lock_holders(table.url(), table.name(), name) > 0);
  }
};

struct PgInsert : PgLeaseFixture {
  static constexpr Strategy strategy = Strategy::insert;
};
struct PgOptimistic : PgLeaseFixture {
  static constexpr Strategy strategy = Strategy::optimistic;
};
struct PgForUpdate : PgSessionFixture {
  static constexpr Strategy strategy = Strategy::for_update;
};
struct PgAdvisory : PgSessionFixture {
  static constexpr Strategy strategy = Strategy::advisory;
};
#define DBLOCK_PG_LEASE_FIXTURES , dblock::test::PgInsert, dblock::test::PgOptimistic
#define DBLOCK_PG_SESSION_FIXTURES , dblock::test::PgForUpdate, dblock::test::PgAdvisory
#else
#define DBLOCK_PG_LEASE_FIXTURES
#define DBLOCK_PG_SESSION_FIXTURES
#endif

#ifdef DBLOCK_TEST_MYSQL
// A fresh, migrated table on the server in DBLOCK_TEST_MYSQL_URL, dropped afterwards.
struct MySqlFixture {
  TempDir dir;
  ScratchTable table{ScratchTable::Server::mysql};
  Namespace make() const { return table.ns(); }
};
struct MySqlLeaseFixture : MySqlFixture {
  static constexpr bool lease_based = true;
  void steal(Client& c, const std::string& name) const { REQUIRE(c.force_release(name)); }
};
struct MySqlSessionFixture : MySqlFixture {
  static constexpr bool lease_based = false;
  void steal(Client&, const std::string& name) const {
    REQUIRE(terminate_lock_holders(table.url(), table.name(), name) > 0);
  }
};
struct MySqlInsert : MySqlLeaseFixture {
  static constexpr Strategy strategy = Strategy::insert;
};
struct MySqlOptimistic : MySqlLeaseFixture {
  static constexpr Strategy strategy = Strategy::optimistic;
};
struct MySqlForUpdate : MySqlSessionFixture {
  static constexpr Strategy strategy = Strategy::for_update;
};
struct MySqlAdvisory : MySqlSessionFixture {
  static constexpr Strategy strategy = Strategy::advisory;
};
#define DBLOCK_MYSQL_LEASE_FIXTURES , dblock::test::MySqlInsert, dblock::test::MySqlOptimistic
#define DBLOCK_MYSQL_SESSION_FIXTURES , dblock::test::MySqlForUpdate, dblock::test::MySqlAdvisory
#else
#define DBLOCK_MYSQL_LEASE_FIXTURES
#define DBLOCK_MYSQL_SESSION_FIXTURES
#endif

}  // namespace dblock::test

// The fixtures the contract suite runs against (macros so that test names say which):
// the lease strategies, and all of them.
#define DBLOCK_LEASE_FIXTURES \
  dblock::test::SqliteInsert, dblock::test::SqliteOptimistic DBLOCK_PG_LEASE_FIXTURES DBLOCK_MYSQL_LEASE_FIXTURES
#define DBLOCK_CONTRACT_FIXTURES DBLOCK_LEASE_FIXTURES DBLOCK_PG_SESSION_FIXTURES DBLOCK_MYSQL_SESSION_FIXTURES
