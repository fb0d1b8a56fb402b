// The backend x strategy combinations the contract suite runs against. A later backend
// adds its fixtures here (and to DBLOCK_CONTRACT_FIXTURES), nothing else.
//
// A fixture makes a fresh lock namespace per test (a new SQLite file; on a server, a new
// table) and tells what the strategy promises where strategies differ.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <type_traits>

#include "dblock/dblock.hpp"
#include "support/servers.hpp"
#ifdef DBLOCK_TEST_REDIS
#include "support/redis_db.hpp"
#endif
#include "support/temp_dir.hpp"

namespace dblock::test {

// Every fixture has:
//   lease_based   true: a lease (a row with a TTL, listed by Client::list, freed by expiry);
//                 false: a session lock (freed when its connection drops, not listed)
//   make()        the namespace (URL and table) of this test
//   steal(c, n)   takes lock n away from its holder behind its back: an operator's force
//                 release for leases, the holder's connection terminated for session locks
// and may have:
//   server_expires  true: the server deletes an expired lease itself (Redis key TTLs), so
//                   there is nothing for sweep() to do and it returns 0
struct SqliteFixture {
  static constexpr bool lease_based = true;
  static constexpr bool renews_in_batches = true;
  static constexpr bool offers_shared = true;  // rows of the holders table
  static constexpr bool offers_semaphore = true;
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

// A fresh, migrated table on a test server (DBLOCK_TEST_PG_URL, DBLOCK_TEST_MYSQL_URL),
// dropped afterwards.
template <ScratchTable::Server S>
struct ServerFixture {
  TempDir dir;
  ScratchTable table;
  // On the server's test URL, or the one in `variable`.
  explicit ServerFixture(const char* variable = nullptr) : table(S, variable) {}
  Namespace make() const { return table.ns(); }
};
template <ScratchTable::Server S>
struct ServerLeaseFixture : ServerFixture<S> {
  using ServerFixture<S>::ServerFixture;
  static constexpr bool lease_based = true;
  static constexpr bool renews_in_batches = true;
  void steal(Client& c, const std::string& name) const { REQUIRE(c.force_release(name)); }
};
template <ScratchTable::Server S>
struct ServerSessionFixture : ServerFixture<S> {
  static constexpr bool lease_based = false;
  void steal(Client&, const std::string& name) const {
    REQUIRE(terminate_lock_holders(this->table.url(), this->table.name(), name) > 0);
  }
};
// The SQL lease strategies keep readers and a semaphore's holders in the holders table.
template <ScratchTable::Server Server, Strategy S>
struct ServerHoldersFixture : ServerLeaseFixture<Server> {
  using ServerLeaseFixture<Server>::ServerLeaseFixture;
  static constexpr Strategy strategy = S;
  static constexpr bool offers_shared = true;
  static constexpr bool offers_semaphore = true;
};
// One fixture per server x strategy, named so that test names say which.
#define DBLOCK_SERVER_FIXTURE(Name, Kind, server, strategy_)  \
  struct Name : Kind<ScratchTable::Server::server> {          \
    static constexpr Strategy strategy = Strategy::strategy_; \
  }

#ifdef DBLOCK_TEST_POSTGRESQL
struct PgInsert : ServerHoldersFixture<ScratchTable::Server::postgresql, Strategy::insert> {};
struct PgOptimistic : ServerHoldersFixture<ScratchTable::Server::postgresql, Strategy::optimistic> {};
DBLOCK_SERVER_FIXTURE(PgForUpdate, ServerSessionFixture, postgresql, for_update);
struct PgAdvisory : ServerSessionFixture<ScratchTable::Server::postgresql> {
  static constexpr Strategy strategy = Strategy::advisory;
  static constexpr bool offers_shared = true;  // pg_advisory_lock_shared
};
// The default strategy on the TLS-only server (DBLOCK_TEST_PG_TLS_URL: sslmode=verify-full,
// the test CA and a client certificate, which its pg_hba.conf requires).
struct PgTlsInsert : ServerHoldersFixture<ScratchTable::Server::postgresql, Strategy::insert> {
  PgTlsInsert() : ServerHoldersFixture("DBLOCK_TEST_PG_TLS_URL") {}
};
// The lease strategies through PgBouncer in transaction mode (DBLOCK_TEST_PGBOUNCER_URL:
// pooler=transaction, the release listener on the server itself); the table is made, and
// looked at, on the server directly.
template <Strategy S>
struct PgBouncerFixture : ServerHoldersFixture<ScratchTable::Server::postgresql, S> {
  Namespace make() const {
    auto ns = this->table.ns();
    ns.url = server_url("DBLOCK_TEST_PGBOUNCER_URL");
    return ns;
  }
};
struct PgBouncerInsert : PgBouncerFixture<Strategy::insert> {};
struct PgBouncerOptimistic : PgBouncerFixture<Strategy::optimistic> {};
#define DBLOCK_PG_LEASE_FIXTURES                                                                            \
  , dblock::test::PgInsert, dblock::test::PgOptimistic, dblock::test::PgTlsInsert, dblock::test::PgBouncerInsert, \
      dblock::test::PgBouncerOptimistic
#define DBLOCK_PG_SESSION_FIXTURES , dblock::test::PgForUpdate, dblock::test::PgAdvisory
#define DBLOCK_PG_FAIR_SESSION_FIXTURES , dblock::test::PgAdvisory  // the lock manager's queue
#else
#define DBLOCK_PG_FAIR_SESSION_FIXTURES
#define DBLOCK_PG_LEASE_FIXTURES
#define DBLOCK_PG_SESSION_FIXTURES
#endif

#ifdef DBLOCK_TEST_MYSQL
struct MySqlInsert : ServerHoldersFixture<ScratchTable::Server::mysql, Strategy::insert> {};
struct MySqlOptimistic : ServerHoldersFixture<ScratchTable::Server::mysql, Strategy::optimistic> {};
struct MySqlForUpdate : ServerSessionFixture<ScratchTable::Server::mysql> {
  static constexpr Strategy strategy = Strategy::for_update;
  static constexpr bool offers_shared = true;  // LOCK IN SHARE MODE: InnoDB queues it behind a waiting writer
};
DBLOCK_SERVER_FIXTURE(MySqlAdvisory, ServerSessionFixture, mysql, advisory);
// The default strategy on the TLS-only server (DBLOCK_TEST_MYSQL_TLS_URL: the test CA and a
// client certificate, which its account requires).
struct MySqlTlsInsert : ServerHoldersFixture<ScratchTable::Server::mysql, Strategy::insert> {
  MySqlTlsInsert() : ServerHoldersFixture("DBLOCK_TEST_MYSQL_TLS_URL") {}
};
#define DBLOCK_MYSQL_LEASE_FIXTURES , dblock::test::MySqlInsert, dblock::test::MySqlOptimistic, dblock::test::MySqlTlsInsert
#define DBLOCK_MYSQL_SESSION_FIXTURES , dblock::test::MySqlForUpdate, dblock::test::MySqlAdvisory
#else
#define DBLOCK_MYSQL_LEASE_FIXTURES
#define DBLOCK_MYSQL_SESSION_FIXTURES
#endif

#ifdef DBLOCK_TEST_REDIS
// A fresh database per test on the test server(s) (the redis backends ignore the table).
struct RedisFixture {
  static constexpr bool lease_based = true;
  static constexpr bool server_expires = true;
  TempDir dir;
  std::string url;
  explicit RedisFixture(const char* variable) : url(with_fresh_redis_db(server_url(variable))) {}
  ~RedisFixture() { drop_redis_db(url); }
  RedisFixture(const RedisFixture&) = delete;
  RedisFixture& operator=(const RedisFixture&) = delete;
  Namespace make() const { return Namespace{url, ClientOptions{}}; }
  void steal(Client& c, const std::string& name) const { REQUIRE(c.force_release(name)); }
};
struct RedisLock : RedisFixture {
  static constexpr Strategy strategy = Strategy::redis;
  static constexpr bool offers_shared = true;     // a hash of readers, writers preferred
  static constexpr bool offers_semaphore = true;  // the same hash, at most permits holders
  RedisLock() : RedisFixture("DBLOCK_TEST_REDIS_URL") {}
};
struct Redlock : RedisFixture {
  static constexpr Strategy strategy = Strategy::redlock;
  Redlock() : RedisFixture("DBLOCK_TEST_REDLOCK_URL") {}
};
// The redis strategy on the master that three Sentinels name (DBLOCK_TEST_REDIS_SENTINEL_URL):
// the same promises, through the Sentinels' resolution.
struct SentinelLock : RedisFixture {
  static constexpr Strategy strategy = Strategy::redis;
  static constexpr bool offers_shared = true;
  static constexpr bool offers_semaphore = true;
  SentinelLock() : RedisFixture("DBLOCK_TEST_REDIS_SENTINEL_URL") {}
};
// The redis strategy on the TLS-only server (DBLOCK_TEST_REDIS_TLS_URL: rediss://, the test CA
// and a client certificate, which --tls-auth-clients requires).
struct RedisTlsLock : RedisFixture {
  static constexpr Strategy strategy = Strategy::redis;
  static constexpr bool offers_shared = true;
  static constexpr bool offers_semaphore = true;
  RedisTlsLock() : RedisFixture("DBLOCK_TEST_REDIS_TLS_URL") {}
};
#define DBLOCK_REDIS_FIXTURES \
  , dblock::test::RedisLock, dblock::test::Redlock, dblock::test::SentinelLock, dblock::test::RedisTlsLock
// The redis strategy queues its waiters (Redlock does not: docs/ARCHITECTURE.md).
#define DBLOCK_REDIS_FAIR_FIXTURES , dblock::test::RedisLock, dblock::test::SentinelLock, dblock::test::RedisTlsLock
#else
#define DBLOCK_REDIS_FIXTURES
#define DBLOCK_REDIS_FAIR_FIXTURES
#endif

template <class F, class = void>
struct server_expires : std::false_type {};
template <class F>
struct server_expires<F, std::void_t<decltype(F::server_expires)>> : std::bool_constant<F::server_expires> {};
template <class F>
inline constexpr bool server_expires_v = server_expires<F>::value;
// Whether a fresh acquire finds the owner's own leftover and replaces it with a new grant
// (lease strategies, etcd's shared lease), rather than queueing behind it (session locks).
// Whether the strategy offers shared holds (a read/write lock) and semaphores; the contract
// suite checks the others are refused by name.
template <class F, class = void>
struct offers_shared : std::false_type {};
template <class F>
struct offers_shared<F, std::void_t<decltype(F::offers_shared)>> : std::bool_constant<F::offers_shared> {};
template <class F, class = void>
struct offers_semaphore : std::false_type {};
template <class F>
struct offers_semaphore<F, std::void_t<decltype(F::offers_semaphore)>> : std::bool_constant<F::offers_semaphore> {};
// Renewals of a Client's leases due together go as one statement (RenewalBatch).
template <class F, class = void>
struct renews_in_batches : std::false_type {};
template <class F>
struct renews_in_batches<F, std::void_t<decltype(F::renews_in_batches)>> : std::bool_constant<F::renews_in_batches> {};
template <class F, class = void>
struct leftover_replaced : std::bool_constant<F::lease_based> {};
template <class F>
struct leftover_replaced<F, std::void_t<decltype(F::leftover_replaced)>> : std::bool_constant<F::leftover_replaced> {};

#ifdef DBLOCK_TEST_ZOOKEEPER
// A fresh root under the test server's (DBLOCK_TEST_ZK_URL) per test. A session lock: the
// holder's ephemeral node is not a lease row, and steal() deletes it as an operator would.
struct ZooKeeperLock {
  static constexpr bool lease_based = false;
  static constexpr Strategy strategy = Strategy::zookeeper;
  static constexpr bool offers_shared = true;     // Kazoo's ReadLock/WriteLock nodes
  static constexpr bool offers_semaphore = true;  // Kazoo's Semaphore layout
  TempDir dir;
  std::string url = server_url("DBLOCK_TEST_ZK_URL") + "/t" + std::to_string(std::random_device{}());
  Namespace make() const { return Namespace{url, ClientOptions{}}; }
  void steal(Client& c, const std::string& name) const { REQUIRE(c.force_release(name)); }
};
#define DBLOCK_ZOOKEEPER_FIXTURES , dblock::test::ZooKeeperLock
#else
#define DBLOCK_ZOOKEEPER_FIXTURES
#endif

#ifdef DBLOCK_TEST_ETCD
// A fresh key prefix on the test server (DBLOCK_TEST_ETCD_URL) per test. A session lock (the
// lock lives as long as its etcd lease, which the watchdog keeps alive): the holder's key is
// not a lease row, and steal() deletes it as an operator would.
struct EtcdLock {
  static constexpr bool lease_based = false;
  // Keys of a Client's renewed locks share its lease, so a leftover key is found and replaced.
  static constexpr bool leftover_replaced = true;
  static constexpr Strategy strategy = Strategy::etcd;
  static constexpr bool offers_shared = true;     // readers' keys beside the writers' under the prefix
  static constexpr bool offers_semaphore = true;  // the first N keys hold
  TempDir dir;
  std::string url;
  EtcdLock() : EtcdLock(server_url("DBLOCK_TEST_ETCD_URL")) {}
  Namespace make() const { return Namespace{url, ClientOptions{}}; }
  void steal(Client& c, const std::string& name) const { REQUIRE(c.force_release(name)); }

 protected:
  // The server's URL with "/t<random>" added to its path (before any query).
  explicit EtcdLock(const std::string& server) : url(server) {
    url.insert(std::min(url.find('?'), url.size()), "/t" + std::to_string(std::random_device{}()));
  }
};
// The same on the TLS-only server (DBLOCK_TEST_ETCD_TLS_URL: etcds://, the test CA, a client
// certificate, and a user and password for etcd's auth, as scripts/services env prints it).
struct EtcdTlsLock : EtcdLock {
  EtcdTlsLock() : EtcdLock(server_url("DBLOCK_TEST_ETCD_TLS_URL")) {}
};
#define DBLOCK_ETCD_FIXTURES , dblock::test::EtcdLock, dblock::test::EtcdTlsLock
#else
#define DBLOCK_ETCD_FIXTURES
#endif

// What a contract test body sees of its fixture, at run time.
struct Contract {
  Strategy strategy;
  bool lease_based;
  bool server_expires;
  bool leftover_replaced;
  bool offers_shared;
  bool offers_semaphore;
  bool renews_in_batches;
  std::string dir;  // a scratch directory of this test
  std::function<Namespace()> make;
  std::function<void(Client&, const std::string&)> steal;
};
template <class F>
Contract contract_of(F& fixture) {
  return Contract{F::strategy,
                  F::lease_based,
                  server_expires_v<F>,
                  leftover_replaced<F>::value,
                  offers_shared<F>::value,
                  offers_semaphore<F>::value,
                  renews_in_batches<F>::value,
                  fixture.dir.path(),
                  [&fixture] { return fixture.make(); },
                  [&fixture](Client& c, const std::string& name) { fixture.steal(c, name); }};
}

}  // namespace dblock::test

// CONTRACT_TEST(name, tags, fixtures...) { body using `f`, a const Contract& }: one Catch
// test case per fixture (named by it, which the ctest filters select on) whose body is one
// ordinary function. Instantiating the bodies per fixture made this the slowest file to build.
#define DBLOCK_CONTRACT_CONCAT2(a, b) a##b
#define DBLOCK_CONTRACT_CONCAT(a, b) DBLOCK_CONTRACT_CONCAT2(a, b)
#define CONTRACT_TEST(name, tags, ...) \
  CONTRACT_TEST_IMPL(DBLOCK_CONTRACT_CONCAT(contract_body_, __LINE__), name, tags, __VA_ARGS__)
#define CONTRACT_TEST_IMPL(body, name, tags, ...)                    \
  static void body(const dblock::test::Contract& f);                 \
  TEMPLATE_TEST_CASE(name, tags, __VA_ARGS__) {                      \
    TestType fixture;                                                \
    body(dblock::test::contract_of(fixture));                        \
  }                                                                  \
  static void body(const dblock::test::Contract& f)

// The fixtures the contract suite runs against (macros so that test names say which):
// the lease strategies swept by sweep() (SQL), and all of them.
#define DBLOCK_LEASE_FIXTURES \
  dblock::test::SqliteInsert, dblock::test::SqliteOptimistic DBLOCK_PG_LEASE_FIXTURES DBLOCK_MYSQL_LEASE_FIXTURES
// The strategies whose waiters are granted in arrival order: the lease strategies with a
// ticket queue (LockOptions::fair), and those that queue in the server. Not for-update, which
// makes no such claim: its grants went unevenly with 64 workers (Jain 0.89, docs/BENCHMARKS.md).
#define DBLOCK_FAIR_FIXTURES                                                                   \
  dblock::test::SqliteInsert, dblock::test::SqliteOptimistic DBLOCK_PG_LEASE_FIXTURES DBLOCK_PG_FAIR_SESSION_FIXTURES \
      DBLOCK_MYSQL_LEASE_FIXTURES DBLOCK_REDIS_FAIR_FIXTURES DBLOCK_ZOOKEEPER_FIXTURES DBLOCK_ETCD_FIXTURES
#define DBLOCK_CONTRACT_FIXTURES \
  DBLOCK_LEASE_FIXTURES DBLOCK_PG_SESSION_FIXTURES DBLOCK_MYSQL_SESSION_FIXTURES DBLOCK_REDIS_FIXTURES \
      DBLOCK_ZOOKEEPER_FIXTURES DBLOCK_ETCD_FIXTURES
