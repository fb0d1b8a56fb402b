#include "bench/support/util.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "bench/backends/registry.hpp"  // backend_names

namespace dblock_bench {

const char* usage_text() {
  return "usage: dblock-bench [--quick] [--iterations N] [--handoffs N] [--hold-ms N]\n"
         "                    [--shape-hold-ms N] [--shape-polling] [--backend NAME]...\n"
         "                    [--scenario NAME]...\n"
         "                    [--dir DIR] [--csv FILE] [--markdown FILE] [--keep-awake]\n"
         "                    [--unfair]\n"
         "                    [--workers N,...]\n"
         "\n"
         "Backends: sqlite (always), postgresql (when built with libpqxx and DBLOCK_TEST_PG_URL\n"
         "is set), mysql (when built with mysql-connector-c++ and DBLOCK_TEST_MYSQL_URL is set);\n"
         "a backend that cannot run gives one line 'skipped BACKEND: REASON' on stderr. The\n"
         "postgresql and mysql runs use a fresh lock table with a unique name, dropped at the end.\n"
         "etcd (when built with the etcd bridge and DBLOCK_TEST_ETCD_URL is set) runs under a key\n"
         "prefix of its own: baselines `select1` (a Range), `bare-put-delete` (Put under a lease\n"
         "granted once + DeleteRange), `bare-lease-put-delete` (LeaseGrant + Put + DeleteRange +\n"
         "LeaseRevoke), `bare-recipe` (the lock recipe's two Txns: put-if-absent with the first\n"
         "key's read, compare-and-delete), and for handoff `bare-watch-handoff` (etcd's lock\n"
         "recipe on raw gRPC).\n"
         "\n"
         "Scenarios:\n"
         "  uncontended  acquire+release cycles of one lock name (try_acquire() then release())\n"
         "               for each strategy (sqlite: insert, optimistic; postgresql and mysql:\n"
         "               insert, optimistic, for-update, advisory), against baselines measured in\n"
         "               the same run: sqlite `bare` (a prepared INSERT + DELETE pair on its own\n"
         "               table, same file and pragmas) and `bare+fence` (the INSERT drawing a\n"
         "               fence from a counter row as dblock's table does); postgresql and mysql\n"
         "               `select1` (a SELECT 1\n"
         "               round trip) and per strategy the bare statements it cannot avoid, on\n"
         "               dblock's lock table. postgresql (libpqxx, prepared): `bare-insert`\n"
         "               (INSERT ... ON CONFLICT + DELETE), `bare-optimistic` (SELECT + UPDATE ...\n"
         "               AND version = $2 + UPDATE), `bare-for-update` (BEGIN, SELECT ... FOR\n"
         "               UPDATE NOWAIT, ROLLBACK) and `bare-for-update+fence` (the same with a\n"
         "               nextval on a second connection while the row is locked, as dblock\n"
         "               draws it), `advisory-pair` (pg_try_advisory_lock +\n"
         "               pg_advisory_unlock) and `advisory-pair+fence` (dblock's try-lock,\n"
         "               which draws a nextval in its statement, + the unlock). mysql\n"
         "               (Connector/C++, text): `bare-insert` (INSERT + DELETE),\n"
         "               `bare-optimistic` (UPDATE ... AND version = N + UPDATE),\n"
         "               `bare-for-update` (START TRANSACTION; SELECT ... FOR UPDATE NOWAIT, then\n"
         "               ROLLBACK), `getlock-pair` (GET_LOCK + RELEASE_LOCK), and each again as\n"
         "               `...+fence` with the fence draw that a grant makes (the counter row\n"
         "               bumped in the INSERT's or the UPDATE's transaction; a CALL of the\n"
         "               block-reserving draw on a second connection while the row is locked,\n"
         "               or after GET_LOCK in the same text).\n"
         "               The lease strategies also against `bare-lease-insert` and\n"
         "               `bare-lease-optimistic` (sqlite, postgresql, mysql):\n"
         "               the least a correct fenced lease sends (the name taken only when free\n"
         "               or expired on the server's clock, the fence drawn in the grants'\n"
         "               order, a release of its own grant only; no queue, no wake-up).\n"
         "               Each strategy is compared with its own baseline(s) and with select1.\n"
         "               The series of a backend are interleaved (at least 3 rounds, at most 50\n"
         "               timed cycles of a series in a row, the order rotated each round) and\n"
         "               each series' samples pooled.\n"
         "  reentrant    per strategy, one more hold of a lock the thread already holds\n"
         "               (try_acquire() then release() under an outer hold), one strategy after\n"
         "               the other, compared with the same baseline as the hand-offs.\n"
         "  handoff      8 threads, each with its own Client, loop on acquiring one lock name;\n"
         "               hand-off latency = when the next holder got the lease - when the\n"
         "               previous holder started release(). Compared with the sqlite `bare` and\n"
         "               the postgresql and mysql `select1` p50 (the baselines are measured\n"
         "               whenever their backend runs). Beside them each backend's hand-off\n"
         "               floor: the same measurement written directly on the driver with\n"
         "               dblock's grant and release and the backend's fastest wake-up, and\n"
         "               nothing else of dblock's: postgresql `bare-notify-handoff` (one\n"
         "               LISTEN connection), mysql and sqlite `bare-cv-handoff` (the releasing\n"
         "               thread wakes the next through a condition variable), redis\n"
         "               `bare-pubsub-handoff` (SET NX PX + INCR, compare + DEL + PUBLISH, one\n"
         "               subscriber), zookeeper and etcd `bare-watch-handoff` (the lock recipe:\n"
         "               a sequential node, a watch on the one before). The lease strategies'\n"
         "               handoff rows (redis, zookeeper, etcd: the strategy's) are compared with\n"
         "               the floor first. A fence that does not increase, in dblock's hand-offs\n"
         "               or a floor's, stops the run with exit status 1.\n"
         "  handoff-async  in the handoff rounds, each strategy's series once more with\n"
         "               every wait through Lock::async_acquire, the grant timed when its\n"
         "               callback runs, and once more with a blocking acquire whose grant\n"
         "               is handed to another thread and timed there (handoff-hop: what an\n"
         "               event thread's hop costs alone); compared with the same strategy's\n"
         "               handoff p50, and async with hop.\n"
         "  handoff-polling  the same with every Client opened with notifications = false\n"
         "               (waiters poll with backoff instead of being woken by LISTEN/NOTIFY,\n"
         "               inotify or Redis pub/sub; mysql's lease waiters poll in both);\n"
         "               compared with the same strategy's handoff p50 (when that ran), and a\n"
         "               line per strategy under the table gives polling / notified.\n"
         "  contended    1, 4, 8, 16 and 64 workers (--quick: 1 and 4) on ONE name per strategy:\n"
         "               threads spread over worker processes (this binary started again), each\n"
         "               with its own Client, loop for 3 s (--quick: 0.3 s) on try_acquire (up to\n"
         "               60 s) + release at once. Reports grants/s, the wait (asking -> holding)\n"
         "               p50 and p99, grants per worker min..max and Jain's fairness index, in a\n"
         "               table of its own; ratio = wait p50 / the same strategy's uncontended p50.\n"
         "               Each holder bumps a shared counter in a file (read, +1, write) and\n"
         "               checks its fence is above the last one: a lost increment or a fence\n"
         "               that does not increase stops the run with exit status 1.\n"
         "  shared       per strategy that offers read/write locks (others: a line on stderr and\n"
         "               a note), 8 workers on ONE name, threads spread over 2 worker processes\n"
         "               (4 each), each with its own Client, each looping on acquire (up to 60 s),\n"
         "               hold 2 ms (--shape-hold-ms), release: 8 exclusive lockers (the baseline,\n"
         "               also the semaphore's), 8 readers, and 7 readers beside 1 writer. Reports\n"
         "               grants/s, the wait (asking -> holding) p50 and p99, release p50 and\n"
         "               grants per worker min..max in a table of its own; ratio = grants/s /\n"
         "               the 8 exclusive lockers' grants/s. The series of a strategy run in\n"
         "               rounds (3 of 1 s; --quick: 1 of 0.3 s), their order rotated each round.\n"
         "               Holders count themselves in a shared memory map: a reader beside a\n"
         "               writer, two writers at once, or a writer's fence not above every fence\n"
         "               seen before stops the run with exit status 1.\n"
         "  semaphore    the same for strategies that offer semaphores: 8 workers on a\n"
         "               semaphore of 4 permits (more than 4 holders at once is a violation),\n"
         "               against the same 8 exclusive lockers.\n"
         "  resources    one Client holds 100 locks (--quick: 20) on different names at once\n"
         "               per strategy: connections per held lock (postgresql: pg_stat_activity\n"
         "               rows of the user and database; mysql: Threads_connected; redis and\n"
         "               redlock: CLIENT LIST lines; zookeeper: the process's socket fds; sqlite:\n"
         "               the process's open fds) and RSS bytes per held lock, each the growth\n"
         "               from before the first acquire; a table of its own.\n"
         "  table-size   the uncontended cycle of every backend and strategy with 1, 10 000 and\n"
         "               1 000 000 other live leases (valid 1 h) already in the table or key space\n"
         "               (zookeeper: 1, 1 000, 10 000 children of the root; --quick: the first two\n"
         "               counts), filled in bulk before each timed part (INSERT ... SELECT from\n"
         "               generate_series / a recursive CTE / MariaDB's seq_1_to_N; pipelined SET +\n"
         "               HSET; asynchronous creates) in a table, key namespace or root of its own\n"
         "               (bench_tablesize), removed at the end. Compared with the same strategy at 1\n"
         "               other row; shown in a Markdown table of its own.\n"
         "  sweep        SQL backends, lease strategies (insert, optimistic): 200 000 (--quick:\n"
         "               5 000) expired rows put in a table of its own (bench_sweep), then one\n"
         "               Client::sweep() (batches of 1000): rows removed per second, and the p50 / p99\n"
         "               of 4 threads cycling names of their own during the sweep against the same\n"
         "               threads without one (ratio on p99). redis, redlock, zookeeper: n/a (the\n"
         "               server expires keys / ephemeral nodes go with their session).\n"
         "  txn          sqlite, postgresql and mysql: a transaction of the service's own that\n"
         "               updates one row (BEGIN IMMEDIATE / pqxx::work / autocommit off, UPDATE,\n"
         "               COMMIT): `bare-txn`, then\n"
         "               the same with LockTable::lock_in first (`lock_in`), and with check_in of\n"
         "               a lease held across the run first (`check_in`); postgresql also both\n"
         "               with LockTableOptions::prepared_statements (`lock_in-prepared`,\n"
         "               `check_in-prepared`) and the check sent with the UPDATE in one simple\n"
         "               query (`check+update`), mysql the latter; all compared with bare-txn,\n"
         "               interleaved like uncontended. postgresql and mysql also time the floors,\n"
         "               the bare transaction with the least a call must add: `+select1` (a\n"
         "               round trip), `+lock-floor` (the name's row FOR UPDATE and a number\n"
         "               drawn in the same round trip: postgresql one prepared statement that\n"
         "               also takes lock_in's two advisory try-locks and nextval, mysql with an\n"
         "               UPDATE of a MEMORY table) and `+check-floor`\n"
         "               (the row FOR SHARE / LOCK IN SHARE MODE); lock_in is compared with the\n"
         "               lock floor too, check_in and check+update with the check floor.\n"
         "  peers        postgresql, redis, redlock, zookeeper and etcd: dblock beside the library a\n"
         "               user would pick instead, on the same server: the npm package advisory-lock\n"
         "               beside the postgresql advisory and insert strategies, redis-py's\n"
         "               redis.lock.Lock beside redis, @sesamecare-oss/redlock (npm) beside\n"
         "               redlock, Kazoo's kazoo.recipe.lock.Lock beside zookeeper, python-etcd3's\n"
         "               etcd3.Lock beside etcd. The peers are scripts in the build tree's\n"
         "               bench/peers (installed: share/dblock/bench/peers beside the binary's\n"
         "               directory; or $DBLOCK_BENCH_PEERS_DIR), run by the Python and Node.js\n"
         "               the bench was built with (DBLOCK_BENCH_PYTHON, DBLOCK_BENCH_NODE), the npm\n"
         "               packages installed there by the build (npm ci); a peer that cannot run\n"
         "               gives a note saying \"not run:\", not a failure. All sides run as worker\n"
         "               processes, taking turns: `peers-uncontended` = 1\n"
         "               process, --iterations acquire + release cycles (p50, p99);\n"
         "               `peers-contended` = 6 processes, one client each, on one name for 3 s\n"
         "               (--quick: 0.3 s), each holding 1 ms: grants/s, hand-off p50 and p99 (the\n"
         "               previous holder's release to the next holder's grant in another process,\n"
         "               both stamped with CLOCK_MONOTONIC) and Jain's index over the grants per\n"
         "               process; overlapping holds stop the run with exit status 1. ratio = dblock\n"
         "               p50 / the peer's p50; a table of its own sums the pairs up.\n"
         "  tls          postgresql, mysql, redis and etcd: the natural strategy's uncontended\n"
         "               cycle (interleaved) and hand-off (8 threads, each side twice, alternating)\n"
         "               in plaintext to the plain test server and over TLS to its TLS twin\n"
         "               (DBLOCK_TEST_{PG,MYSQL,REDIS,ETCD}_TLS_URL: scripts/services'\n"
         "               postgresql-tls, mysql-tls, redis-tls, etcd-tls), on warm connections;\n"
         "               ratio = TLS p50 / plaintext p50, in a table of its own.\n"
         "  pooler       postgresql's insert and optimistic: the uncontended cycle, the hand-off and\n"
         "               8 contended worker processes (exclusion and fence order checked),\n"
         "               connecting directly and through PgBouncer in transaction mode\n"
         "               (DBLOCK_TEST_PGBOUNCER_URL: scripts/services' pgbouncer); ratio =\n"
         "               through the pooler p50 / direct p50, in a table of its own.\n"
         "  scale        postgresql, mysql, sqlite and redis: one Client holds N = 1 .. 10,000\n"
         "               locks (--quick: up to 1,000) per strategy (lease strategies and advisory)\n"
         "               with a 3 s TTL (--quick 1.5 s): acquire p50/p99 and grants/s, then over a\n"
         "               5 s hold (--quick 2 s) the server's connections, statements/s, log bytes\n"
         "               per held lock per minute and CPU, beside `bare-renew` (one UPDATE per\n"
         "               lease per tick, postgresql and mysql); and 1 to 128 worker processes\n"
         "               (--quick: 1, 8; capped by the server's connection limit) acquiring and\n"
         "               releasing `insert` locks on 1 or 4P names: grants/s, wait p50/p99, peak\n"
         "               connections, statements/s, CPU per grant, errors; and one Client's\n"
         "               asynchronous waits: 10,000 on 4 names and 1,000 on 1,000 names (mysql: the\n"
         "               first; --quick: 1,000 on 4): time to grant them all, this process's threads\n"
         "               and sockets and the server's connections more at the most, errors\n"
         "               (failed, or out of arrival or fence order); three tables of their own.\n"
         "\n"
         "  --quick           a smoke test: 300 cycles per series, 40 hand-offs (unless given)\n"
         "  --iterations N    timed cycles per uncontended series (default 5000)\n"
         "  --handoffs N      timed hand-offs per handoff series (default 400)\n"
         "  --hold-ms N       a hand-off holder keeps the lease N ms before it releases, so the\n"
         "                    waiters have been waiting (polling ones backing off) when it goes\n"
         "                    (default: it releases at once)\n"
         "  --shape-hold-ms N how long a shared / semaphore scenario holder keeps its grant\n"
         "                    before it releases (default 2; 0: at once)\n"
         "  --shape-polling   open the shared / semaphore scenarios' Clients with\n"
         "                    notifications = false (waiters poll with backoff), to tell what\n"
         "                    the wake-ups do to the line-ups\n"
         "  --keep-awake      keep one vCPU from sleeping for the run (a thread spinning at\n"
         "                    SCHED_IDLE): on a VM each reply to a sleeping vCPU waits for it\n"
         "                    to wake; the report says whether this was on\n"
         "  --unfair          the uncontended, handoff, contended and peers scenarios' locks\n"
         "                    with LockOptions::fair = false: waiters keep no place in a\n"
         "                    queue, whoever asks first after a release wins (default: fair)\n"
         "  --workers N,...   the contended scenario's worker counts (default 1,4,8,16,64;\n"
         "                    --quick: 1,4), each 1 to 64\n"
         "  --backend NAME    only these backends (repeatable or comma-separated)\n"
         "  --scenario NAME   only these scenarios (repeatable or comma-separated)\n"
         "  --skip-scenario NAME  every scenario (or those --scenario names) but these\n"
         "  --dir DIR         where to put bench.db and the table-size/ and sweep/ SQLite files\n"
         "                    (created if missing, kept); default: a fresh\n"
         "                    mkdtemp dir under /tmp, removed at the end\n"
         "  --csv FILE        also write rows: backend,strategy,scenario,workers,ops_per_s,\n"
         "                    p50_us,p99_us,baseline,ratio, one per row per baseline it is\n"
         "                    compared with (baseline: the strategy column of the baseline row;\n"
         "                    ratio: p50 / baseline p50, on sweep rows p99 / baseline p99, on\n"
         "                    exclusive, shared and semaphore rows grants/s / baseline grants/s; a row\n"
         "                    without a baseline: one line, both empty), then fairness (contended:\n"
         "                    Jain's index), connections_per_lock and bytes_per_lock (resources;\n"
         "                    their workers = locks held, ops_per_s, p50_us and p99_us 0) and\n"
         "                    table_rows (table-size and sweep), holders and release_p50_us (exclusive,\n"
         "                    shared, semaphore), server_connections, statements_per_s,\n"
         "                    log_bytes_per_lock_min, cpu_us_per_grant, cpu_share, names and\n"
         "                    errors (scale-held, scale-processes, scale-async; the first's ratio:\n"
         "                    statements/s / the bare-renew row's), threads_more and sockets_more\n"
         "                    (scale-async), empty in other scenarios' rows.\n"
         "                    Next to FILE (less its .csv) also the plots FILE-uncontended.png (p50\n"
         "                    and p99 per backend/strategy, baselines included), FILE-contended.png\n"
         "                    (grants/s by workers, from `contended` rows), FILE-table-size.png\n"
         "                    (p50 by other rows present), FILE-shapes.png (grants/s per\n"
         "                    holders, from exclusive, shared and semaphore rows) and FILE-peers.png\n"
         "                    (dblock beside each peer: uncontended p50, hand-off p50, grants/s,\n"
         "                    Jain), FILE-scale-statements.png and FILE-scale-grants.png (scale:\n"
         "                    server statements/s and grants/s by held locks), drawn by gnuplot\n"
         "                    (Debian: gnuplot-nox);\n"
         "                    without gnuplot a line on stderr says they were skipped\n"
         "  --markdown FILE   also write the run as a Markdown page (docs/BENCHMARKS.md is one):\n"
         "                    the date, commit, machine, load, server versions and settings and\n"
         "                    this command at its top, then a compact table per scenario with\n"
         "                    how to read it, and the plots of --csv; written when the run ends\n"
         "  --help            this text\n"
         "\n"
         "Prints a Markdown table on stdout (contended, shared + semaphore, resources and peers: a\n"
         "table each) and progress\n"
         "on stderr. Exit status: 0 success, 1 a correctness violation under contention, 64 bad\n"
         "options, 70 a dblock or database error, 73 the CSV or DIR cannot be created.\n";
}

namespace {

std::size_t parse_count(std::string_view opt, const std::string& text, unsigned long long min = 1,
                        unsigned long long max = 100'000'000ULL) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageProblem(
        fmt::format("{} wants a {} integer, not '{}'", opt, min > 0 ? "positive" : "non-negative", text));
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < min || v > max)
    throw UsageProblem(fmt::format("{} wants an integer from {} to {}, not '{}'", opt, min, max, text));
  return static_cast<std::size_t>(v);
}

// "a,b" and repeated options accumulate; each name must be one of `known`.
void add_names(std::string_view opt, const std::string& text, const std::vector<std::string>& known,
               std::vector<std::string>& out) {
  std::size_t begin = 0;
  for (;;) {
    auto comma = text.find(',', begin);
    std::string name = text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw UsageProblem(fmt::format("{}: unknown name '{}' (known: {})", opt, name, list));
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
}

}  // namespace

bool Options::wants_backend(const std::string& name) const {
  return backends.empty() || std::find(backends.begin(), backends.end(), name) != backends.end();
}

bool Options::wants_scenario(const std::string& name) const {
  auto in = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), name) != v.end(); };
  return (scenarios.empty() || in(scenarios)) && !in(skipped_scenarios);
}

Options parse_options(int argc, char** argv) {
  Options o;
  std::optional<std::size_t> iterations, handoffs;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) throw UsageProblem(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    auto no_value = [&] {
      if (inline_value) throw UsageProblem(fmt::format("{} takes no value", arg));
    };
    if (arg == "--help" || arg == "-h") no_value(), o.help = true;
    else if (arg == "--quick") no_value(), o.quick = true;
    else if (arg == "--iterations") iterations = parse_count(arg, value());
    else if (arg == "--handoffs") handoffs = parse_count(arg, value());
    else if (arg == "--hold-ms") o.hold_ms = parse_count(arg, value(), 0, 60'000);
    else if (arg == "--shape-hold-ms") o.shape_hold_ms = parse_count(arg, value(), 0, 10'000);
    else if (arg == "--shape-polling") no_value(), o.shape_polling = true;
    else if (arg == "--keep-awake") no_value(), o.keep_awake = true;
    else if (arg == "--unfair") no_value(), o.unfair = true;
    else if (arg == "--workers") {
      std::string text = value();
      for (std::size_t begin = 0;;) {
        auto comma = text.find(',', begin);
        o.workers.push_back(static_cast<int>(parse_count(arg, text.substr(begin, comma - begin), 1, 64)));
        if (comma == std::string::npos) break;
        begin = comma + 1;
      }
    }
    else if (arg == "--backend") add_names(arg, value(), backend_names(), o.backends);
    else if (arg == "--scenario") add_names(arg, value(), kScenarios, o.scenarios);
    else if (arg == "--skip-scenario") add_names(arg, value(), kScenarios, o.skipped_scenarios);
    else if (arg == "--dir") {
      o.dir = value();
      if (o.dir.empty()) throw UsageProblem("--dir needs a non-empty path");
    } else if (arg == "--csv") {
      o.csv = value();
      if (o.csv.empty()) throw UsageProblem("--csv needs a non-empty path");
    } else if (arg == "--markdown") {
      o.markdown = value();
      if (o.markdown.empty()) throw UsageProblem("--markdown needs a non-empty path");
    } else throw UsageProblem(fmt::format("unknown option '{}'", argv[i]));
  }
  o.iterations = iterations.value_or(o.quick ? 300 : 5000);
  o.handoffs = handoffs.value_or(o.quick ? 40 : 400);
  o.warmup = std::clamp<std::size_t>(o.iterations / 10, 10, 200);
  return o;
}

Summary summarize(std::vector<double> v) {
  Summary s;
  s.samples = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double p) {  // nearest rank: the smallest value with at least p of samples <= it
    auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::clamp<std::size_t>(k, 1, v.size()) - 1];
  };
  s.mean_us = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.p50_us = rank(0.50);
  s.p99_us = rank(0.99);
  s.ops_per_s = s.mean_us > 0 ? 1e6 / s.mean_us : 0;
  return s;
}

std::string machine_description() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown-host");
  long nproc = sysconf(_SC_NPROCESSORS_ONLN);
  std::string kernel = "unknown kernel";
  if (utsname u{}; uname(&u) == 0) kernel = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  std::string cpu = "unknown CPU";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0) {
      if (auto c = line.find(':'); c != std::string::npos) cpu = line.substr(line.find_first_not_of(" \t", c + 1));
      break;
    }
  return fmt::format("{}, nproc {}, {}, {}", host, nproc, cpu, kernel);
}

std::string tcp_ask(const std::string& host, int port, const std::string& request) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return {};
  std::string answer;
  for (addrinfo* a = found; a && answer.empty(); a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      pollfd p{fd, POLLIN, 0};
      while (answer.size() < 65536 && poll(&p, 1, 3000) > 0) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        answer.append(buf, static_cast<std::size_t>(n));
      }
    }
    close(fd);
  }
  freeaddrinfo(found);
  return answer;
}

Compared compare(const Row& row, const Row& baseline) {
  return Compared{baseline.strategy, baseline.s.p50_us > 0 ? row.s.p50_us / baseline.s.p50_us : 0};
}

Row variant_row(const Row& baseline, const std::string& setup, Summary s) {
  Row r{baseline.backend, baseline.strategy + " " + setup, baseline.scenario, baseline.workers, s, {}};
  r.own_table = true;
  r.vs = {compare(r, baseline)};
  return r;
}

std::vector<std::string> polling_summary(const std::vector<Row>& rows) {
  std::vector<std::string> out;
  for (const auto& off : rows) {
    if (off.scenario != "handoff-polling") continue;
    for (const auto& on : rows)
      if (on.scenario == "handoff" && on.backend == off.backend && on.strategy == off.strategy) {
        double ratio = on.s.p50_us > 0 ? off.s.p50_us / on.s.p50_us : 0;
        out.push_back(fmt::format("{} {}: polling p50 {:.1f} us / notified p50 {:.1f} us = {:.2f}x", off.backend,
                                  off.strategy, off.s.p50_us, on.s.p50_us, ratio));
      }
  }
  return out;
}

void print_markdown(const std::vector<std::string>& notes, const std::vector<Row>& rows,
                    const std::vector<std::string>& after) {
  fmt::print("# dblock-bench\n\n");
  fmt::print("- machine: {}\n", machine_description());
  for (const auto& n : notes) fmt::print("- {}\n", n);
  fmt::print("\n| backend | strategy | scenario (handoff-polling = notifications off) | workers | ops/s | p50 us | p99 us | baseline | ratio | x select1 |\n");
  fmt::print("|---|---|---|---:|---:|---:|---:|---|---:|---:|\n");
  for (const auto& r : rows) {
    if (r.own_table) continue;  // printed by its scenario (print_contended_table, ...)
    std::string baseline, ratio, select1 = "-";
    for (std::size_t i = 0; i < r.vs.size() && i < std::max<std::size_t>(r.shown, 1); ++i) {
      baseline += (i ? " / " : "") + r.vs[i].baseline;
      ratio += fmt::format("{}{:.2f}", i ? " / " : "", r.vs[i].ratio);
    }
    if (r.vs.empty()) baseline = ratio = "-";
    for (const auto& c : r.vs)
      if (c.baseline == "select1") select1 = fmt::format("{:.2f}", c.ratio);
    fmt::print("| {} | {} | {} | {} | {:.0f} | {:.1f} | {:.1f} | {} | {} | {} |\n", r.backend, r.strategy,
               r.scenario, r.workers, r.s.ops_per_s, r.s.p50_us, r.s.p99_us, baseline, ratio, select1);
  }
  if (!after.empty()) {
    fmt::print("\n## Hand-off with notifications off: handoff-polling p50 / handoff p50 (acceptance: at least 5x)\n\n");
    for (const auto& line : after) fmt::print("- {}\n", line);
  }
  std::fflush(stdout);
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("cannot write CSV file '{}'", path));
  out << "backend,strategy,scenario,workers,ops_per_s,p50_us,p99_us,baseline,ratio,fairness,connections_per_lock,"
         "bytes_per_lock,table_rows,holders,release_p50_us,server_connections,statements_per_s,log_bytes_per_lock_min,"
         "cpu_us_per_grant,cpu_share,names,errors,threads_more,sockets_more\n";
  auto opt = [](const std::optional<double>& v, const char* f) {
    return v ? fmt::format(fmt::runtime(f), *v) : std::string();
  };
  for (const auto& r : rows) {
    const std::string tail =
        fmt::format(",{},{},{},{},{},{}", opt(r.fairness, "{:.4f}"), opt(r.connections_per_lock, "{:.3f}"),
                    opt(r.bytes_per_lock, "{:.0f}"), r.table_rows ? std::to_string(r.table_rows) : "", r.holders,
                    opt(r.release_p50_us, "{:.2f}")) +
        fmt::format(",{},{},{},{},{},{},{}", opt(r.server_connections, "{:.0f}"), opt(r.statements_per_s, "{:.1f}"),
                    opt(r.log_bytes_per_lock_min, "{:.1f}"), opt(r.cpu_us_per_grant, "{:.1f}"),
                    opt(r.cpu_share, "{:.4f}"), r.names ? std::to_string(r.names) : "",
                    r.scenario.rfind("scale-", 0) == 0 ? std::to_string(r.errors) : "") +
        fmt::format(",{},{}", r.threads_more ? std::to_string(*r.threads_more) : "",
                    r.sockets_more ? std::to_string(*r.sockets_more) : "");
    const std::string head = fmt::format("{},{},{},{},{:.1f},{:.2f},{:.2f}", r.backend, r.strategy, r.scenario,
                                         r.workers, r.s.ops_per_s, r.s.p50_us, r.s.p99_us);
    if (r.vs.empty()) out << head << ",," << tail << "\n";
    for (const auto& c : r.vs) out << head << fmt::format(",{},{:.3f}", c.baseline, c.ratio) << tail << "\n";
  }
  out.flush();
  if (!out) throw std::runtime_error(fmt::format("cannot write CSV file '{}'", path));
}

const char* env_url(const char* var) {
  const char* url = std::getenv(var);
  return url && *url ? url : nullptr;
}

}  // namespace dblock_bench
