// dblock-bench on PostgreSQL: the four strategies next to bare libpqxx round trips on the
// same server, in a lock table of the run's own: SELECT 1, and for each strategy the bare
// statements it cannot avoid, on the same table.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <pqxx/pqxx>
#include <pqxx/version>

#include "backends/postgresql/pg_dialect.hpp"
#include "bench/backends/registry.hpp"
#include "bench/floors/floor.hpp"
#include "bench/floors/pg_floor.hpp"
#include "bench/scenarios/peers.hpp"
#include "bench/scenarios/txn.hpp"
#include "bench/support/util.hpp"
#include "core/validate.hpp"
#include "sql/dialect.hpp"  // drop_schema: what the migrations made

namespace dblock_bench {

using dblock::detail::sqldb::Statement;

std::optional<std::string> postgresql_skip_reason() {
  if (!env_url("DBLOCK_TEST_PG_URL"))
    return std::string("DBLOCK_TEST_PG_URL is not set (eval \"$(scripts/services env)\")");
  return std::nullopt;
}

namespace {

const dblock::Strategy kPgStrategies[] = {dblock::Strategy::insert, dblock::Strategy::optimistic,
                                          dblock::Strategy::for_update, dblock::Strategy::advisory};

// bare-insert's two statements on lock table t: an upsert that draws a fence, and a delete whose
// commit does not wait for its WAL flush, as dblock's releases (pg_dialect.cpp): a grant needs
// one flush, a release none.
std::string bare_insert_text(const std::string& t) {
  return fmt::format("INSERT INTO {0} (name, owner, fence, holds, acquired_at, valid_until, version) "
                     "VALUES ($1, 'x', nextval('{0}_fence'), 1, 0, 9e15::bigint, 1) "
                     "ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner RETURNING fence",
                     t);
}
std::string bare_delete_text(const std::string& t) {
  return fmt::format("WITH d AS (DELETE FROM {} WHERE name = $1 RETURNING name) "
                     "SELECT set_config('synchronous_commit', 'off', true) FROM d",
                     t);
}

std::string show(pqxx::connection& c, const std::string& setting) {
  pqxx::nontransaction tx(c);
  return tx.exec("SHOW " + setting).at(0).at(0).as<std::string>();
}

}  // namespace

BackendReport run_postgresql(const Options& opt) {
  const std::string url = env_url("DBLOCK_TEST_PG_URL");
  ScratchTable table("postgresql", [&url](const std::string& name) {  // dropped after everything below is gone
    pqxx::connection c(url);
    pqxx::nontransaction tx(c);
    tx.exec("SET statement_timeout = 30000");
    const auto& d = dblock::detail::sqldb::postgresql_dialect();
    tx.exec(dblock::detail::sqldb::render(d[Statement::drop_schema], dblock::detail::parse_table_name(name), d.now_ms));
  });
  dblock::ClientOptions client_options;
  client_options.table = table.name();
  client_options.auto_migrate = true;
  auto first = dblock::Client::open(url, client_options);  // creates the table
  client_options.auto_migrate = false;                      // the others find it there
  fmt::print(stderr, "dblock-bench: postgresql: lock table {} at {}\n", table.name(), first->url());

  // The baselines: a connection like dblock's (pg_session.cpp: statement_timeout, a prepared
  // statement per text, a nontransaction per statement), without dblock.
  // `aux` only draws the fence of bare-for-update+fence, which dblock's for-update strategy
  // draws on another connection of its own, in a committed transaction, while the first one
  // holds the row (pg_dialect.cpp fence_next: a draw inside the held transaction could repeat
  // after a crash).
  pqxx::connection conn(url), aux(url);
  for (auto* c : {&conn, &aux}) {
    pqxx::nontransaction tx(*c);
    tx.exec("SET statement_timeout = " + std::to_string(client_options.statement_timeout.count()));
  }
  const std::string& t = table.name();
  // dblock's own text, where a baseline is a statement dblock sends as it is.
  const auto& dialect = dblock::detail::sqldb::postgresql_dialect();
  auto dblock_text = [&](const std::string& text) {
    return dblock::detail::sqldb::render(text, dblock::detail::parse_table_name(t), dialect.now_ms);
  };
  conn.prepare("bench_select1", "SELECT 1");
  conn.prepare("bench_try_lock", "SELECT pg_try_advisory_lock($1)");
  conn.prepare("bench_unlock", "SELECT pg_advisory_unlock($1)");
  // dblock's advisory try-lock, which draws the fence in the lock's own statement.
  conn.prepare("bench_try_lock_fenced", dblock_text(dialect[Statement::advisory_try]));
  // The bare statements each strategy cannot avoid, on dblock's own lock table (same
  // indexes, same row shape), each on a name of its own.
  conn.prepare("bench_ins_insert", bare_insert_text(t));
  conn.prepare("bench_ins_delete", bare_delete_text(t));
  // The least a correct fenced lease grant sends (`bare-lease-insert`): the row's expiry on the
  // server's clock, an expired row taken over and a live one left alone, the fence drawn by
  // dblock's timeline-aware draw (fences must not repeat across a promotion) under the name's
  // turn lock (nextval runs before the conflict check: two racing grants would answer fences
  // out of order), and a release that deletes only its own grant. No queue, no busy answer,
  // no notification: what dblock's insert adds beyond this is fairness and waking waiters.
  const std::string lease_ttl = std::to_string(dblock::LockOptions{}.ttl.count());  // the default TTL, as the bench locks with
  conn.prepare("bench_lease_insert",
               dblock_text("INSERT INTO ${table} AS t (name, owner, fence, holds, acquired_at, valid_until, version) "
                           "SELECT $1, 'x', ${table}_fence_next(), 1, ${now_ms}, ${now_ms} + " + lease_ttl + ", 1 "
                           "WHERE pg_try_advisory_xact_lock(hashtextextended('${table}:' || $1, 0)) "
                           "ON CONFLICT (name) DO UPDATE SET fence = EXCLUDED.fence, owner = EXCLUDED.owner, holds = 1, "
                           "acquired_at = EXCLUDED.acquired_at, valid_until = EXCLUDED.valid_until, "
                           "version = t.version + 1 WHERE t.valid_until <= ${now_ms} RETURNING fence"));
  conn.prepare("bench_lease_delete",
               dblock_text("WITH d AS (DELETE FROM ${table} WHERE name = $1 AND owner = 'x' AND fence = $2::bigint "
                           "RETURNING name) SELECT set_config('synchronous_commit', 'off', true) FROM d"));
  // And the same for optimistic (`bare-lease-optimistic`): a compare-and-set that takes only a
  // free or expired row of the version the last release left (known without a read, as
  // dblock's optimistic knows it), under the turn lock, with the draw and the expiry, and a
  // release of its own grant that leaves the row free and answers its version.
  conn.prepare("bench_lease_opt_take",
               dblock_text("UPDATE ${table} SET owner = 'x', fence = ${table}_fence_next(), holds = 1, "
                           "acquired_at = ${now_ms}, valid_until = ${now_ms} + " + lease_ttl + ", version = version + 1 "
                           "WHERE name = $1 AND version = $2::bigint AND valid_until <= ${now_ms} "
                           "AND pg_try_advisory_xact_lock(hashtextextended('${table}:' || $1, 0)) RETURNING fence"));
  conn.prepare("bench_lease_opt_free",
               dblock_text("WITH f AS (UPDATE ${table} SET owner = '', holds = 0, valid_until = ${now_ms}, "
                           "version = version + 1 WHERE name = $1 AND owner = 'x' AND fence = $2::bigint "
                           "RETURNING version) SELECT version, set_config('synchronous_commit', 'off', true) FROM f"));
  conn.prepare("bench_opt_read", fmt::format("SELECT owner, version, valid_until FROM {} WHERE name = $1", t));
  conn.prepare("bench_opt_take", fmt::format("UPDATE {0} SET owner = 'x', version = version + 1, "
                                             "fence = nextval('{0}_fence') WHERE name = $1 AND version = $2 "
                                             "RETURNING fence",
                                             t));
  conn.prepare("bench_opt_free", fmt::format("WITH f AS (UPDATE {} SET owner = '', version = version + 1 "
                                             "WHERE name = $1 RETURNING name) "
                                             "SELECT set_config('synchronous_commit', 'off', true) FROM f",
                                             t));
  conn.prepare("bench_fu_lock", fmt::format("SELECT name FROM {} WHERE name = $1 FOR UPDATE NOWAIT", t));
  conn.prepare("bench_create_row",
               fmt::format("INSERT INTO {} (name, owner, fence, holds, acquired_at, valid_until, version) "
                           "VALUES ($1, '', 0, 0, 0, 0, 0) ON CONFLICT (name) DO NOTHING",
                           t));
  aux.prepare("bench_fence_next", dblock_text(dialect[Statement::fence_next]));
  const std::int64_t key = 0x6462'6c6f'636b'0000LL + getpid();  // "dblock" + pid: nobody else's
  const std::string insert_name = "bench-bare-insert", lease_insert_name = "bench-bare-lease-insert",
                    lease_optimistic_name = "bench-bare-lease-optimistic", optimistic_name = "bench-bare-optimistic",
                    for_update_name = "bench-bare-for-update", for_update_fenced_name = "bench-bare-for-update+fence";
  {
    pqxx::nontransaction tx(conn);  // the rows the optimistic and for-update baselines work on
    tx.exec_prepared("bench_create_row", optimistic_name);
    tx.exec_prepared("bench_create_row", lease_optimistic_name);
    tx.exec_prepared("bench_create_row", for_update_name);
    tx.exec_prepared("bench_create_row", for_update_fenced_name);
  }
  auto select1 = [&conn] {
    pqxx::nontransaction tx(conn);
    auto r = tx.exec_prepared("bench_select1");
    if (r.size() != 1 || r[0][0].as<int>() != 1) throw std::runtime_error("baseline: SELECT 1 did not return 1");
  };
  auto advisory_pair = [&conn, key] {
    {
      pqxx::nontransaction tx(conn);
      if (!tx.exec_prepared("bench_try_lock", key).at(0).at(0).as<bool>())
        throw std::runtime_error("baseline: pg_try_advisory_lock of a free key returned false");
    }
    pqxx::nontransaction tx(conn);
    if (!tx.exec_prepared("bench_unlock", key).at(0).at(0).as<bool>())
      throw std::runtime_error("baseline: pg_advisory_unlock of a held key returned false");
  };
  auto advisory_last_fence = std::make_shared<std::int64_t>(0);
  auto advisory_pair_fenced = [&conn, key, advisory_last_fence] {
    {
      pqxx::nontransaction tx(conn);
      auto fence = tx.exec_prepared("bench_try_lock_fenced", key).at(0).at(0).as<std::int64_t>();
      if (fence <= *advisory_last_fence)
        throw std::runtime_error("baseline advisory-pair+fence: the lock of a free key drew no new fence");
      *advisory_last_fence = fence;
    }
    pqxx::nontransaction tx(conn);
    if (!tx.exec_prepared("bench_unlock", key).at(0).at(0).as<bool>())
      throw std::runtime_error("baseline advisory-pair+fence: pg_advisory_unlock of a held key returned false");
  };
  auto bare_insert = [&conn, insert_name] {
    {
      pqxx::nontransaction tx(conn);
      if (tx.exec_prepared("bench_ins_insert", insert_name).size() != 1)
        throw std::runtime_error("baseline bare-insert: the upsert returned no fence");
    }
    pqxx::nontransaction tx(conn);
    if (tx.exec_prepared("bench_ins_delete", insert_name).size() != 1)
      throw std::runtime_error("baseline bare-insert: the DELETE found no row");
  };
  auto bare_lease_insert = [&conn, lease_insert_name] {
    std::int64_t fence;
    {
      pqxx::nontransaction tx(conn);
      auto r = tx.exec_prepared("bench_lease_insert", lease_insert_name);
      if (r.size() != 1) throw std::runtime_error("baseline bare-lease-insert: the grant of a free name returned no fence");
      fence = r[0][0].as<std::int64_t>();
    }
    pqxx::nontransaction tx(conn);
    if (tx.exec_prepared("bench_lease_delete", lease_insert_name, fence).size() != 1)
      throw std::runtime_error("baseline bare-lease-insert: the release found no row of ours");
  };
  auto lease_optimistic_version = std::make_shared<std::int64_t>(0);
  {
    pqxx::nontransaction tx(conn);
    *lease_optimistic_version =
        tx.exec_params("SELECT version FROM " + t + " WHERE name = $1", lease_optimistic_name).at(0).at(0).as<std::int64_t>();
  }
  auto bare_lease_optimistic = [&conn, lease_optimistic_name, v = lease_optimistic_version] {
    std::int64_t fence;
    {
      pqxx::nontransaction tx(conn);
      auto r = tx.exec_prepared("bench_lease_opt_take", lease_optimistic_name, *v);
      if (r.size() != 1) throw std::runtime_error("baseline bare-lease-optimistic: the take lost on an uncontended row");
      fence = r[0][0].as<std::int64_t>();
    }
    pqxx::nontransaction tx(conn);
    auto r = tx.exec_prepared("bench_lease_opt_free", lease_optimistic_name, fence);
    if (r.size() != 1) throw std::runtime_error("baseline bare-lease-optimistic: the release found no row of ours");
    *v = r[0][0].as<std::int64_t>();
  };
  auto bare_optimistic = [&conn, optimistic_name] {
    std::int64_t version;
    {
      pqxx::nontransaction tx(conn);
      auto r = tx.exec_prepared("bench_opt_read", optimistic_name);
      if (r.size() != 1 || r[0][0].as<std::string>() != "")
        throw std::runtime_error("baseline bare-optimistic: the row is missing or not free");
      version = r[0][1].as<std::int64_t>();
    }
    {
      pqxx::nontransaction tx(conn);
      if (tx.exec_prepared("bench_opt_take", optimistic_name, version).size() != 1)
        throw std::runtime_error("baseline bare-optimistic: the compare-and-set lost on an uncontended row");
    }
    pqxx::nontransaction tx(conn);
    if (tx.exec_prepared("bench_opt_free", optimistic_name).size() != 1)
      throw std::runtime_error("baseline bare-optimistic: the release found no row");
  };
  auto bare_for_update = [&conn, for_update_name] {
    pqxx::work tx(conn);  // BEGIN, as dblock's for-update session (pg_session.cpp begin())
    if (tx.exec_prepared("bench_fu_lock", for_update_name).size() != 1)
      throw std::runtime_error("baseline bare-for-update: SELECT ... FOR UPDATE NOWAIT found no row");
    tx.abort();  // ROLLBACK
  };
  auto last_fence = std::make_shared<std::int64_t>(0);
  auto bare_for_update_fenced = [&conn, &aux, for_update_fenced_name, last_fence] {
    pqxx::work tx(conn);
    if (tx.exec_prepared("bench_fu_lock", for_update_fenced_name).size() != 1)
      throw std::runtime_error("baseline bare-for-update+fence: SELECT ... FOR UPDATE NOWAIT found no row");
    {
      pqxx::nontransaction draw(aux);
      auto fence = draw.exec_prepared("bench_fence_next").at(0).at(0).as<std::int64_t>();
      if (fence <= *last_fence) throw std::runtime_error("baseline bare-for-update+fence: no new fence drawn");
      *last_fence = fence;
    }
    tx.abort();
  };

  BackendReport rep;
  rep.server = fmt::format("PostgreSQL {}, libpqxx {}; fsync={}, synchronous_commit={}", show(conn, "server_version"),
                           PQXX_VERSION, show(conn, "fsync"), show(conn, "synchronous_commit"));
  rep.notes.push_back(fmt::format(
      "postgresql: PostgreSQL {} at {}, libpqxx {}; server fsync={}, synchronous_commit={}; lock table {} "
      "(created for the run, dropped at the end)",
      show(conn, "server_version"), first->url(), PQXX_VERSION, show(conn, "fsync"), show(conn, "synchronous_commit"),
      table.name()));
  rep.notes.push_back(fmt::format(
      "postgresql baselines (libpqxx on one connection, prepared, a nontransaction per statement as dblock's "
      "sessions do, on the lock table `t` = {}, each on a name of its own): `select1` = `SELECT 1` (1 round trip, "
      "no commit); `advisory-pair` = `SELECT pg_try_advisory_lock($1)` + `SELECT pg_advisory_unlock($1)` (2 round "
      "trips, no commit) and `advisory-pair+fence` = `SELECT CASE WHEN pg_try_advisory_lock($1) THEN "
      "nextval('t_fence') ELSE 0 END` + the unlock (dblock's statements) for `advisory`; `bare-insert` = `INSERT INTO t (name, owner, fence, holds, acquired_at, "
      "valid_until, version) VALUES ($1, 'x', nextval('t_fence'), 1, 0, 9e15::bigint, 1) ON CONFLICT (name) DO "
      "UPDATE SET owner = EXCLUDED.owner RETURNING fence` + `DELETE FROM t WHERE name = $1` (2 round trips, 2 "
      "commits) for `insert`, the DELETE committing without waiting for its WAL flush (set_config('synchronous_commit', "
      "'off', true) in the same statement, as dblock's releases do), and `bare-lease-insert`, the least a correct "
      "fenced lease sends: `INSERT INTO t ... SELECT $1, 'x', t_fence_next(), 1, <now>, <now> + <ttl>, 1 WHERE "
      "pg_try_advisory_xact_lock(<name's turn>) ON CONFLICT (name) DO UPDATE SET ... WHERE t.valid_until <= <now> "
      "RETURNING fence` (the server's clock, an expired row taken over and a live one not, dblock's timeline-aware "
      "draw under the name's turn lock) + `DELETE FROM t WHERE name = $1 AND owner = .. AND fence = ..` (only its "
      "own grant; flush not waited for), without dblock's queue, busy answer and notification; `bare-lease-optimistic` "
      "the same for `optimistic`, the row's version known from the last release (as dblock's optimistic knows "
      "it; 2 round trips): `UPDATE t SET owner = 'x', fence = t_fence_next(), ..., valid_until = "
      "<now> + <ttl>, version = version + 1 WHERE name = $1 AND version = $2 AND valid_until <= <now> AND "
      "pg_try_advisory_xact_lock(<name's turn>) RETURNING fence` and `UPDATE t SET owner = '', holds = 0, "
      "valid_until = <now>, version = version + 1 WHERE name = $1 AND owner = .. AND fence = .. RETURNING version` "
      "(flush not waited for); `bare-optimistic` = `SELECT owner, version, valid_until FROM t WHERE name = $1` + "
      "`UPDATE t SET owner = 'x', version = version + 1, fence = nextval('t_fence') WHERE name = $1 AND version = $2 "
      "RETURNING fence` + `UPDATE t SET owner = '', version = version + 1 WHERE name = $1` (3 round trips, 2 "
      "commits, the last one not waiting for its flush as above; the row inserted before timing) for `optimistic`; `bare-for-update` = BEGIN (pqxx::work) + `SELECT "
      "name FROM t WHERE name = $1 FOR UPDATE NOWAIT` + ROLLBACK (3 round trips, no commit; the row inserted before "
      "timing) and `bare-for-update+fence` = the same with `SELECT nextval('t_fence')` on a second connection while "
      "the row is locked (4 round trips; dblock's fence draw) for `for-update`",
      t));

  ServerRun run;
  run.backend = "postgresql";
  run.url = url;
  run.client_options = client_options;
  run.first = first;
  run.strategies = {std::begin(kPgStrategies), std::end(kPgStrategies)};
  run.baselines = {{"select1", select1, {}},
                   {"advisory-pair", advisory_pair, {}},
                   {"advisory-pair+fence", advisory_pair_fenced, {}},
                   {"bare-insert", bare_insert, {}},
                   {"bare-lease-insert", bare_lease_insert, {}},
                   {"bare-optimistic", bare_optimistic, {}},
                   {"bare-lease-optimistic", bare_lease_optimistic, {}},
                   {"bare-for-update", bare_for_update, {}},
                   {"bare-for-update+fence", bare_for_update_fenced, {}}};
  run.compared_with = {{"insert", {"bare-insert", "bare-lease-insert"}},
                       {"bare-lease-insert", {"bare-insert"}},
                       {"optimistic", {"bare-optimistic", "bare-lease-optimistic"}},
                       {"bare-lease-optimistic", {"bare-optimistic"}},
                       {"for-update", {"bare-for-update", "bare-for-update+fence"}},
                       {"bare-for-update+fence", {"bare-for-update"}},
                       {"advisory", {"advisory-pair", "advisory-pair+fence"}},
                       {"advisory-pair+fence", {"advisory-pair"}}};

  // WAL syncs and commits per grant, server-wide (pg_stat_wal is PostgreSQL 14+). Backends
  // flush their counters when they exit, so the reads come once a series' clients are gone.
  if (std::stoi(show(conn, "server_version_num")) >= 140000) {
    ServerCounters& counters = run.counters;
    counters.names = {"WAL syncs", "commits"};
    counters.what =
        "server-wide deltas of pg_stat_wal.wal_sync and pg_stat_database.xact_commit over the series, the 8 "
        "clients' connection setup included, / grants";
    counters.read = [&conn] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let exiting backends report
      pqxx::nontransaction tx(conn);
      auto r = tx.exec(
          "SELECT (SELECT wal_sync FROM pg_stat_wal), "
          "(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())");
      return std::vector<double>{r.at(0).at(0).as<double>(), r.at(0).at(1).as<double>()};
    };
  }
  if (opt.wants_scenario("handoff")) {
    // The lease strategies' hand-offs are compared with it first. The session strategies
    // are handed off inside the server's lock manager: floors of their own.
    const FloorStatements lease_floor{dblock_text(dialect[Statement::insert_acquire]),
                                      dblock_text(dialect[Statement::insert_release]),
                                      dblock_text("dblock_${table}")};
    run.floors.push_back({"bare-notify-handoff", {"insert", "optimistic"},
                          [url, lease_floor](std::size_t w, std::size_t n) {
                            return run_pg_floor_handoff(url, lease_floor, w, n);
                          }});
    {
      pqxx::nontransaction tx(conn);
      tx.exec_prepared("bench_create_row", "bench-floor-for-update");
    }
    const std::vector<std::pair<SessionFloorStatements, std::string>> session_floors{
        {{"postgresql/bare-advisory-handoff", dblock_text(dialect[Statement::advisory_wait]),
          dblock_text(dialect[Statement::advisory_unlock]), "", std::to_string(key), false},
         "advisory"},
        {{"postgresql/bare-for-update-handoff", dblock_text(dialect[Statement::for_update_wait]), "",
          dblock_text(dialect[Statement::fence_next]), "bench-floor-for-update", true},
         "for-update"}};
    for (const auto& [sql, strategy] : session_floors)
      run.floors.push_back({sql.label.substr(sql.label.find('/') + 1), {strategy},
                            [url, sql = sql](std::size_t w, std::size_t n) {
                              return run_pg_session_floor_handoff(url, sql, w, n);
                            }});
  }
  auto report = run_server(std::move(run), opt);
  if (opt.wants_scenario("handoff")) {
    rep.notes.push_back(
        "postgresql `bare-advisory-handoff` and `bare-for-update-handoff`, the session strategies' hand-off floors: "
        "8 threads on libpqxx, each on a connection of its own, block in the server on one key or row with "
        "dblock's own statements, prepared, and nothing else of dblock's: `advisory_wait` (`SELECT "
        "t_fence_next() FROM (SELECT pg_advisory_lock(k)) AS locked`: the lock and the fence in one statement) "
        "and `pg_advisory_unlock(k)`; `SELECT 1 FROM t WHERE name = .. FOR UPDATE` in a transaction, then "
        "`SELECT t_fence_next()` on a second connection (as dblock draws for-update's fence), and ROLLBACK. The "
        "server's lock manager hands the lock to the next waiter; latency from the unlock call to the next "
        "grant. advisory and for-update `handoff` rows: ratio to their floor first");
    rep.notes.push_back(
        "postgresql `bare-notify-handoff`, the lease strategies' hand-off floor: 8 threads on libpqxx, each on a "
        "connection of its own, contend for one name in the run's lock table with dblock's own insert grant and "
        "release statements, prepared (the grant draws its fence under the name's turn lock and commits with its "
        "WAL flush; the release deletes and notifies without waiting for its flush), and nothing else of "
        "dblock's; one LISTEN connection wakes the longest waiting thread per notification (dblock wakes one "
        "watch per name and process too), which tries once more; no barging, latency from the release call to "
        "the next grant, as in `handoff`. insert and optimistic `handoff` rows: ratio to it first");
  }
  rep.rows = std::move(report.rows);
  rep.notes.insert(rep.notes.end(), report.notes.begin(), report.notes.end());
  if (opt.wants_scenario("txn"))
    for (auto& row : run_txn_postgresql(url, table.name(), opt)) rep.rows.push_back(std::move(row));
  // advisory-lock takes session advisory locks as the advisory strategy does; insert, the
  // default lease strategy, beside it too.
  auto peers = run_peer_scenario(
      "postgresql", url, {dblock::Strategy::advisory, dblock::Strategy::insert},
      {"advisory-lock", "advisory_lock.js", PeerRuntime::node,
       "advisoryLock(url)(name).lock() / the unlock function it answers: a connection of its own per "
       "lock(), pg_advisory_lock(k1, k2) on the name's SHA-256 (the server queues the waiters), then "
       "pg_advisory_unlock and the connection closed"},
      opt, table.name());
  rep.rows.insert(rep.rows.end(), peers.rows.begin(), peers.rows.end());
  rep.notes.insert(rep.notes.end(), peers.notes.begin(), peers.notes.end());
  return rep;
}

std::function<void()> postgresql_bare_cycle(const std::string& url, const std::string& table) {
  // The URL as given goes to libpq, which reads its ssl* parameters, as dblock's connection.
  auto c = std::make_shared<pqxx::connection>(url);
  c->prepare("bench_tls_insert", bare_insert_text(table));
  c->prepare("bench_tls_delete", bare_delete_text(table));
  return [c] {  // bare-insert: two round trips, as an uncontended lock's grant and release
    {
      pqxx::nontransaction tx(*c);
      if (tx.exec_prepared("bench_tls_insert", "bench-tls-bare").size() != 1)
        throw std::runtime_error("postgresql bare: the upsert returned no fence");
    }
    pqxx::nontransaction tx(*c);
    if (tx.exec_prepared("bench_tls_delete", "bench-tls-bare").size() != 1)
      throw std::runtime_error("postgresql bare: the DELETE found no row");
  };
}

}  // namespace dblock_bench
