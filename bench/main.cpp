// dblock-bench: what an uncontended acquire+release and a hand-off between 8 contending
// clients cost, per backend and strategy, next to bare baselines measured in the same run
// (bench/backends/: on SQLite an INSERT + DELETE pair on the same file with the same pragmas,
// on PostgreSQL and MySQL a SELECT 1 and per strategy the bare statements it cannot avoid);
// and the hand-off again with notifications off (waiters poll), to show what notifications
// buy. This file: the entry points of the run and of its worker processes, the run over the
// backends of bench/backends/registry.cpp and the cross-backend scenarios, and the report.
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
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
#include "bench/report/page.hpp"
#include "bench/report/plots.hpp"
#include "bench/scenarios/contended.hpp"
#include "bench/scenarios/peers.hpp"
#include "bench/scenarios/resources.hpp"
#include "bench/scenarios/shapes.hpp"
#include "bench/scenarios/sweep.hpp"
#include "bench/scenarios/table_size.hpp"
#include "bench/scenarios/txn.hpp"
#include "bench/support/awake.hpp"
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
  rep.server = fmt::format("SQLite {}; journal_mode={}, synchronous={} (2 = FULL: a commit waits for its fsync)",
                           sqlite3_libversion(), db.execAndGet("PRAGMA journal_mode").getString(),
                           db.execAndGet("PRAGMA synchronous").getInt());
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
  std::optional<SQLite::Statement> lease_ins, lease_del;
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
    row.shown = row.vs.size();
  }

  auto handoffs = run_handoff_scenarios("sqlite", url, client_options,
                                        {std::begin(kSqliteStrategies), std::end(kSqliteStrategies)}, opt, {bare_row});
  rep.rows.insert(rep.rows.end(), handoffs.rows.begin(), handoffs.rows.end());
  rep.notes.insert(rep.notes.end(), handoffs.notes.begin(), handoffs.notes.end());
  if (opt.wants_scenario("handoff")) {  // the hand-offs' Clients made the lock table
    Row floor{"sqlite", "bare-cv-handoff", "handoff", kHandoffWorkers,
              summarize(run_sqlite_floor_handoff(db_path, client_options.table, client_options.statement_timeout,
                                                 handoff_warmup(opt), opt.handoffs)),
              {}};
    place_floor_row(rep.rows, std::move(floor), "bare", {"insert", "optimistic"});
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

using namespace dblock_bench;

namespace {

int run(const Options& opt, const RunFacts& facts) {
  if (!opt.csv.empty()) {  // fail before minutes of work, not after
    std::ofstream probe(opt.csv, std::ios::app);
    if (!probe) throw CantCreate(fmt::format("cannot write CSV file '{}'", opt.csv));
  }
  if (!opt.markdown.empty()) try {
      probe_markdown_path(opt.markdown);
    } catch (const std::runtime_error& e) {
      throw CantCreate(e.what());
    }
  KeepAwake awake(opt.keep_awake);
  std::vector<std::string> notes{awake.note()};
  if (opt.unfair)
    notes.push_back("--unfair: the uncontended, handoff, contended and peers locks with LockOptions::fair = "
                    "false (waiters keep no place in a queue; the default is fair)");
  // Notes on the scenarios, after the backends' (known before the run: a page written
  // part-way holds them too).
  std::vector<std::string> general;
  general.push_back(fmt::format(
      "uncontended: one thread, try_acquire() then release() of one name per strategy; {} timed cycles per "
      "series, a backend's series (baselines included) interleaved in {} rotating rounds; {} warm-up cycles "
      "first and {} untimed cycles each time a series resumes; ops/s = 1e6 / mean cycle time",
      opt.iterations, interleaved_rounds(opt), opt.warmup, kRewarm));
  if (opt.wants_scenario("reentrant"))
    general.push_back(fmt::format(
        "reentrant: one thread holds a lease per strategy (its own Client) and times try_acquire() then release() "
        "of the same name again: a re-entrant hold under the outer one, which the Client counts and writes to the "
        "server's hold count (lease strategies); {} timed cycles, one strategy after the other, each with only its "
        "own outer hold",
        opt.iterations));
  if (opt.wants_scenario("handoff") || opt.wants_scenario("handoff-polling"))
    general.push_back(fmt::format(
        "handoff: {} threads, each with its own Client, contend for one name; latency = when the next holder "
        "has the lease - when the previous holder called release() (steady_clock); a thread contends again "
        "only once another one got the lease (no barging); a holder keeps the lease {} before it releases; "
        "{} timed hand-offs after {} untimed; "
        "ops/s = timed hand-offs / their span. Scenario `handoff`: the Clients as opened by default "
        "(ClientOptions.notifications = true: waiters are woken by LISTEN/NOTIFY or inotify; mysql has no "
        "notifications, so there its lease waiters poll in both scenarios); scenario `handoff-polling`: the same with every Client "
        "opened with ClientOptions.notifications = false (waiters poll with backoff). Per strategy the two run "
        "one after the other, each on a name of its own. The session strategies (for-update, advisory) wait "
        "inside the server in both",
        kHandoffWorkers, opt.hold_ms ? fmt::format("{} ms (--hold-ms)", opt.hold_ms) : std::string("0 ms"),
        opt.handoffs, handoff_warmup(opt)));
  general.push_back(
      "ratio = p50 / p50 of the `baseline` row (several baselines: one ratio each, in the same order, "
      "separated by /): uncontended sqlite strategies vs sqlite `bare / bare+fence` (insert also / "
      "`bare-lease-insert`), `bare+fence` vs `bare` and `bare-lease-insert` vs `bare / bare+fence`; uncontended "
      "postgresql strategies vs their own bare baseline(s) (insert: `bare-insert / bare-lease-insert`, optimistic: "
      "`bare-optimistic / bare-lease-optimistic`, for-update: "
      "`bare-for-update / bare-for-update+fence`, advisory: `advisory-pair / advisory-pair+fence`); uncontended "
      "mysql strategies vs their own two, without and with the fence draw, and the lease strategies also vs "
      "the least correct lease (insert: `bare-insert / bare-insert+fence / bare-lease-insert`, optimistic: "
      "`bare-optimistic / bare-optimistic+fence / bare-lease-optimistic`, for-update: `bare-for-update / bare-for-update+fence`, advisory: `getlock-pair / "
      "getlock-pair+fence`); a postgresql or mysql `...+fence` baseline vs the same baseline without it (what "
      "the fence draw costs); `bare-lease-...` vs the strategy's fenced bare baseline (postgresql `bare-insert`, "
      "`bare-optimistic`; mysql `...+fence`); etcd `etcd` vs `bare-put-delete / bare-lease-put-delete / "
      "bare-recipe`; the other postgresql, mysql and etcd baseline rows vs `select1`; handoff vs sqlite `bare` / "
      "the server backends' `select1`, the lease strategies' handoff rows (redis, zookeeper, etcd: the "
      "strategy's) first vs their backend's hand-off floor (`bare-...-handoff`, itself vs `bare` / `select1`); "
      "handoff-polling vs the same strategy's `handoff` row (`<strategy> handoff`: polling p50 / notified p50); "
      "peers-uncontended and peers-contended (hand-off p50) vs the peer library's row of the same workload. "
      "x select1 = p50 / p50 of the same backend's `select1`");
  std::vector<Row> rows;
  std::vector<std::string> servers, skipped;  // for the Markdown page's header
  auto add = [&](BackendReport rep) {
    notes.insert(notes.end(), rep.notes.begin(), rep.notes.end());
    rows.insert(rows.end(), rep.rows.begin(), rep.rows.end());
    if (!rep.server.empty() && !rep.rows.empty()) servers.push_back(rep.rows.front().backend + ": " + rep.server);
  };
  // The parts of the run, and those done: the CSV, the plots and the page are written again as
  // each part ends, so that a run stopped part-way leaves a page of what it finished, which
  // says so in its header.
  std::vector<std::string> parts, done;
  for (const auto& b : backends())
    if (opt.wants_backend(b.name)) parts.push_back(b.name);
  for (const char* s : {"table-size", "sweep"})
    if (opt.wants_scenario(s)) parts.push_back(s);
  auto write_files = [&](const std::vector<std::string>& all_notes) {
    if (!opt.csv.empty()) {
      try {
        write_csv(opt.csv, rows);
      } catch (const std::runtime_error& e) {
        throw CantCreate(e.what());
      }
      write_plots(opt.csv, rows);
    }
    if (!opt.markdown.empty()) {
      try {
        write_markdown(RunReport{facts, servers, skipped, all_notes, rows, parts, done}, opt);
      } catch (const std::runtime_error& e) {
        throw CantCreate(e.what());
      }
      fmt::print(stderr, "dblock-bench: wrote {} ({} of {} parts)\n", opt.markdown, done.size(), parts.size());
    }
  };
  auto checkpoint = [&](const std::string& part) {
    done.push_back(part);
    // The last is written at the end; a --quick run (CI's smoke, a minute) has nothing worth
    // saving part-way, and the plots take seconds of gnuplot each time.
    if (done.size() == parts.size() || opt.markdown.empty() || opt.quick) return;
    auto all_notes = notes;
    all_notes.insert(all_notes.end(), general.begin(), general.end());
    write_files(all_notes);
  };
  // Each backend of the registry when selected, unless it cannot run here (then one line
  // says why).
  for (const auto& b : backends()) {
    if (!opt.wants_backend(b.name)) continue;
    if (auto why_not = b.skip_reason()) {
      fmt::print(stderr, "skipped {}: {}\n", b.name, *why_not);
      skipped.push_back(fmt::format("{}: {}", b.name, *why_not));
      parts.erase(std::find(parts.begin(), parts.end(), b.name));
    } else {
      add(b.run(opt));
      checkpoint(b.name);
    }
  }
  // Across the backends, each on a table of its own (scenarios/table_size.cpp, scenarios/sweep.cpp).
  if (opt.wants_scenario("table-size")) add(run_table_size(opt)), checkpoint("table-size");
  if (opt.wants_scenario("sweep")) add(run_sweep(opt)), checkpoint("sweep");
  notes.insert(notes.end(), general.begin(), general.end());
  std::vector<Row> main_rows;  // table-size and sweep get tables of their own below it
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(main_rows),
               [](const Row& r) { return r.scenario != "table-size" && r.scenario != "sweep"; });
  print_markdown(notes, main_rows, polling_summary(rows));
  print_table_size_markdown(rows);
  print_sweep_markdown(rows);
  print_contended_table(rows);
  print_shapes_table(rows, opt);
  print_resources_table(rows);
  print_peers_table(rows);
  write_files(notes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A contended-scenario worker: this binary started again by run_contended_scenario.
  if (argc > 1 && std::string(argv[1]) == kContendedWorkerFlag) return contended_worker_main(argc, argv);
  // A shared / semaphore scenario worker: started again by run_shape_scenarios.
  if (argc > 1 && std::string(argv[1]) == kShapeWorkerFlag) return shape_worker_main(argc, argv);
  // A peers scenario worker on dblock's side: started again by run_peer_scenario.
  if (argc > 1 && std::string(argv[1]) == kPeerWorkerFlag) return peer_worker_main(argc, argv);
  const RunFacts facts = run_facts(argc, argv);  // the load average before the run adds to it
  Options opt;
  try {
    opt = parse_options(argc, argv);
  } catch (const UsageProblem& e) {
    fmt::print(stderr, "dblock-bench: {} (see --help)\n", e.what());
    return 64;
  }
  if (opt.help) {
    fmt::print("{}", usage_text());
    return 0;
  }
  try {
    return run(opt, facts);
  } catch (const dblock::Error& e) {
    fmt::print(stderr, "dblock-bench: dblock error: {}\n", e.what());
  } catch (const CorrectnessViolation& e) {
    fmt::print(stderr, "dblock-bench: {}\n", e.what());
    return 1;
  } catch (const CantCreate& e) {
    fmt::print(stderr, "dblock-bench: {}\n", e.what());
    return 73;
  } catch (const SQLite::Exception& e) {
    fmt::print(stderr, "dblock-bench: baseline SQLite error: {}\n", e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "dblock-bench: {}\n", e.what());
  }
  return 70;
}
