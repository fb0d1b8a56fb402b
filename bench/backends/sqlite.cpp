// dblock-bench on SQLite: the two lease strategies next to bare SQLiteCpp statements on the
// same file with the same pragmas (an INSERT + DELETE pair, the pair with dblock's fence draw,
// the least a correct fenced lease sends), in a bench dir of the run's own.
#include <sqlite3.h>
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "backends/sqlite/sqlite_dialect.hpp"
#include "bench/backends/registry.hpp"
#include "bench/floors/floor.hpp"
#include "bench/floors/sqlite_floor.hpp"
#include "bench/scenarios/txn.hpp"
#include "bench/support/run.hpp"
#include "bench/support/util.hpp"
#include "core/validate.hpp"
#include "dblock/dblock.hpp"
#include "sql/dialect.hpp"

namespace fs = std::filesystem;

namespace dblock_bench {

// SQLite needs no server: it always runs.
std::optional<std::string> sqlite_skip_reason() { return std::nullopt; }

namespace {

// The bench dir: a fresh mkdtemp dir, removed at the end, or the user's, kept.
class BenchDir {
 public:
  explicit BenchDir(const std::string& wanted) {
    std::error_code ec;
    if (!wanted.empty()) {
      fs::create_directories(wanted, ec);
      if (!fs::is_directory(wanted))
        throw CantCreate(fmt::format("cannot create directory '{}': {}", wanted, ec.message()));
      path_ = fs::absolute(wanted).string();
      return;
    }
    std::string tmpl = "/tmp/dblock-bench.XXXXXX";
    if (!mkdtemp(tmpl.data())) throw CantCreate(fmt::format("mkdtemp {} failed", tmpl));
    path_ = tmpl;
    remove_ = true;
  }
  ~BenchDir() {
    std::error_code ec;
    if (remove_) fs::remove_all(path_, ec);
  }
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool remove_ = false;
};

const dblock::Strategy kSqliteStrategies[] = {dblock::Strategy::insert, dblock::Strategy::optimistic};

}  // namespace

BackendReport run_sqlite(const Options& opt) {
  const bool uncontended = opt.wants_scenario("uncontended");
  BenchDir dir(opt.dir);  // outlives the clients and connections below
  const std::string db_path = dir.path() + "/bench.db";
  const std::string url = "sqlite:" + db_path;
  fmt::print(stderr, "dblock-bench: sqlite: {} cycles per series in {}\n", opt.iterations, db_path);

  // dblock's clients (the first migrates the file), one per strategy, each on its own name.
  dblock::ClientOptions client_options;
  std::vector<std::shared_ptr<dblock::Client>> clients;
  std::vector<Series> series;
  if (uncontended)
    for (auto strategy : kSqliteStrategies) {
      auto client = dblock::Client::open(url, client_options);
      std::string name = fmt::format("bench-uncontended-{}", dblock::to_string(strategy));
      client->force_release(name);  // a run killed on a kept --dir may have left it held
      dblock::LockOptions lock_options;
      lock_options.strategy = strategy;  // ttl 30s, auto_renew: the renewal never fires in a cycle
      lock_options.fair = !opt.unfair;
      series.push_back({std::string(dblock::to_string(strategy)), dblock_cycle(client->lock(name, lock_options)), {}});
      clients.push_back(std::move(client));
    }

  // The baseline: dblock's connection setup (sqlite_session.cpp) without dblock. It runs (and
  // gets its row) whatever the scenarios: the ratios refer to it.
  SQLite::Database db(db_path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE,
                      static_cast<int>(client_options.statement_timeout.count()));
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("PRAGMA synchronous=FULL");
  db.exec("CREATE TABLE IF NOT EXISTS bare (name TEXT NOT NULL PRIMARY KEY, v INTEGER NOT NULL)");
  db.exec("DELETE FROM bare");
  BackendReport rep;
  // The flush-off runs run this program under eatmydata (docs/BENCHMARKS.md), which makes
  // fsync return at once: the pragma then still reads FULL, so the page says so.
  const char* preload = std::getenv("LD_PRELOAD");
  const bool no_fsync = preload && std::string(preload).find("eatmydata") != std::string::npos;
  rep.server = fmt::format("SQLite {}; journal_mode={}, synchronous={} ({})", sqlite3_libversion(),
                           db.execAndGet("PRAGMA journal_mode").getString(),
                           db.execAndGet("PRAGMA synchronous").getInt(),
                           no_fsync ? "but fsync is a no-op here: eatmydata is preloaded"
                                    : "2 = FULL: a commit waits for its fsync");
  rep.notes.push_back(fmt::format(
      "sqlite: SQLite {} (sqlite3_libversion), file {}; pragmas journal_mode={}, synchronous={} (2 = FULL), "
      "busy_timeout={} ms (as read back from the baseline connection)",
      sqlite3_libversion(), db_path, db.execAndGet("PRAGMA journal_mode").getString(),
      db.execAndGet("PRAGMA synchronous").getInt(), db.execAndGet("PRAGMA busy_timeout").getInt()));
  rep.notes.push_back("sqlite baseline `bare`: prepared `INSERT INTO bare(name, v)` + `DELETE FROM bare WHERE name = ?`");
  SQLite::Statement ins(db, "INSERT INTO bare(name, v) VALUES (?, ?)");
  SQLite::Statement del(db, "DELETE FROM bare WHERE name = ?");
  const std::string bare_name = "bench-uncontended-bare";
  std::int64_t v = 0;
  auto bare_cycle = [&] {
    ins.bind(1, bare_name);
    ins.bind(2, ++v);
    ins.exec();
    ins.reset();
    del.bind(1, bare_name);
    del.exec();
    del.reset();
  };
  series.insert(series.begin(), Series{"bare", bare_cycle, {}});

  // `bare+fence`: the same pair on a table whose INSERT draws a fence as dblock's lock table
  // does (migration V1: the next value read from a one-row counter in the statement, and a
  // trigger that raises the counter to it), which a fenced lease cannot do without.
  std::optional<SQLite::Statement> fenced_ins, fenced_del;
  if (uncontended) {
    db.exec("CREATE TABLE IF NOT EXISTS bare_fenced (name TEXT NOT NULL PRIMARY KEY, fence INTEGER NOT NULL)");
    db.exec("CREATE TABLE IF NOT EXISTS bare_fence (value INTEGER NOT NULL)");
    db.exec("INSERT INTO bare_fence SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM bare_fence)");
    db.exec("CREATE TRIGGER IF NOT EXISTS bare_fence_on_insert AFTER INSERT ON bare_fenced "
            "WHEN NEW.fence > (SELECT value FROM bare_fence) BEGIN UPDATE bare_fence SET value = NEW.fence; END");
    db.exec("DELETE FROM bare_fenced");
    rep.notes.push_back(
        "sqlite baseline `bare+fence`: the same pair on a table whose prepared INSERT takes its fence from a "
        "one-row counter, `(SELECT value + 1 FROM bare_fence)`, which an AFTER INSERT trigger raises, as "
        "dblock's lock table draws fences (migration V1)");
    fenced_ins.emplace(db, "INSERT INTO bare_fenced(name, fence) VALUES (?, (SELECT value + 1 FROM bare_fence))");
    fenced_del.emplace(db, "DELETE FROM bare_fenced WHERE name = ?");
    series.insert(series.begin() + 1, Series{"bare+fence", [&] {
                                               fenced_ins->bind(1, bare_name);
                                               fenced_ins->exec();
                                               fenced_ins->reset();
                                               fenced_del->bind(1, bare_name);
                                               fenced_del->exec();
                                               fenced_del->reset();
                                             },
                                             {}});
  }
  // `bare-lease-insert`: the least a correct fenced lease grant sends, on dblock's own lock
  // table (its fence counter and trigger): an upsert that takes the name if free or expired on
  // the file's clock and leaves a live row alone, and a release of its own grant only. No
  // queue, no answer of whose turn is next: what dblock's insert adds beyond it is fairness.
  std::optional<SQLite::Statement> lease_ins, lease_del, lease_take, lease_free;
  std::int64_t take_version = 0;
  if (uncontended) {
    const auto& d = dblock::detail::sqldb::sqlite_dialect();
    const auto table = dblock::detail::parse_table_name(client_options.table);
    lease_ins.emplace(
        db, dblock::detail::sqldb::render(
                "INSERT INTO ${table} AS t (name, owner, fence, holds, acquired_at, valid_until, version) "
                "VALUES (?1, 'x', (SELECT value + 1 FROM ${table}_fence), 1, ${now_ms}, ${now_ms} + " +
                    std::to_string(dblock::LockOptions{}.ttl.count()) +
                    ", 1) ON CONFLICT (name) DO UPDATE SET fence = excluded.fence, holds = 1, "
                    "acquired_at = excluded.acquired_at, valid_until = excluded.valid_until, owner = excluded.owner, "
                    "version = t.version + 1 WHERE t.valid_until <= ${now_ms} RETURNING fence",
                table, d.now_ms));
    lease_del.emplace(db, dblock::detail::sqldb::render(
                              "DELETE FROM ${table} WHERE name = ?1 AND owner = 'x' AND fence = ?2", table, d.now_ms));
    rep.notes.push_back(
        "sqlite baseline `bare-lease-insert`, the least a correct fenced lease sends, on dblock's lock table: `INSERT "
        "INTO t ... VALUES (?1, 'x', (SELECT value + 1 FROM t_fence), 1, <now>, <now> + <ttl>, 1) ON CONFLICT (name) "
        "DO UPDATE SET ... WHERE t.valid_until <= <now> RETURNING fence` (the table's trigger raises the counter; an "
        "expired row is taken over, a live one not) + `DELETE FROM t WHERE name = ?1 AND owner = 'x' AND fence = "
        "?2` (only its own grant), prepared, without dblock's queue and its answer of whose turn is next");
    const std::string lease_name = "bench-uncontended-bare-lease";
    series.insert(series.begin() + 2, Series{"bare-lease-insert", [&, lease_name] {
                                               lease_ins->bind(1, lease_name);
                                               if (!lease_ins->executeStep())
                                                 throw std::runtime_error("sqlite bare-lease-insert: no fence");
                                               const auto fence = lease_ins->getColumn(0).getInt64();
                                               lease_ins->reset();
                                               lease_del->bind(1, lease_name);
                                               lease_del->bind(2, fence);
                                               if (lease_del->exec() != 1)
                                                 throw std::runtime_error("sqlite bare-lease-insert: no row of ours");
                                               lease_del->reset();
                                             },
                                             {}});
    // `bare-lease-optimistic`: the same for optimistic, a compare-and-set on the version the
    // last release answered (known without a read, as dblock's optimistic knows it) that takes
    // only a free or expired row, and a release of its own grant that answers the new version.
    const std::string take_name = "bench-uncontended-bare-lease-optimistic";
    db.exec(dblock::detail::sqldb::render("INSERT OR IGNORE INTO ${table} (name, owner, fence, holds, acquired_at, "
                                          "valid_until, version) VALUES ('" + take_name + "', '', 0, 0, 0, 0, 0)",
                                          table, d.now_ms));
    lease_take.emplace(
        db, dblock::detail::sqldb::render(
                "UPDATE ${table} SET owner = 'x', fence = (SELECT value + 1 FROM ${table}_fence), holds = 1, "
                "acquired_at = ${now_ms}, valid_until = ${now_ms} + " +
                    std::to_string(dblock::LockOptions{}.ttl.count()) +
                    ", version = version + 1 WHERE name = ?1 AND version = ?2 AND valid_until <= ${now_ms} "
                    "RETURNING fence",
                table, d.now_ms));
    lease_free.emplace(db, dblock::detail::sqldb::render(
                               "UPDATE ${table} SET owner = '', holds = 0, valid_until = 0, version = version + 1 "
                               "WHERE name = ?1 AND owner = 'x' AND fence = ?2 RETURNING version",
                               table, d.now_ms));
    SQLite::Statement read_version(db, dblock::detail::sqldb::render("SELECT version FROM ${table} WHERE name = ?1",
                                                                     table, d.now_ms));
    read_version.bind(1, take_name);
    if (!read_version.executeStep()) throw std::runtime_error("sqlite bare-lease-optimistic: no row");
    take_version = read_version.getColumn(0).getInt64();
    rep.notes.push_back(
        "sqlite baseline `bare-lease-optimistic`, the same for optimistic, the row's version known from the last "
        "release (as dblock's optimistic knows it): `UPDATE t SET owner = 'x', fence = (SELECT value + 1 FROM "
        "t_fence), ..., version = version + 1 WHERE name = ?1 AND version = ?2 AND valid_until <= <now> RETURNING "
        "fence` + `UPDATE t SET owner = '', holds = 0, valid_until = 0, version = version + 1 WHERE name = ?1 AND "
        "owner = 'x' AND fence = ?2 RETURNING version`, prepared, without dblock's queue and its answer of whose "
        "turn is next");
    series.insert(series.begin() + 3, Series{"bare-lease-optimistic", [&, take_name] {
                                               lease_take->bind(1, take_name);
                                               lease_take->bind(2, take_version);
                                               if (!lease_take->executeStep())
                                                 throw std::runtime_error(
                                                     "sqlite bare-lease-optimistic: the take lost on a free row");
                                               const auto fence = lease_take->getColumn(0).getInt64();
                                               lease_take->reset();
                                               lease_free->bind(1, take_name);
                                               lease_free->bind(2, fence);
                                               if (!lease_free->executeStep())
                                                 throw std::runtime_error(
                                                     "sqlite bare-lease-optimistic: no row of ours");
                                               take_version = lease_free->getColumn(0).getInt64();
                                               lease_free->reset();
                                             },
                                             {}});
  }
  run_interleaved("sqlite", series, opt);

  if (!clients.empty())
    if (auto held = clients.front()->list(); !held.empty())
      fmt::print(stderr, "dblock-bench: warning: {} sqlite lock(s) still held after the run, first '{}'\n",
                 held.size(), held.front().name);

  for (auto& s : series) rep.rows.push_back(Row{"sqlite", s.strategy, "uncontended", 1, summarize(s.samples), {}});
  const Row bare_row = rep.rows.front();
  for (auto& row : rep.rows) {
    row.vs = {compare(row, bare_row)};
    if (uncontended && &row != &rep.rows.front() && row.strategy != "bare+fence")
      row.vs.push_back(compare(row, rep.rows[1]));  // the strategies and bare-lease-insert: / bare+fence
    if (uncontended && row.strategy == "insert") row.vs.push_back(compare(row, rep.rows[2]));  // / bare-lease-insert
    if (uncontended && row.strategy == "optimistic")
      row.vs.push_back(compare(row, rep.rows[3]));  // / bare-lease-optimistic
    row.shown = row.vs.size();
  }

  // The floor runs after a strategy's series in each round: their Clients make the lock table.
  const HandoffFloor floor{"bare-cv-handoff", {"insert", "optimistic"},
                           [db_path, table = client_options.table,
                            timeout = client_options.statement_timeout](std::size_t w, std::size_t n) {
                             return run_sqlite_floor_handoff(db_path, table, timeout, w, n);
                           }};
  auto handoffs = run_handoff_scenarios("sqlite", url, client_options,
                                        {std::begin(kSqliteStrategies), std::end(kSqliteStrategies)}, opt, {bare_row},
                                        {}, {floor});
  rep.rows.insert(rep.rows.end(), handoffs.rows.begin(), handoffs.rows.end());
  rep.notes.insert(rep.notes.end(), handoffs.notes.begin(), handoffs.notes.end());
  if (opt.wants_scenario("handoff")) {
    rep.notes.push_back(
        "sqlite `bare-cv-handoff`, the hand-off floor: 8 threads on SQLiteCpp, each on a connection of its own with "
        "dblock's settings (WAL, synchronous=FULL, dblock's busy polling), contend for one name in the same file and "
        "lock table with dblock's own insert grant (one upsert that draws its fence through the table's trigger, "
        "committed with its WAL fsync) and release (one DELETE, one commit), prepared, and nothing else of dblock's; "
        "once its release returned, the releasing thread wakes the longest waiting thread through a condition "
        "variable (dblock touches a wake file that every waiting Client watches with inotify), and it tries once "
        "more; no barging, latency from the release call to the next grant, as in `handoff`. insert and optimistic "
        "`handoff` rows: ratio to it first");
  }
  add_own_table_scenarios(rep, "sqlite", url, client_options,
                          {std::begin(kSqliteStrategies), std::end(kSqliteStrategies)}, opt);
  if (opt.wants_scenario("txn"))
    for (auto& row : run_txn_sqlite(db_path, opt)) rep.rows.push_back(std::move(row));
  return rep;
}

}  // namespace dblock_bench
