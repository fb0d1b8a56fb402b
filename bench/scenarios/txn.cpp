#include "bench/scenarios/txn.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include <functional>
#include <map>
#include <stdexcept>

#include "bench/support/run.hpp"
#include "dblock/dblock.hpp"
#include "dblock/sqlite.hpp"

#ifdef DBLOCK_WITH_POSTGRESQL
#include <pqxx/pqxx>

#include "dblock/postgresql.hpp"
#endif

#ifdef DBLOCK_WITH_MYSQL
#include <cppconn/connection.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include "core/url.hpp"  // the library's own URL parser: the service's connection reaches the same server
#include "dblock/mysql.hpp"
#endif

namespace dblock_bench {

namespace {

// Interleaves the series and makes their rows, each compared with the first (bare) and, where
// `floors` names one, with its floor series too: the bare transaction with the least the
// call must add (a round trip that locks the name's row), so that the ratio says what is
// dblock's and what any lock in the transaction pays. Every series writes a new value (a
// fence in a real service): an UPDATE that changes nothing can commit without a flush,
// which would flatter it.
std::vector<Row> timed(const std::string& backend, std::vector<Series> series, const Options& opt,
                       const std::map<std::string, std::string>& floors = {}) {
  run_interleaved(backend + " txn", series, opt);
  std::vector<Row> rows;
  for (auto& s : series) rows.push_back(Row{backend, s.strategy, "txn", 1, summarize(s.samples), {}});
  for (std::size_t i = 1; i < rows.size(); ++i) {
    rows[i].vs = {compare(rows[i], rows[0])};
    auto floor = floors.find(rows[i].strategy);
    if (floor == floors.end()) continue;
    for (auto& r : rows)
      if (r.strategy == floor->second) rows[i].vs.push_back(compare(rows[i], r));
    rows[i].shown = rows[i].vs.size();
  }
  return rows;
}

// The floors' series names, and which series each is the floor of.
const std::string kSelect1 = "+select1", kLockFloor = "+lock-floor", kCheckFloor = "+check-floor";
const std::map<std::string, std::string> kFloors{{"lock_in", kLockFloor},
                                                 {"lock_in-prepared", kLockFloor},
                                                 {"check_in", kCheckFloor},
                                                 {"check_in-prepared", kCheckFloor},
                                                 {"check+update", kCheckFloor}};
const std::string kFloorName = "bench-txn-floor";  // the row the floors lock

void expect_one(std::size_t affected, const char* what) {
  if (affected != 1) throw std::runtime_error(fmt::format("txn {}: the UPDATE changed {} rows", what, affected));
}

}  // namespace

std::vector<Row> run_txn_sqlite(const std::string& path, const Options& opt) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE, 5000);
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("PRAGMA synchronous=FULL");  // as durable as dblock's own commits
  db.exec("CREATE TABLE IF NOT EXISTS txn_data (id INTEGER PRIMARY KEY, fence INTEGER NOT NULL)");
  db.exec("INSERT OR REPLACE INTO txn_data VALUES (1, 0)");
  SQLite::Statement update(db, "UPDATE txn_data SET fence = ? WHERE id = 1");
  auto write = [&](std::int64_t fence, const char* what) {
    update.bind(1, fence);
    expect_one(static_cast<std::size_t>(update.exec()), what);
    update.reset();
  };
  dblock::sqlite::LockTable locks;
  auto client = dblock::Client::open("sqlite:" + path);
  auto lease = client->lock("bench-txn-check").acquire();
  std::int64_t n = 0;
  return timed("sqlite",
               {{"bare-txn", [&] {
                   db.exec("BEGIN IMMEDIATE");
                   write(++n, "bare");
                   db.exec("COMMIT");
                 }, {}},
                {"lock_in", [&] {
                   db.exec("BEGIN IMMEDIATE");
                   if (locks.lock_in(db, "bench-txn") == 0) throw std::runtime_error("txn lock_in: no fence");
                   write(++n, "lock_in");
                   db.exec("COMMIT");
                 }, {}},
                {"check_in", [&] {
                   db.exec("BEGIN IMMEDIATE");
                   locks.check_in(db, lease);
                   write(++n, "check_in");
                   db.exec("COMMIT");
                 }, {}}},
               opt);
}

#ifdef DBLOCK_WITH_POSTGRESQL
std::vector<Row> run_txn_postgresql(const std::string& url, const std::string& table, const Options& opt) {
  pqxx::connection conn(url);
  const std::string data = table + "_txn";
  {
    pqxx::work tx(conn);
    tx.exec(fmt::format("CREATE TABLE {} (id int PRIMARY KEY, fence bigint NOT NULL)", data));
    tx.exec(fmt::format("INSERT INTO {} VALUES (1, 0)", data));
    tx.commit();
  }
  conn.prepare("bench_txn_update", fmt::format("UPDATE {} SET fence = $1 WHERE id = 1", data));
  // The floors: a round trip; a lock's least, what lock_in must take to keep every strategy
  // out (two transaction advisory try-locks, the row FOR UPDATE if no lease is live on it) and
  // a number from the table's sequence in one prepared statement, without the subtransaction
  // that lets a busy attempt let go of them; a check's least, the row FOR SHARE.
  conn.prepare("bench_txn_select1", "SELECT 1");
  conn.prepare("bench_txn_lock_floor",
               fmt::format("SELECT nextval('{0}_fence') FROM {0} WHERE name = $1 "
                           "AND pg_try_advisory_xact_lock(hashtextextended($1, 1)) "
                           "AND pg_try_advisory_xact_lock(hashtextextended('{0}:' || $1, 0)) "
                           "AND valid_until <= (extract(epoch from clock_timestamp()) * 1000)::bigint FOR UPDATE",
                           table));
  conn.prepare("bench_txn_check_floor", fmt::format("SELECT 1 FROM {} WHERE name = $1 FOR SHARE", table));
  pqxx::nontransaction(conn).exec(
      fmt::format("INSERT INTO {} (name, owner, fence, holds, acquired_at, valid_until, version) "
                  "VALUES ({}, '', 0, 0, 0, 0, 0) ON CONFLICT (name) DO NOTHING",
                  table, conn.quote(kFloorName)));
  dblock::postgresql::LockTable locks(table);
  dblock::LockTableOptions prepare;
  prepare.prepared_statements = true;
  dblock::postgresql::LockTable prepared(table, prepare);
  dblock::ClientOptions options;
  options.table = table;
  auto client = dblock::Client::open(url, options);
  auto lease = client->lock("bench-txn-check").acquire();
  std::int64_t n = 0;
  // The service's transaction: `first` in it, then the UPDATE, then COMMIT.
  auto txn = [&](const char* label, std::function<void(pqxx::work&)> first) {
    return Series{label, [&, label, first] {
                    pqxx::work tx(conn);
                    first(tx);
                    expect_one(tx.exec_prepared("bench_txn_update", ++n).affected_rows(), label);
                    tx.commit();
                  },
                  {}};
  };
  auto lock_in = [](const dblock::postgresql::LockTable& t) {
    return [&t](pqxx::work& tx) {
      if (t.lock_in(tx, "bench-txn") == 0) throw std::runtime_error("txn lock_in: no fence");
    };
  };
  auto check_in = [&lease](const dblock::postgresql::LockTable& t) {
    return [&t, &lease](pqxx::work& tx) { t.check_in(tx, lease); };
  };
  auto floor = [](const char* statement, const std::string& name = "") {
    return [statement, name](pqxx::work& tx) {
      auto r = name.empty() ? tx.exec_prepared(statement) : tx.exec_prepared(statement, name);
      if (r.size() != 1) throw std::runtime_error(fmt::format("txn floor {}: {} rows", statement, r.size()));
    };
  };
  auto rows = timed("postgresql",
                    {txn("bare-txn", [](pqxx::work&) {}), txn(kSelect1.c_str(), floor("bench_txn_select1")),
                     txn(kLockFloor.c_str(), floor("bench_txn_lock_floor", kFloorName)),
                     txn(kCheckFloor.c_str(), floor("bench_txn_check_floor", kFloorName)),
                     txn("lock_in", lock_in(locks)),
                     txn("check_in", check_in(locks)), txn("lock_in-prepared", lock_in(prepared)),
                     txn("check_in-prepared", check_in(prepared)),
                     // The check sent with the write in one round trip (a simple query with
                     // two statements), as docs/backends/postgresql.md shows for other languages.
                     {"check+update", [&] {
                        pqxx::work tx(conn);
                        tx.exec(fmt::format("SELECT {}_check({}, {}); UPDATE {} SET fence = {} WHERE id = 1", table,
                                            tx.quote(lease.name()), lease.fence(), data, ++n));
                        tx.commit();
                      }, {}}},
                    opt, kFloors);
  pqxx::nontransaction(conn).exec("DROP TABLE " + data);
  return rows;
}
#else
std::vector<Row> run_txn_postgresql(const std::string&, const std::string&, const Options&) { return {}; }
#endif

#ifdef DBLOCK_WITH_MYSQL
std::vector<Row> run_txn_mysql(const std::string& url, const std::string& table, const Options& opt) {
  // The service's own connection, as a service opens it: autocommit off (a transaction always
  // open), the server's isolation (REPEATABLE READ), several statements a round trip allowed.
  auto u = dblock::detail::parse_url(url);
  ::sql::ConnectOptionsMap o;
  o["hostName"] = ::sql::SQLString(fmt::format("tcp://{}:{}", u.hosts.empty() ? "127.0.0.1" : u.hosts[0].host,
                                               u.hosts.empty() || !u.hosts[0].port ? 3306 : u.hosts[0].port));
  o["userName"] = ::sql::SQLString(u.user);
  o["password"] = ::sql::SQLString(u.password);
  o["schema"] = ::sql::SQLString(u.path);
  o["CLIENT_MULTI_STATEMENTS"] = true;
  std::unique_ptr<::sql::Connection> conn(::sql::mysql::get_mysql_driver_instance()->connect(o));
  std::unique_ptr<::sql::Statement> stmt(conn->createStatement());
  const std::string data = table + "_txn";
  stmt->execute(fmt::format("CREATE TABLE {} (id INT PRIMARY KEY, fence BIGINT NOT NULL) ENGINE=InnoDB", data));
  stmt->execute(fmt::format("INSERT INTO {} VALUES (1, 0)", data));
  stmt->execute(fmt::format("INSERT IGNORE INTO {} (name, owner, fence, holds, acquired_at, valid_until, version) "
                            "VALUES ('{}', '', 0, 0, 0, 0, 0)",
                            table, kFloorName));
  conn->setAutoCommit(false);
  // The floors: a round trip; a lock's least, the name's row FOR UPDATE and a number from a
  // MEMORY table in the same round trip (a fence drawn in the caller's transaction could cost
  // no less: an InnoDB counter would hold every other grant until the caller's commit); a
  // check's least, the row LOCK IN SHARE MODE.
  const std::string counter = table + "_txn_counter";
  stmt->execute(fmt::format("CREATE TABLE {} (id TINYINT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=MEMORY", counter));
  stmt->execute(fmt::format("INSERT INTO {} VALUES (1, 0)", counter));
  auto floor = [&](const std::string& sql) {
    return [&, sql] {
      stmt->execute(sql);
      std::unique_ptr<::sql::ResultSet> r(stmt->getResultSet());
      if (!r || !r->next()) throw std::runtime_error("txn floor: no row from " + sql);
      while (stmt->getMoreResults() || stmt->getUpdateCount() != ~std::uint64_t{0}) {
      }
    };
  };
  auto select1 = floor("SELECT 1");
  auto lock_floor = floor(fmt::format("SELECT fence FROM {} WHERE name = '{}' FOR UPDATE; "
                                      "UPDATE {} SET v = LAST_INSERT_ID(v + 1) WHERE id = 1",
                                      table, kFloorName, counter));
  auto check_floor = floor(fmt::format("SELECT fence FROM {} WHERE name = '{}' LOCK IN SHARE MODE", table, kFloorName));
  auto write = [&](std::int64_t fence, const char* what) {
    expect_one(static_cast<std::size_t>(stmt->executeUpdate(fmt::format("UPDATE {} SET fence = {} WHERE id = 1", data,
                                                                        fence))),
               what);
  };
  dblock::ClientOptions options;
  options.table = table;
  auto client = dblock::Client::open(url, options);
  dblock::mysql::LockTable locks(client);
  auto lease = client->lock("bench-txn-check").acquire();
  std::int64_t n = 0;
  // The service's transaction: `first` in it, then the UPDATE, then COMMIT.
  auto txn = [&](const std::string& label, std::function<void()> first) {
    return Series{label, [&, label, first] {
                    first();
                    write(++n, label.c_str());
                    conn->commit();
                  },
                  {}};
  };
  auto rows = timed("mysql",
                    {txn("bare-txn", [] {}), txn(kSelect1, select1), txn(kLockFloor, lock_floor),
                     txn(kCheckFloor, check_floor),
                     txn("lock_in",
                         [&] {
                           if (locks.lock_in(*conn, "bench-txn") == 0) throw std::runtime_error("txn lock_in: no fence");
                         }),
                     txn("check_in", [&] { locks.check_in(*conn, lease); }),
                     // The check sent with the write in one round trip, as a script in another
                     // language would: the CALL's status and the UPDATE's count, read to the end.
                     {"check+update", [&] {
                        stmt->execute(fmt::format("CALL {}_check('{}', {}); UPDATE {} SET fence = {} WHERE id = 1",
                                                  table, lease.name(), lease.fence(), data, ++n));
                        std::size_t changed = 0;
                        for (int i = 0; i < 3; ++i, stmt->getMoreResults())
                          if (auto count = stmt->getUpdateCount(); count != ~std::uint64_t{0}) changed += count;
                        expect_one(changed, "check+update");
                        conn->commit();
                      }, {}}},
                    opt, kFloors);
  conn->setAutoCommit(true);
  stmt->execute(fmt::format("DROP TABLE {}, {}", data, counter));
  return rows;
}
#else
std::vector<Row> run_txn_mysql(const std::string&, const std::string&, const Options&) { return {}; }
#endif

}  // namespace dblock_bench
