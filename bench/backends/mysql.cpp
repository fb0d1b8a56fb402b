// dblock-bench on MySQL/MariaDB: the four strategies next to bare Connector/C++ round trips
// on the same server, in a lock table of the run's own: SELECT 1, and for each strategy the
// bare statements it cannot avoid, on the same table, without and with its fence draw
// (MySQL has no sequences: a lease grant bumps the <table>_fence row in its transaction, a
// session lock calls <table>_fence_draw, which reserves blocks of that counter ahead).
#include <cppconn/version_info.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "backends/mysql/mysql_backend.hpp"  // mysql_target: the tls floor reads the URL as dblock does
#include "backends/mysql/mysql_dialect.hpp"
#include "bench/backends/mysql_conn.hpp"  // Conn: a connection set up as dblock's
#include "bench/backends/registry.hpp"
#include "bench/floors/floor.hpp"
#include "bench/floors/mysql_floor.hpp"
#include "bench/scenarios/txn.hpp"
#include "bench/support/util.hpp"
#include "core/validate.hpp"
#include "sql/dialect.hpp"  // drop_schema: what the migrations made

namespace dblock_bench {

using dblock::detail::sqldb::Statement;

std::optional<std::string> mysql_skip_reason() {
  if (!env_url("DBLOCK_TEST_MYSQL_URL"))
    return std::string("DBLOCK_TEST_MYSQL_URL is not set (eval \"$(scripts/services env mysql)\")");
  return std::nullopt;
}

namespace {

const dblock::Strategy kMySqlStrategies[] = {dblock::Strategy::insert, dblock::Strategy::optimistic,
                                             dblock::Strategy::for_update, dblock::Strategy::advisory};

// SHOW GLOBAL STATUS values, in the order of `names`.
std::vector<double> global_status(Conn& c, const std::vector<std::string>& names) {
  auto lower = [](std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  std::string in;
  for (const auto& n : names) in += fmt::format("{}'{}'", in.empty() ? "" : ", ", n);
  auto rows = c.query("SHOW GLOBAL STATUS WHERE Variable_name IN (" + in + ")");
  std::vector<double> out;
  for (const auto& n : names) {
    auto it = std::find_if(rows.begin(), rows.end(),
                           [&](const auto& r) { return r.size() == 2 && lower(r[0]) == lower(n); });
    if (it == rows.end()) throw std::runtime_error("mysql: no global status variable " + n);
    out.push_back(std::stod((*it)[1]));
  }
  return out;
}

// bare-insert's statements on lock table `t`: a held row for `name` (the upsert form, so a row
// left by a killed run is taken over), and its removal.
std::string bare_insert_text(const std::string& t, const std::string& name) {
  return fmt::format(
      "INSERT INTO {} (name, owner, fence, holds, acquired_at, valid_until, version) "
      "VALUES ('{}', 'x', 0, 1, 0, 9000000000000000, 1) ON DUPLICATE KEY UPDATE owner = 'x'",
      t, name);
}
std::string bare_delete_text(const std::string& t, const std::string& name) {
  return fmt::format("DELETE FROM {} WHERE name = '{}'", t, name);
}

}  // namespace

BackendReport run_mysql(const Options& opt) {
  const std::string url = env_url("DBLOCK_TEST_MYSQL_URL");
  dblock::ClientOptions client_options;
  ScratchTable table("mysql", [&](const std::string& name) {  // dropped after everything below is gone
    Conn c(url, client_options, "drop");
    c.run("SET SESSION lock_wait_timeout = 30");  // the metadata lock: not a year
    const auto& d = dblock::detail::sqldb::mysql_dialect();
    c.run(dblock::detail::sqldb::render(d[Statement::drop_schema], dblock::detail::parse_table_name(name), d.now_ms));
  });
  client_options.table = table.name();
  client_options.auto_migrate = true;
  auto first = dblock::Client::open(url, client_options);  // creates the table
  client_options.auto_migrate = false;                      // the others find it there
  fmt::print(stderr, "dblock-bench: mysql: lock table {} at {}\n", table.name(), first->url());

  // The baselines, on connections like dblock's. `conn` sends every baseline's statements;
  // `aux` only the fence draw of bare-for-update+fence, which dblock's for-update strategy
  // makes on another connection of its own while the transaction holds the row.
  Conn conn(url, client_options, "baseline");
  Conn aux(url, client_options, "baseline (fence connection)");
  const std::string& t = table.name();
  const std::string bump = fmt::format("UPDATE {}_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1", t);
  // The session strategies' draw (<table>_fence_draw, migrations/mysql): MariaDB's sequence,
  // one durable commit per block of 1000 draws (MySQL 8: the counter's blocks of 100).
  const std::string draw = fmt::format("CALL {}_fence_draw", t);
  // The bare statements each strategy cannot avoid, on dblock's own lock table (same
  // indexes, same row shape), each baseline on a name of its own.
  auto insert_row = [&t](const std::string& name) { return bare_insert_text(t, name); };
  auto delete_row = [&t](const std::string& name) { return bare_delete_text(t, name); };
  auto take_row = [&t](const std::string& name, std::int64_t version) {
    return fmt::format(
        "UPDATE {} SET owner = 'x', holds = 1, valid_until = 9000000000000000, version = version + 1 "
        "WHERE name = '{}' AND version = {}",
        t, name, version);
  };
  auto free_row = [&t](const std::string& name) {  // only the taker's row (as dblock's release)
    return fmt::format(
        "UPDATE {} SET owner = '', holds = 0, valid_until = 0, version = version + 1 WHERE name = '{}' AND owner = 'x'",
        t, name);
  };
  auto lock_row = [&t](const std::string& name) {
    return fmt::format("START TRANSACTION; SELECT 1 FROM {} WHERE name = '{}' FOR UPDATE NOWAIT", t, name);
  };
  auto create_row = [&](const std::string& name) {  // a free row, as dblock's optimistic_create
    conn.run(fmt::format("INSERT INTO {} (name, owner, fence, holds, acquired_at, valid_until, version) "
                         "VALUES ('{}', '', 0, 0, 0, 0, 0) ON DUPLICATE KEY UPDATE name = name",
                         t, name));
    return conn.run(fmt::format("SELECT version FROM {} WHERE name = '{}'", t, name)).value.value();
  };
  const std::string get_lock_key = "dblock-bench:" + t;  // GET_LOCK names are server-wide: the table's
  const std::string get_lock = fmt::format("SELECT GET_LOCK('{}', 0)", get_lock_key),
                    get_lock_fenced = fmt::format("SET @g = GET_LOCK('{}', 0); {}(@g)", get_lock_key, draw),
                    release_lock = fmt::format("SELECT RELEASE_LOCK('{}')", get_lock_key);
  // The least a correct fenced lease grant sends (`bare-lease-insert`), in one text as
  // dblock's grant is one round trip: the fence drawn first (the counter row's lock orders the
  // draws as the grants), the row inserted, or an expired one taken over and a live one left
  // as it is, expiry on the server's clock, and the answer (the fence, or 0: busy); the
  // release deletes only its own grant. No queue, no waiters' mark, no procedure; a busy
  // attempt bumps the counter too, which dblock's grant avoids (a read of the row first).
  const std::string now_ms = dblock::detail::sqldb::mysql_dialect().now_ms;
  auto lease_grant = [&](const std::string& name) {
    const std::string expired = "valid_until <= " + now_ms;
    return fmt::format(
        "START TRANSACTION; {1}; INSERT INTO {0} (name, owner, fence, holds, acquired_at, valid_until, version) "
        "VALUES ('{2}', 'x', LAST_INSERT_ID(), 1, {3}, {3} + {4}, 1) ON DUPLICATE KEY UPDATE "
        "owner = IF({5}, VALUES(owner), owner), fence = IF({5}, VALUES(fence), fence), "
        "holds = IF({5}, 1, holds), acquired_at = IF({5}, VALUES(acquired_at), acquired_at), "
        "version = IF({5}, version + 1, version), valid_until = IF({5}, VALUES(valid_until), valid_until); "
        "SELECT IF(ROW_COUNT() > 0, LAST_INSERT_ID(), 0); COMMIT",
        t, bump, name, now_ms, dblock::LockOptions{}.ttl.count(), expired);
  };
  // And the same for optimistic (`bare-lease-optimistic`): in one text the draw and a
  // compare-and-set that takes only a free or expired row of the version the last release
  // left (known without a read, as dblock's optimistic knows it); a release of its own grant.
  auto lease_take = [&](const std::string& name, std::int64_t version) {
    return fmt::format(
        "START TRANSACTION; {1}; UPDATE {0} SET owner = 'x', fence = LAST_INSERT_ID(), holds = 1, acquired_at = {3}, "
        "valid_until = {3} + {4}, version = version + 1 WHERE name = '{2}' AND version = {5} AND valid_until <= {3}; "
        "SELECT IF(ROW_COUNT() > 0, LAST_INSERT_ID(), 0); COMMIT",
        t, bump, name, now_ms, dblock::LockOptions{}.ttl.count(), version);
  };
  const std::string insert_name = "bench-bare-insert", insert_fenced_name = "bench-bare-insert+fence",
                    lease_insert_name = "bench-bare-lease-insert", lease_optimistic_name = "bench-bare-lease-optimistic",
                    optimistic_name = "bench-bare-optimistic", optimistic_fenced_name = "bench-bare-optimistic+fence",
                    for_update_name = "bench-bare-for-update", for_update_fenced_name = "bench-bare-for-update+fence";
  // The rows the optimistic and for-update baselines work on, and the optimistic ones'
  // versions: this connection alone writes them, so it knows them without reading.
  auto optimistic_version = std::make_shared<std::int64_t>(create_row(optimistic_name));
  auto optimistic_fenced_version = std::make_shared<std::int64_t>(create_row(optimistic_fenced_name));
  auto lease_optimistic_version = std::make_shared<std::int64_t>(create_row(lease_optimistic_name));
  create_row(for_update_name);
  create_row(for_update_fenced_name);

  auto check = [](bool ok, const char* what) {
    if (!ok) throw std::runtime_error(fmt::format("mysql baseline {}", what));
  };
  auto select1 = [&] { check(conn.run("SELECT 1").value == 1, "select1: SELECT 1 did not return 1"); };
  auto getlock_pair = [&] {
    check(conn.run(get_lock).value == 1, "getlock-pair: GET_LOCK of a free name did not return 1");
    check(conn.run(release_lock).value == 1, "getlock-pair: RELEASE_LOCK of a held name did not return 1");
  };
  // RELEASE_LOCK returns 1 only to the holder: GET_LOCK worked, so the draw ran, and it
  // gave this connection a fence above any it saw before.
  auto last_fence = std::make_shared<std::int64_t>(0);
  auto getlock_pair_fenced = [&, last_fence] {
    auto fence = conn.run(get_lock_fenced).value.value_or(0);
    check(fence > *last_fence, "getlock-pair+fence: no new fence drawn");
    *last_fence = fence;
    check(conn.run(release_lock).value == 1,
          "getlock-pair+fence: RELEASE_LOCK did not return 1 (GET_LOCK of a free name failed)");
  };
  auto bare_insert = [&, ins = insert_row(insert_name), del = delete_row(insert_name)] {
    check(conn.run(ins).affected == 1, "bare-insert: the INSERT inserted no row");
    check(conn.run(del).affected == 1, "bare-insert: the DELETE found no row");
  };
  auto bare_insert_fenced = [&, ins = "START TRANSACTION; " + insert_row(insert_fenced_name) + "; " + bump + "; COMMIT",
                             del = delete_row(insert_fenced_name)] {
    conn.run(ins);
    check(conn.run(del).affected == 1, "bare-insert+fence: the DELETE found no row (the INSERT inserted none)");
  };
  auto bare_lease_insert = [&, grant = lease_grant(lease_insert_name)] {
    auto fence = conn.run(grant).value.value_or(0);
    check(fence > 0, "bare-lease-insert: the grant of a free name answered no fence");
    check(conn.run(fmt::format("DELETE FROM {} WHERE name = '{}' AND owner = 'x' AND fence = {}", t, lease_insert_name,
                               fence))
                  .affected == 1,
          "bare-lease-insert: the release found no row of ours");
  };
  auto bare_lease_optimistic = [&, v = lease_optimistic_version] {
    auto fence = conn.run(lease_take(lease_optimistic_name, *v)).value.value_or(0);
    check(fence > 0, "bare-lease-optimistic: the take lost on an uncontended row");
    check(conn.run(fmt::format("UPDATE {} SET owner = '', holds = 0, valid_until = {}, version = version + 1 "
                               "WHERE name = '{}' AND owner = 'x' AND fence = {}",
                               t, now_ms, lease_optimistic_name, fence))
                  .affected == 1,
          "bare-lease-optimistic: the release found no row of ours");
    *v += 2;
  };
  auto bare_optimistic = [&, v = optimistic_version, free = free_row(optimistic_name)] {
    check(conn.run(take_row(optimistic_name, *v)).affected == 1,
          "bare-optimistic: the compare-and-set lost on an uncontended row");
    check(conn.run(free).affected == 1, "bare-optimistic: the release found no row taken");
    *v += 2;
  };
  auto bare_optimistic_fenced = [&, v = optimistic_fenced_version, free = free_row(optimistic_fenced_name)] {
    conn.run("START TRANSACTION; " + take_row(optimistic_fenced_name, *v) + "; " + bump + "; COMMIT");
    check(conn.run(free).affected == 1,
          "bare-optimistic+fence: the release found no row taken (the compare-and-set lost on an uncontended row)");
    *v += 2;
  };
  auto bare_for_update = [&, lock = lock_row(for_update_name)] {
    check(conn.run(lock).rows == 1, "bare-for-update: SELECT ... FOR UPDATE NOWAIT found no row");
    conn.run("ROLLBACK");
  };
  auto bare_for_update_fenced = [&, lock = lock_row(for_update_fenced_name)] {
    check(conn.run(lock).rows == 1, "bare-for-update+fence: SELECT ... FOR UPDATE NOWAIT found no row");
    check(aux.run(draw + "(1)").value.value_or(0) > 0, "bare-for-update+fence: the fence draw answered no fence");
    conn.run("ROLLBACK");
  };

  BackendReport rep;
  auto server = conn.query("SELECT VERSION(), @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog").at(0);
  rep.server = fmt::format("{}, Connector/C++ {}.{}.{}; innodb_flush_log_at_trx_commit={}, log_bin={}, sync_binlog={}",
                           server.at(0), MYCPPCONN_DM_MAJOR_VERSION, MYCPPCONN_DM_MINOR_VERSION,
                           MYCPPCONN_DM_PATCH_VERSION, server.at(1), server.at(2), server.at(3));
  rep.notes.push_back(fmt::format(
      "mysql: server {} at {}, Connector/C++ {}.{}.{}; server innodb_flush_log_at_trx_commit={}, log_bin={}, "
      "sync_binlog={}; lock table {} (created for the run, dropped at the end)",
      server.at(0), first->url(), MYCPPCONN_DM_MAJOR_VERSION, MYCPPCONN_DM_MINOR_VERSION, MYCPPCONN_DM_PATCH_VERSION,
      server.at(1), server.at(2), server.at(3), table.name()));
  rep.notes.push_back(fmt::format(
      "mysql baselines (Connector/C++ sql::Statement text on one connection with dblock's connect options and "
      "session settings: multi-statements, utf8mb4, READ COMMITTED; autocommit unless said; on the lock table `t` = "
      "{0}, each on a name of its own; `bump` = `UPDATE t_fence SET value = LAST_INSERT_ID(value + 1) WHERE id = 1`, "
      "a lease grant's fence draw on MySQL 8; `draw` = `CALL t_fence_draw`, a session lock's, on MariaDB from the "
      "table's sequence, one commit per block of 1000 draws): `select1` = `SELECT 1` (1 round trip, no commit); `getlock-pair` "
      "= `SELECT GET_LOCK('k', 0)` + `SELECT RELEASE_LOCK('k')` (2 round trips, no commit) and `getlock-pair+fence` "
      "= `SET @g = GET_LOCK('k', 0); draw(@g)` (one text) + `SELECT RELEASE_LOCK('k')` (2 round trips) for "
      "`advisory`; `bare-insert` = `INSERT INTO t (name, owner, fence, holds, "
      "acquired_at, valid_until, version) VALUES (..., 1) ON DUPLICATE KEY UPDATE owner = 'x'` + `DELETE FROM t "
      "WHERE name = ...` (2 round trips, 2 commits) and `bare-insert+fence` = `START TRANSACTION; INSERT ...; bump; "
      "COMMIT` (one text) + the DELETE (2 round trips, 2 commits) and `bare-lease-insert`, the least a correct "
      "fenced lease sends, for `insert`: `START TRANSACTION; bump; INSERT ... VALUES (..., LAST_INSERT_ID(), ..., "
      "<now> + <ttl>, 1) ON DUPLICATE KEY UPDATE <each column> = IF(valid_until <= <now>, <new>, <old>); SELECT "
      "IF(ROW_COUNT() > 0, LAST_INSERT_ID(), 0); COMMIT` (one text: the fence drawn first, an expired row taken "
      "over and a live one not, the answer) + `DELETE FROM t WHERE name = ... AND owner = 'x' AND fence = N` (only "
      "its own grant), without dblock's queue, waiters' mark and procedure; `bare-lease-optimistic` the same for "
      "`optimistic`, N known from the last release (as dblock's optimistic knows it): `START TRANSACTION; bump; UPDATE t SET owner = 'x', fence = LAST_INSERT_ID(), ..., version = version + 1 "
      "WHERE name = ... AND version = N AND valid_until <= <now>; SELECT IF(ROW_COUNT() > 0, LAST_INSERT_ID(), 0); "
      "COMMIT` and the release `UPDATE t SET owner = '', ... WHERE name = ... AND owner = 'x' AND fence = N` (2 "
      "round trips); `bare-optimistic` = `UPDATE t SET "
      "owner = 'x', holds = 1, valid_until = ..., version = version + 1 WHERE name = ... AND version = N` + `UPDATE t "
      "SET owner = '', holds = 0, valid_until = 0, version = version + 1 WHERE name = ... AND owner = 'x'` (2 round "
      "trips, 2 commits; the row inserted before timing, N known to the client, where dblock reads the row first: 1 "
      "round trip more) and `bare-optimistic+fence` = `START TRANSACTION; UPDATE ... AND version = N; bump; "
      "COMMIT` (one text) + the freeing UPDATE (2 round trips, 2 commits) for `optimistic`; `bare-for-update` = "
      "`START TRANSACTION; SELECT 1 FROM t WHERE name = ... FOR UPDATE NOWAIT` (one text) + `ROLLBACK` (2 round "
      "trips, no commit; the row inserted before timing) and `bare-for-update+fence` = the same with `draw(1)` "
      "on a second connection while the row is locked (3 round trips) for `for-update`. Each "
      "strategy row is compared with its two baselines, a +fence baseline with its unfenced one",
      t));

  ServerRun run;
  run.backend = "mysql";
  run.url = url;
  run.client_options = client_options;
  run.first = first;
  run.strategies = {std::begin(kMySqlStrategies), std::end(kMySqlStrategies)};
  run.baselines = {{"select1", select1, {}},
                   {"getlock-pair", getlock_pair, {}},
                   {"getlock-pair+fence", getlock_pair_fenced, {}},
                   {"bare-insert", bare_insert, {}},
                   {"bare-insert+fence", bare_insert_fenced, {}},
                   {"bare-lease-insert", bare_lease_insert, {}},
                   {"bare-optimistic", bare_optimistic, {}},
                   {"bare-optimistic+fence", bare_optimistic_fenced, {}},
                   {"bare-lease-optimistic", bare_lease_optimistic, {}},
                   {"bare-for-update", bare_for_update, {}},
                   {"bare-for-update+fence", bare_for_update_fenced, {}}};
  run.compared_with = {{"insert", {"bare-insert", "bare-insert+fence", "bare-lease-insert"}},
                       {"bare-lease-insert", {"bare-insert+fence"}},
                       {"optimistic", {"bare-optimistic", "bare-optimistic+fence", "bare-lease-optimistic"}},
                       {"bare-lease-optimistic", {"bare-optimistic+fence"}},
                       {"for-update", {"bare-for-update", "bare-for-update+fence"}},
                       {"advisory", {"getlock-pair", "getlock-pair+fence"}},
                       {"bare-insert+fence", {"bare-insert"}},
                       {"bare-optimistic+fence", {"bare-optimistic"}},
                       {"bare-for-update+fence", {"bare-for-update"}},
                       {"getlock-pair+fence", {"getlock-pair"}}};

  // InnoDB fsyncs and commits per grant, server-wide. SHOW GLOBAL STATUS adds up the live
  // sessions' counters too; the pause lets the series' closed connections finish on the server.
  run.counters.names = {"InnoDB fsyncs", "commits"};
  run.counters.what =
      "server-wide deltas of SHOW GLOBAL STATUS Innodb_data_fsyncs (fsync() calls on redo log and data files) and "
      "Handler_commit (storage-engine commits) over the series, the 8 clients' connection setup included, / grants";
  run.counters.read = [&conn] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return global_status(conn, {"Innodb_data_fsyncs", "Handler_commit"});
  };
  if (opt.wants_scenario("handoff")) {
    // The lease strategies' hand-offs are compared with it first; the session strategies
    // are handed off inside the server (GET_LOCK, the row lock): floors of their own.
    run.floors.push_back({"bare-cv-handoff", {"insert", "optimistic"},
                          [url, client_options](std::size_t w, std::size_t n) {
                            return run_mysql_floor_handoff(url, client_options, w, n);
                          }});
    const auto& d = dblock::detail::sqldb::mysql_dialect();
    auto text = [&](Statement s, const std::vector<dblock::detail::sqldb::Value>& params) {
      return dblock::detail::sqldb::splice_params(
          dblock::detail::sqldb::render(d[s], dblock::detail::parse_table_name(t), d.now_ms), params);
    };
    create_row("bench-floor-for-update");
    const std::int64_t floor_key = 0x6462'6c6f'636b'0000LL + getpid();  // "dblock" + pid: nobody else's
    const std::vector<std::pair<SessionFloorStatements, std::string>> session_floors{
        {{"mysql/bare-advisory-handoff", "SET @dblock_wait = 60; " + text(Statement::advisory_wait, {floor_key}),
          text(Statement::advisory_unlock, {floor_key}), "", "", false},
         "advisory"},
        {{"mysql/bare-for-update-handoff",
          "START TRANSACTION; " + text(Statement::for_update_wait, {std::string("bench-floor-for-update")}),
          "ROLLBACK", text(Statement::fence_next, {}), "", true},
         "for-update"}};
    for (const auto& [sql, strategy] : session_floors)
      run.floors.push_back({sql.label.substr(sql.label.find('/') + 1), {strategy},
                            [url, client_options, sql = sql](std::size_t w, std::size_t n) {
                              return run_mysql_session_floor_handoff(url, client_options, sql, w, n);
                            }});
  }
  auto report = run_server(std::move(run), opt);
  if (opt.wants_scenario("handoff")) {
    rep.notes.push_back(
        "mysql `bare-cv-handoff`, the lease strategies' hand-off floor: 8 threads on Connector/C++, each on a "
        "connection set up as dblock's, contend for one name in the run's lock table with dblock's own insert "
        "grant (`CALL t_lease_grant(name, owner, ttl, 0)`: the UPDATE that takes the row, the fence bump and their "
        "commit, one redo log flush) and release (`UPDATE t SET owner = '', ... WHERE name = .. AND owner = .. AND "
        "fence = ..`, one commit) and nothing else of "
        "dblock's; MySQL has no notifications, so the fastest wake-up is within the process: once its release "
        "returned, the releasing thread wakes the longest waiting thread through a condition variable, and it "
        "tries once more (dblock's lease waiters, in other processes as much as in this one, poll from 1 ms); no "
        "barging, latency from the release call to the next grant, as in `handoff`. insert and optimistic `handoff` "
        "rows: ratio to it first");
    rep.notes.push_back(
        "mysql `bare-advisory-handoff` and `bare-for-update-handoff`, the session strategies' hand-off floors: 8 "
        "threads on Connector/C++, each on a connection set up as dblock's, block in the server on one key or row "
        "with dblock's own texts and nothing else of dblock's: `SET @dblock_got = GET_LOCK(k, 60); CALL "
        "t_fence_draw(@dblock_got)` (the lock and the fence in one text) and `DO RELEASE_LOCK(k)`; `START "
        "TRANSACTION; SELECT 1 FROM t WHERE name = .. FOR UPDATE`, then `CALL t_fence_draw(1)` on a second "
        "connection (as dblock draws for-update's fence), and ROLLBACK. The server hands the lock to the next "
        "waiter; latency from the unlock call to the next grant. advisory and for-update `handoff` rows: ratio "
        "to their floor first");
  }
  rep.rows = std::move(report.rows);
  rep.notes.insert(rep.notes.end(), report.notes.begin(), report.notes.end());
  if (opt.wants_scenario("txn"))
    for (auto& row : run_txn_mysql(url, table.name(), opt)) rep.rows.push_back(std::move(row));
  return rep;
}

std::function<void()> mysql_bare_cycle(const std::string& url, const std::string& table) {
  // On the library's own connection class, which reads the URL's ssl-* parameters (the
  // baselines' Conn speaks plaintext only); the same INSERT and DELETE as bare-insert.
  std::shared_ptr<dblock::detail::sqldb::Connection> c = std::make_shared<dblock::detail::sqldb::MySqlConnection>(
      dblock::detail::mysql_target(dblock::detail::parse_url(url), dblock::ClientOptions{}));
  return [c, ins = bare_insert_text(table, "bench-tls-bare"), del = bare_delete_text(table, "bench-tls-bare")] {
    if (c->run(ins).affected != 1) throw std::runtime_error("mysql bare: the INSERT inserted no row");
    if (c->run(del).affected != 1) throw std::runtime_error("mysql bare: the DELETE found no row");
  };
}

}  // namespace dblock_bench
