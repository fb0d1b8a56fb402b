#include "bench/scenarios/scale.hpp"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/support/proc.hpp"
#include "core/validate.hpp"
#include "dblock/dblock.hpp"
#include "sql/dialect.hpp"

#ifdef DBLOCK_WITH_POSTGRESQL
#include <pqxx/pqxx>

#include "backends/postgresql/pg_dialect.hpp"
#endif
#ifdef DBLOCK_WITH_MYSQL
#include "backends/mysql/mysql_dialect.hpp"
#include "bench/backends/mysql_conn.hpp"
#endif
#ifdef DBLOCK_WITH_REDIS
#include <hiredis/hiredis.h>

#include "core/url.hpp"
#endif

namespace fs = std::filesystem;

namespace dblock_bench {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using std::chrono::milliseconds;

// The lock table of the SQL backends: created on first use and kept (as the pooler's), so a
// run does not pay a migration per backend; the bare rows are deleted before and after.
constexpr const char* kTable = "bench_scale";
constexpr const char* kBareOwner = "dblock-bench-bare";
// More threads than one acquire the held locks when there are many: grants/s is then the
// Client's, not one thread's round trips (4: the pool's 8 connections stay free for renewals).
constexpr int kAcquireThreads = 4;
// The bare baseline times this many single-row INSERTs; more rows go in one INSERT ... SELECT,
// so that 10,000 fsynced commits do not take the scenario's minutes.
constexpr std::size_t kBareTimedInserts = 500;
// A processes worker waits this long for a name before it counts a timeout.
constexpr milliseconds kProcessWait{10'000};

struct Plan {
  milliseconds ttl;               // the held locks' TTL; the Client renews every ttl / 3
  milliseconds window;            // the hold measured
  std::vector<std::size_t> held;  // N
  std::vector<int> processes;     // P
  milliseconds run_for;           // each processes point
};

// Full: about 5 minutes on 2 vCPUs with postgresql and mysql; --quick: under 40 s a backend.
Plan plan(const Options& opt) {
  if (opt.quick) return {milliseconds(1500), milliseconds(1200), {1, 10, 100, 1000}, {1, 8}, milliseconds(1000)};
  return {milliseconds(3000), milliseconds(3000), {1, 10, 100, 1000, 10000}, {1, 16, 64, 128}, milliseconds(6000)};
}

// ---- the server's side ------------------------------------------------------------------

// Cumulative counters read from the server (or the process) at one moment; unset where the
// backend has no such figure.
struct Snapshot {
  Clock::time_point at = Clock::now();
  std::optional<double> statements, log_bytes, cpu_s, connections;
};

struct Probe {
  std::function<Snapshot()> read;
  std::string what;  // for the note: what each figure counts on this backend
};

std::optional<double> delta(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b) return std::nullopt;
  return *b - *a;
}

double seconds_between(const Snapshot& a, const Snapshot& b) {
  return std::chrono::duration<double>(b.at - a.at).count();
}

// /proc/PID/stat: (ppid, utime + stime [+ cutime + cstime] in seconds), or nothing.
std::optional<std::pair<long, double>> proc_stat(long pid, bool with_dead_children) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 2));
  std::vector<std::string> f;  // from field 3 (state) on
  for (std::string w; rest >> w && f.size() < 15;) f.push_back(w);
  if (f.size() < 15) return std::nullopt;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  double cpu = std::stod(f[11]) + std::stod(f[12]);  // utime, stime (fields 14, 15)
  if (with_dead_children) cpu += std::stod(f[13]) + std::stod(f[14]);
  return std::make_pair(std::stol(f[1]), cpu / tick);
}

// A server made of a parent and its children (PostgreSQL's postmaster and backends): the
// parent's own and reaped children's CPU, and the live children's.
double process_tree_cpu(long parent) {
  auto own = proc_stat(parent, true);
  if (!own) throw std::runtime_error(fmt::format("cannot read /proc/{}/stat", parent));
  double cpu = own->second;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      long pid = std::atol(e->d_name);
      if (pid <= 0) continue;
      if (auto s = proc_stat(pid, false); s && s->first == parent) cpu += s->second;
    }
    closedir(d);
  }
  return cpu;
}

// MySQL and Redis count every client connection server-wide: the probes open here are taken off.
std::atomic<int> g_open_probes{0};
struct ProbeCount {
  ProbeCount() { ++g_open_probes; }
  ~ProbeCount() { --g_open_probes; }
};

#ifdef DBLOCK_WITH_POSTGRESQL
Probe pg_probe(const std::string& url) {
  auto c = std::make_shared<pqxx::connection>(url);
  long postmaster = 0;
  {
    pqxx::nontransaction tx(*c);
    tx.exec("SET application_name = 'dblock-bench-probe'");  // left out of the connections
    // The backend's parent is the postmaster when the server runs on this machine.
    if (auto s = proc_stat(tx.exec("SELECT pg_backend_pid()").at(0).at(0).as<long>(), false)) postmaster = s->first;
  }
  Probe p;
  p.read = [c, postmaster] {
    pqxx::nontransaction tx(*c);
    auto r = tx.exec(
                   "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint, "
                   "pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0'), "
                   "(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = "
                   "'client backend' AND application_name <> 'dblock-bench-probe')")
                 .at(0);
    Snapshot s;
    s.statements = r[0].as<double>();  // the next xid: read-only, this read takes none
    s.log_bytes = r[1].as<double>();
    s.connections = r[2].as<double>();
    if (postmaster > 1) s.cpu_s = process_tree_cpu(postmaster);
    return s;
  };
  p.what = fmt::format(
      "postgresql: statements = transactions that wrote (the transaction ids assigned: the advance of "
      "pg_current_snapshot()'s xmax; PostgreSQL publishes its per-database statement counts a second or more late, "
      "too late for a window of seconds, so read-only statements, such as the advisory strategy's pings, are not "
      "counted), log = WAL bytes (pg_current_wal_insert_lsn), connections = "
      "pg_stat_activity client backends of the database, CPU = {}",
      postmaster > 1 ? "the postmaster's and its children's utime + stime (/proc)" : "not readable (a remote server)");
  return p;
}
#endif

#ifdef DBLOCK_WITH_MYSQL
Probe mysql_probe(const std::string& url) {
  auto c = std::make_shared<Conn>(url, dblock::ClientOptions{}, "scale probe");
  auto count = std::make_shared<ProbeCount>();
  long pid = 0;
  std::string log_var = "Innodb_lsn_current";
  try {  // @@pid_file: the server's own pid file, when it runs on this machine
    auto rows = c->query("SELECT @@pid_file");
    std::ifstream in(rows.at(0).at(0));
    in >> pid;
  } catch (const std::exception&) {
  }
  if (pid > 0 && !proc_stat(pid, false)) pid = 0;
  auto reads = std::make_shared<double>(0);
  Probe p;
  p.read = [c, count, pid, reads] {
    Snapshot s;
    for (const auto& row : c->query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Innodb_lsn_current', "
                                    "'Threads_connected')")) {
      const double v = std::stod(row.at(1));
      if (row[0] == "Questions") s.statements = v - (*reads)++;  // less this probe's own reads
      else if (row[0] == "Innodb_lsn_current") s.log_bytes = v;
      else if (row[0] == "Threads_connected") s.connections = v - g_open_probes;
    }
    if (pid > 0)
      if (auto st = proc_stat(pid, false)) s.cpu_s = st->second;
    return s;
  };
  std::string log_bin = "?";
  try {
    log_bin = c->query("SELECT @@log_bin").at(0).at(0) == "1" ? "on" : "off";
  } catch (const std::exception&) {
  }
  p.what = fmt::format(
      "mysql: statements = Questions (SHOW GLOBAL STATUS: statements clients sent), log = InnoDB redo bytes "
      "(Innodb_lsn_current; the binlog is {} on this server), connections = Threads_connected (server-wide), "
      "CPU = {}",
      log_bin, pid > 0 ? "the server process's utime + stime (/proc, its @@pid_file)" : "not readable");
  return p;
}
#endif

#ifdef DBLOCK_WITH_REDIS
using RedisPtr = std::shared_ptr<redisContext>;

std::string redis_info(redisContext* c) {
  auto* r = static_cast<redisReply*>(redisCommand(c, "INFO"));
  if (!r || r->type != REDIS_REPLY_STRING) {
    if (r) freeReplyObject(r);
    throw std::runtime_error("scale probe: redis INFO failed");
  }
  std::string text(r->str, r->len);
  freeReplyObject(r);
  return text;
}

std::optional<double> info_field(const std::string& info, const std::string& key) {
  auto at = info.find("\r\n" + key + ":");
  if (at == std::string::npos) return std::nullopt;
  return std::stod(info.substr(at + key.size() + 3));
}

Probe redis_probe(const std::string& url) {
  auto u = dblock::detail::parse_url(url);
  const auto& hp = u.hosts.at(0);
  RedisPtr c(redisConnect(hp.host.empty() ? "127.0.0.1" : hp.host.c_str(), hp.port ? hp.port : 6379), redisFree);
  if (!c || c->err) throw std::runtime_error("scale probe: cannot connect to redis");
  if (!u.password.empty()) {
    auto* r = static_cast<redisReply*>(u.user.empty() ? redisCommand(c.get(), "AUTH %s", u.password.c_str())
                                                      : redisCommand(c.get(), "AUTH %s %s", u.user.c_str(),
                                                                     u.password.c_str()));
    if (r) freeReplyObject(r);
  }
  auto count = std::make_shared<ProbeCount>();
  auto reads = std::make_shared<double>(0);
  const bool aof = info_field(redis_info(c.get()), "aof_enabled").value_or(0) == 1;
  Probe p;
  p.read = [c, count, reads, aof] {
    const std::string info = redis_info(c.get());
    Snapshot s;
    if (auto v = info_field(info, "total_commands_processed")) s.statements = *v - ++*reads;  // with the INFO above
    if (aof) s.log_bytes = info_field(info, "aof_current_size");
    if (auto v = info_field(info, "connected_clients")) s.connections = *v - g_open_probes;
    auto sys = info_field(info, "used_cpu_sys"), user = info_field(info, "used_cpu_user");
    if (sys && user) s.cpu_s = *sys + *user;
    return s;
  };
  p.what = fmt::format(
      "redis: statements = commands (INFO total_commands_processed), log = {}, connections = connected_clients, "
      "CPU = used_cpu_sys + used_cpu_user (the main process)",
      aof ? "AOF growth (aof_current_size; a rewrite during the window would shrink it)" : "none (appendonly off)");
  return p;
}
#endif

Probe sqlite_probe() {
  Probe p;
  const double before = open_fds(false);
  p.read = [before] {
    Snapshot s;
    s.connections = open_fds(false) - before;
    return s;
  };
  p.what =
      "sqlite: no server: connections = file descriptors the process opened since the probe (the database, its "
      "-wal and -shm); statements, CPU and log left empty (the WAL file is reused after each checkpoint, so its "
      "size is not what was written)";
  return p;
}

Probe make_probe(const std::string& backend, [[maybe_unused]] const std::string& url) {
#ifdef DBLOCK_WITH_POSTGRESQL
  if (backend == "postgresql") return pg_probe(url);
#endif
#ifdef DBLOCK_WITH_MYSQL
  if (backend == "mysql") return mysql_probe(url);
#endif
#ifdef DBLOCK_WITH_REDIS
  if (backend == "redis") return redis_probe(url);
#endif
  if (backend == "sqlite") return sqlite_probe();
  throw std::logic_error("scale: no probe for " + backend);
}

// ---- held locks ------------------------------------------------------------------------

// What one held point measured: the acquires, then the hold.
struct Held {
  std::vector<double> waits_us;  // per acquire (or bare INSERT)
  double acquire_s = 0;          // the acquires' span
  std::size_t held = 0;
  Snapshot a0, a1, h0, h1;  // around the acquires; around the hold
  std::string failure;      // why fewer than N were held
  std::uint64_t lost = 0;   // leases the Client lost while holding
  std::optional<double> connections;  // the server's, while held
};

Row held_row(const std::string& backend, const std::string& strategy, const Held& h) {
  Row row{backend, strategy, "scale-held", static_cast<int>(h.held), summarize(h.waits_us), {}};
  row.own_table = true;
  row.s.ops_per_s = h.acquire_s > 0 ? static_cast<double>(h.held) / h.acquire_s : 0;
  const double secs = seconds_between(h.h0, h.h1), n = static_cast<double>(std::max<std::size_t>(h.held, 1));
  row.server_connections = h.connections;
  if (auto d = delta(h.h0.statements, h.h1.statements)) row.statements_per_s = *d / secs;
  if (auto d = delta(h.h0.log_bytes, h.h1.log_bytes)) row.log_bytes_per_lock_min = *d / n / secs * 60;
  if (auto d = delta(h.h0.cpu_s, h.h1.cpu_s)) row.cpu_share = *d / secs;
  if (auto d = delta(h.a0.cpu_s, h.a1.cpu_s)) row.cpu_us_per_grant = *d / n * 1e6;
  return row;
}

// Runs `one(i)` for i in [0, n) on `threads` threads, each timing its calls into `waits_us`.
// Stops at the first exception, which it returns (empty: all done).
std::string timed_in_threads(std::size_t n, int threads, const std::function<void(std::size_t)>& one,
                             std::vector<double>& waits_us) {
  std::mutex m;
  std::string failure;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  auto work = [&] {
    std::vector<double> mine;
    for (std::size_t i; !stop && (i = next++) < n;) {
      auto t0 = Clock::now();
      try {
        one(i);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> g(m);
        if (failure.empty()) failure = e.what();
        stop = true;
        break;
      }
      mine.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    std::lock_guard<std::mutex> g(m);
    waits_us.insert(waits_us.end(), mine.begin(), mine.end());
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return failure;
}

// One Client acquires n locks of `strategy` and holds them through the window.
Held hold_with_client(const std::string& url, dblock::Strategy strategy, std::size_t n,
                      const Plan& plan, Probe& probe) {
  dblock::ClientOptions options;
  options.table = kTable;
  // The server's connections before the Client: others' (a pooler's, say) are not its own.
  const auto before = probe.read().connections;
  auto client = dblock::Client::open(url, options);
  dblock::LockOptions lo;
  lo.strategy = strategy;
  lo.ttl = plan.ttl;
  const std::string s(dblock::to_string(strategy));
  auto name = [&](std::size_t i) { return fmt::format("bench-scale-{}-{}", s, i); };
  // One acquire + release first: the Client's first connections and statements are not the point.
  client->lock(name(n), lo).try_acquire(std::chrono::seconds(10)).value().release();

  Held h;
  std::vector<std::optional<dblock::Lease>> leases(n);
  h.a0 = probe.read();
  auto t0 = Clock::now();
  h.failure = timed_in_threads(
      n, n >= 100 ? kAcquireThreads : 1,
      [&](std::size_t i) {
        leases[i] = client->lock(name(i), lo).try_acquire(std::chrono::seconds(10));
        if (!leases[i]) throw std::runtime_error(fmt::format("'{}' not granted within 10 s", name(i)));
      },
      h.waits_us);
  h.acquire_s = std::chrono::duration<double>(Clock::now() - t0).count();
  h.a1 = probe.read();
  h.held = static_cast<std::size_t>(std::count_if(leases.begin(), leases.end(), [](auto& l) { return l.has_value(); }));
  if (h.held > 0) {
    // Two renewal ticks: the hold's steady state. The first tick after a grant attaches it to
    // its Client row (PostgreSQL, MySQL), one write per lease, and the server's background
    // work on the acquires' rows (InnoDB's purge) follows it; only then is a tick what every
    // later one is.
    std::this_thread::sleep_for(2 * (plan.ttl / 3));
    h.h0 = probe.read();
    std::this_thread::sleep_for(plan.window);
    h.h1 = probe.read();
    if (h.h1.connections && before) h.connections = *h.h1.connections - *before;
  }
  h.lost = client->stats().lost;
  std::vector<double> ignored;
  timed_in_threads(
      n, n >= 100 ? kAcquireThreads : 1,
      [&](std::size_t i) {
        if (leases[i]) leases[i]->release();
      },
      ignored);
  return h;
}

// The per-lease baseline: N rows inserted (the first kBareTimedInserts one statement each,
// timed), then every renewal tick one UPDATE per row, on one connection, through the window.
struct BareSql {
  std::function<void(const std::string& text)> run;  // one statement
  std::function<void(std::size_t i)> renew;          // row i's UPDATE (renew_one, prepared where the driver can)
  std::string insert_one, insert_many, renew_one, cleanup;  // ${i}, ${from}, ${to}: filled below
};

std::string fill(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values)
    for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  return text;
}

Held hold_bare(const BareSql& sql, std::size_t n, const Plan& plan, Probe& probe, double& achieved_share) {
  Held h;
  sql.run(sql.cleanup);
  h.a0 = probe.read();  // the bare connection is open already: counted below as its one
  const std::size_t timed = std::min(n, kBareTimedInserts);
  auto t0 = Clock::now();
  for (std::size_t i = 0; i < timed; ++i) {
    auto t = Clock::now();
    sql.run(fill(sql.insert_one, {{"${i}", std::to_string(i)}}));
    h.waits_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
  }
  h.acquire_s = std::chrono::duration<double>(Clock::now() - t0).count() * static_cast<double>(n) /
                static_cast<double>(timed);  // the single-row rate, as if all n went so
  if (n > timed)
    sql.run(fill(sql.insert_many, {{"${from}", std::to_string(timed)}, {"${to}", std::to_string(n - 1)}}));
  h.a1 = probe.read();
  h.held = n;
  const auto tick = plan.ttl / 3;
  std::size_t renewed = 0;
  auto renew_until = [&](Clock::time_point end, bool count) {
    for (auto next = Clock::now(); Clock::now() < end; next += tick) {
      for (std::size_t i = 0; i < n && Clock::now() < end; ++i, renewed += count) sql.renew(i);
      std::this_thread::sleep_until(std::min(next + tick, end));
    }
  };
  renew_until(Clock::now() + 2 * tick, false);  // two ticks: the steady state, as for the locks
  h.h0 = probe.read();
  renew_until(Clock::now() + plan.window, true);
  h.h1 = probe.read();
  h.connections = 1;  // the one connection the rows are renewed on
  // The share of the renewals due in the window that were sent: below 1 when one connection
  // cannot send N statements per tick.
  achieved_share = static_cast<double>(renewed) /
                   (static_cast<double>(n) * std::chrono::duration<double>(plan.window).count() /
                    std::chrono::duration<double>(tick).count());
  sql.run(sql.cleanup);
  return h;
}

#if defined(DBLOCK_WITH_POSTGRESQL) || defined(DBLOCK_WITH_MYSQL)
// The bare statements in the dialect's clock units, on the scale table.
BareSql bare_texts(const dblock::detail::sqldb::Dialect& d, const std::string& concat_name, const std::string& series,
                   const Plan& plan) {
  auto render = [&](const std::string& t) {
    return dblock::detail::sqldb::render(t, dblock::detail::parse_table_name(kTable), d.now_ms);
  };
  const std::string ttl = std::to_string(plan.ttl.count()), owner = kBareOwner;
  BareSql b;
  b.insert_one = render("INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version) VALUES "
                        "('bench-scale-bare-${i}', '" + owner + "', 0, 1, ${now_ms}, ${now_ms} + " + ttl + ", 1)");
  b.insert_many = render("INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version) SELECT " +
                         concat_name + ", '" + owner + "', 0, 1, ${now_ms}, ${now_ms} + " + ttl + ", 1 FROM " + series);
  b.renew_one = render("UPDATE ${table} SET valid_until = ${now_ms} + " + ttl +
                       " WHERE name = 'bench-scale-bare-${i}' AND owner = '" + owner + "' AND fence = 0");
  b.cleanup = render("DELETE FROM ${table} WHERE owner = '" + owner + "'");
  return b;
}
#endif

// The bare statements of `backend`, on a connection of their own (held by the returned run),
// or nothing where the scenario has none (sqlite, redis).
std::optional<BareSql> bare_sql(const std::string& backend, [[maybe_unused]] const std::string& url,
                                [[maybe_unused]] const Plan& plan) {
#ifdef DBLOCK_WITH_POSTGRESQL
  if (backend == "postgresql") {
    auto c = std::make_shared<pqxx::connection>(url);
    BareSql b = bare_texts(dblock::detail::sqldb::postgresql_dialect(), "'bench-scale-bare-' || i",
                           "generate_series(${from}::bigint, ${to}::bigint) AS i", plan);
    b.run = [c](const std::string& text) {
      pqxx::nontransaction tx(*c);
      tx.exec(text);
    };
    // Prepared, as the library's statements are on PostgreSQL: the name is the parameter.
    c->prepare("scale_renew", fill(b.renew_one, {{"'bench-scale-bare-${i}'", "'bench-scale-bare-' || $1"}}));
    b.renew = [c](std::size_t i) {
      pqxx::nontransaction tx(*c);
      tx.exec_prepared("scale_renew", std::to_string(i));
    };
    return b;
  }
#endif
#ifdef DBLOCK_WITH_MYSQL
  if (backend == "mysql") {
    auto c = std::make_shared<Conn>(url, dblock::ClientOptions{}, "scale bare-renew");
    BareSql b = bare_texts(dblock::detail::sqldb::mysql_dialect(), "CONCAT('bench-scale-bare-', seq)",
                           "seq_${from}_to_${to}", plan);
    b.run = [c](const std::string& text) { c->run(text); };
    b.renew = [c, text = b.renew_one](std::size_t i) { c->run(fill(text, {{"${i}", std::to_string(i)}})); };
    return b;
  }
#endif
  return std::nullopt;
}

// The strategies the held part runs: the lease strategies and, where the backend has them,
// advisory (multiplexed over a few connections). for-update pins a connection per held lock
// (the `resources` scenario shows it), so thousands of them are not a configuration to measure.
std::vector<dblock::Strategy> held_strategies(const std::string& backend) {
  using dblock::Strategy;
  if (backend == "postgresql" || backend == "mysql")
    return {Strategy::insert, Strategy::optimistic, Strategy::advisory};
  if (backend == "sqlite") return {Strategy::insert, Strategy::optimistic};
  if (backend == "redis") return {Strategy::redis};
  return {};
}

std::string stderr_figures(const Row& r) {
  auto f = [](const std::optional<double>& v, const char* fmt_) {
    return v ? fmt::format(fmt::runtime(fmt_), *v) : std::string("n/a");
  };
  return fmt::format("{:.0f} grants/s, p50 {:.0f} us, p99 {:.0f} us; held: {} connections, {} statements/s, {} log "
                     "B/lock/min, server CPU {} s/s; {} us CPU/grant",
                     r.s.ops_per_s, r.s.p50_us, r.s.p99_us, f(r.server_connections, "{:.0f}"),
                     f(r.statements_per_s, "{:.1f}"), f(r.log_bytes_per_lock_min, "{:.1f}"), f(r.cpu_share, "{:.3f}"),
                     f(r.cpu_us_per_grant, "{:.0f}"));
}

void run_held(BackendReport& rep, const std::string& backend, const std::string& url, const Plan& plan) {
  Probe probe = make_probe(backend, url);
  std::vector<std::string> problems, ceilings;
  // bare-renew first, so the lock rows can carry their ratio to it.
  std::vector<Row> bare_rows;
  if (auto bare = bare_sql(backend, url, plan)) {
    for (std::size_t n : plan.held) {
      fmt::print(stderr, "dblock-bench: {} scale: bare-renew, {} rows\n", backend, n);
      double share = 1;
      Held h = hold_bare(*bare, n, plan, probe, share);
      Row row = held_row(backend, "bare-renew", h);
      fmt::print(stderr, "dblock-bench: {} scale: bare-renew {}: {}; {:.0f}% of the renewals due sent\n", backend, n,
                 stderr_figures(row), share * 100);
      if (share < 0.95)
        ceilings.push_back(fmt::format("bare-renew at {}: one connection sent {:.0f}% of the {} UPDATEs due per tick "
                                       "(the figures are its ceiling)",
                                       n, share * 100, n));
      bare_rows.push_back(row);
      rep.rows.push_back(std::move(row));
    }
  }
  for (auto strategy : held_strategies(backend)) {
    const std::string s(dblock::to_string(strategy));
    for (std::size_t n : plan.held) {
      fmt::print(stderr, "dblock-bench: {}/{} scale: one Client holds {} locks\n", backend, s, n);
      Held h;
      try {
        h = hold_with_client(url, strategy, n, plan, probe);
      } catch (const std::exception& e) {
        problems.push_back(fmt::format("{} at {}: {}", s, n, e.what()));
        fmt::print(stderr, "dblock-bench: {}/{} scale: {} locks: {}\n", backend, s, n, e.what());
        continue;
      }
      if (h.held == 0) {
        problems.push_back(fmt::format("{} at {}: none held: {}", s, n, h.failure));
        continue;
      }
      if (!h.failure.empty()) problems.push_back(fmt::format("{} at {}: {} held, then: {}", s, n, h.held, h.failure));
      if (h.lost) problems.push_back(fmt::format("{} at {}: the Client lost {} leases while holding", s, n, h.lost));
      Row row = held_row(backend, s, h);
      for (const auto& b : bare_rows)
        if (b.workers == row.workers && b.statements_per_s && row.statements_per_s && *b.statements_per_s > 0)
          row.vs.push_back({"bare-renew", *row.statements_per_s / *b.statements_per_s});
      fmt::print(stderr, "dblock-bench: {}/{} scale: {} held: {}{}\n", backend, s, h.held, stderr_figures(row),
                 row.vs.empty() ? "" : fmt::format("; x{:.3f} the bare renewals' statements", row.vs[0].ratio));
      rep.rows.push_back(std::move(row));
    }
  }
  rep.notes.push_back("scale " + probe.what);
  // What the smoke test fails on (tests/CMakeLists.txt): a lock point short of N, or leases lost.
  if (!problems.empty())
    rep.notes.push_back(fmt::format("{} scale: held points that failed: {}", backend, fmt::join(problems, "; ")));
  if (!ceilings.empty())
    rep.notes.push_back(fmt::format("{} scale bare-renew behind: {}", backend, fmt::join(ceilings, "; ")));
}

// ---- processes --------------------------------------------------------------------------

struct ProcessPoint {
  std::vector<double> waits_us;
  std::uint64_t grants = 0, timeouts = 0, errors = 0;
  std::string first_error;
  double elapsed_s = 0, peak_connections = 0;
  Snapshot s0, s1;
  double sampler_reads = 0;  // the sampler's own statements, taken off
};

// Samples the server's connections every 50 ms on a probe of its own until it goes.
class PeakSampler {
 public:
  PeakSampler(const std::string& backend, const std::string& url)
      : probe_(make_probe(backend, url)), thread_([this] { loop(); }) {}
  ~PeakSampler() { stop(); }
  void stop() {
    if (thread_.joinable()) {
      done_ = true;
      thread_.join();
    }
  }
  double peak() const { return peak_; }
  double reads() const { return reads_; }

 private:
  void loop() {
    while (!done_) {
      try {
        peak_ = std::max(peak_.load(), probe_.read().connections.value_or(0));
        reads_ = reads_ + 1;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
  }
  Probe probe_;
  std::atomic<bool> done_{false};
  std::atomic<double> peak_{0}, reads_{0};
  std::thread thread_;
};

ProcessPoint run_processes(const std::string& backend, const std::string& url, int procs, std::size_t names,
                           const Plan& plan, Probe& probe) {
  std::vector<std::vector<std::string>> argvs;
  for (int i = 0; i < procs; ++i)
    argvs.push_back({"dblock-bench", kScaleWorkerFlag, "insert", kTable, std::to_string(names),
                     std::to_string(plan.run_for.count()), std::to_string(i + 1)});
  ProcessPoint p;
  std::string failure;
  // The server's connections before the workers: others' (a pooler's, say) are not theirs.
  const double before = probe.read().connections.value_or(0);
  PeakSampler sampler(backend, url);
  double reads_at_start = 0;
  auto outputs = run_workers(argvs, url, failure, "/proc/self/exe", [&] {
    p.s0 = probe.read();
    reads_at_start = sampler.reads();
  });
  p.s1 = probe.read();
  p.sampler_reads = sampler.reads() - reads_at_start;
  sampler.stop();
  p.peak_connections = std::max(0.0, sampler.peak() - before);
  if (!failure.empty()) {  // a worker that could not open its Client (e.g. refused connections)
    ++p.errors;
    p.first_error = failure;
  }
  for (const auto& w : outputs) {
    json j = json::parse(w.line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.contains("error")) {
      ++p.errors;
      if (p.first_error.empty())
        p.first_error = j.is_object() && j.contains("error") ? j["error"].get<std::string>()
                                                             : fmt::format("worker {} gave no result", w.pid);
      continue;
    }
    p.elapsed_s = std::max(p.elapsed_s, j["elapsed_s"].get<double>());
    p.grants += j["grants"].get<std::uint64_t>();
    p.timeouts += j["timeouts"].get<std::uint64_t>();
    p.errors += j["errors"].get<std::uint64_t>();
    if (p.first_error.empty()) p.first_error = j["first_error"].get<std::string>();
    for (const auto& v : j["waits_us"]) p.waits_us.push_back(v.get<double>());
  }
  return p;
}

// The most connections the server takes from the bench's role, or nothing where unbounded
// (SQLite) or unknown.
std::optional<double> connection_limit(const std::string& backend, [[maybe_unused]] const std::string& url) {
#ifdef DBLOCK_WITH_POSTGRESQL
  if (backend == "postgresql") {
    pqxx::connection c(url);
    pqxx::nontransaction tx(c);
    return tx.exec("SELECT current_setting('max_connections')::int - "
                   "current_setting('superuser_reserved_connections')::int")
        .at(0)
        .at(0)
        .as<double>();
  }
#endif
#ifdef DBLOCK_WITH_MYSQL
  if (backend == "mysql") {
    Conn c(url, dblock::ClientOptions{}, "scale limit");
    return std::stod(c.query("SELECT @@max_connections").at(0).at(0));
  }
#endif
  return std::nullopt;
}

void run_process_points(BackendReport& rep, const std::string& backend, const std::string& url, const Plan& plan) {
  Probe probe = make_probe(backend, url);
  const auto limit = connection_limit(backend, url);
  // Connections per process: at least a pool connection and a listener, more if a run saw more.
  double per_process = 2;
  std::vector<std::string> capped, errors;
  std::vector<int> counts = plan.processes;
  // SQLite: every process on one file, whose lock serializes them; 16 say as much as more.
  if (backend == "sqlite")
    for (auto& c : counts)
      if (c > 16) capped.push_back(fmt::format("{} processes to 16 (one file's lock)", c)), c = 16;
  int last = 0;
  for (int wanted : counts) {
    int procs = wanted;
    if (limit) {
      // Room for the bench's own connections (probes, sampler) and a margin for the others'.
      const int room = static_cast<int>((*limit - 20) / std::max(per_process, 1.0));
      if (procs > room) {
        capped.push_back(fmt::format("{} processes to {} ({} connections allowed, {:.1f} per process)", wanted, room,
                                     *limit, per_process));
        procs = room;
      }
    }
    if (procs <= last) continue;  // capped to a count already run
    last = procs;
    for (std::size_t names : {std::size_t{1}, std::min<std::size_t>(static_cast<std::size_t>(procs) * 4, 10000)}) {
      if (procs == 1 && names > 1) continue;  // one process contends with nobody: one point says it
      fmt::print(stderr, "dblock-bench: {}/insert scale: {} processes on {} names, {:.1f} s\n", backend, procs, names,
                 std::chrono::duration<double>(plan.run_for).count());
      ProcessPoint p = run_processes(backend, url, procs, names, plan, probe);
      Row row{backend, "insert", "scale-processes", procs, summarize(p.waits_us), {}};
      row.own_table = true;
      row.names = names;
      row.errors = p.errors;
      row.s.ops_per_s = p.elapsed_s > 0 ? static_cast<double>(p.grants) / p.elapsed_s : 0;
      if (backend != "sqlite") row.server_connections = p.peak_connections;
      const double secs = seconds_between(p.s0, p.s1);
      if (auto d = delta(p.s0.statements, p.s1.statements)) row.statements_per_s = (*d - p.sampler_reads) / secs;
      if (auto d = delta(p.s0.cpu_s, p.s1.cpu_s); d && p.grants) row.cpu_us_per_grant = *d / p.grants * 1e6;
      per_process = std::max(per_process, p.peak_connections / procs);
      fmt::print(stderr,
                 "dblock-bench: {}/insert scale: {} processes on {} names: {} grants, {:.0f} grants/s, wait p50 {:.0f} "
                 "us, p99 {:.0f} us, peak {:.0f} connections, {} statements/s, {} us CPU/grant, {} timeouts, {} "
                 "errors{}\n",
                 backend, procs, names, p.grants, row.s.ops_per_s, row.s.p50_us, row.s.p99_us, p.peak_connections,
                 row.statements_per_s ? fmt::format("{:.0f}", *row.statements_per_s) : "n/a",
                 row.cpu_us_per_grant ? fmt::format("{:.0f}", *row.cpu_us_per_grant) : "n/a", p.timeouts, p.errors,
                 p.first_error.empty() ? "" : "; first: " + p.first_error);
      if (p.errors || p.timeouts)
        errors.push_back(fmt::format("{} processes on {} names: {} errors, {} waits timed out after {} s{}", procs,
                                     names, p.errors, p.timeouts, kProcessWait.count() / 1000,
                                     p.first_error.empty() ? "" : " (first: " + p.first_error + ")"));
      rep.rows.push_back(std::move(row));
    }
  }
  if (!capped.empty())
    rep.notes.push_back(fmt::format("{} scale processes capped: {}", backend, fmt::join(capped, "; ")));
  if (!errors.empty()) rep.notes.push_back(fmt::format("{} scale processes: {}", backend, fmt::join(errors, "; ")));
}

// ---- one Client's asynchronous waits ----------------------------------------------------

// The waits of a point, spread over its names round-robin.
struct AsyncPoint {
  int waits;
  std::size_t names;
};

// 10,000 waits on 4 names (long lines), then 1,000 on 1,000 names (a line each, every head
// at the server at once) where an attempt is one round trip; MySQL's lease attempts wait on
// turn keys, a worker per name, so it runs the first only. --quick: 1,000 on 4.
std::vector<AsyncPoint> async_points(const Options& opt, const std::string& backend) {
  if (opt.quick) return {{1000, 4}};
  if (backend == "mysql") return {{10000, 4}};
  return {{10000, 4}, {1000, 1000}};
}

int count_entries(const char* dir) {
  int n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) ++n;
  return n;
}

// One point: Client b holds every name; Client a queues `waits` asynchronous acquires (each
// released as its callback returns); once all have queued, b lets go and the lines drain.
// Sampled every 20 ms from before the first acquire: this process's threads and sockets and
// the server's connections, the most each reached less what there was before.
Row async_point(const std::string& backend, const std::string& url, const AsyncPoint& pt) {
  dblock::ClientOptions options;
  options.table = kTable;
  const auto strategy = backend == "redis" ? dblock::Strategy::redis : dblock::Strategy::insert;
  dblock::LockOptions lo;
  lo.strategy = strategy;
  auto a = dblock::Client::open(url, options), b = dblock::Client::open(url, options);
  std::vector<dblock::Lock> locks;
  std::vector<dblock::Lease> held;
  for (std::size_t i = 0; i < pt.names; ++i) {
    const auto name = fmt::format("bench-scale-async-{}-{}", pt.names, i);
    a->force_release(name);  // a run stopped part-way may have left it held
    locks.push_back(a->lock(name, lo));
    held.push_back(b->lock(name, lo).try_acquire(milliseconds(10'000)).value());
  }
  Probe probe = make_probe(backend, url);
  struct Peak {
    std::atomic<int> threads{0}, sockets{0};
    std::atomic<double> connections{0};
    std::atomic<bool> done{false};
  } peak;
  auto read = [&] {
    peak.threads = std::max(peak.threads.load(), count_entries("/proc/self/task"));
    peak.sockets = std::max(peak.sockets.load(), static_cast<int>(open_fds(true)));
    try {
      peak.connections = std::max(peak.connections.load(), probe.read().connections.value_or(0));
    } catch (const std::exception&) {
    }
  };
  std::thread sampler([&] {
    while (!peak.done) {
      read();
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  std::this_thread::sleep_for(milliseconds(50));  // the sampler's own thread and first read counted
  const int threads0 = peak.threads, sockets0 = peak.sockets;
  const double connections0 = peak.connections;

  std::mutex m;
  std::condition_variable all_ended;
  std::vector<std::vector<std::pair<int, std::uint64_t>>> lines(pt.names);  // (wait, fence) in grant order
  int ended = 0, failed = 0;
  for (int i = 0; i < pt.waits; ++i)
    locks[static_cast<std::size_t>(i) % pt.names].async_acquire(
        [&, i](std::exception_ptr e, std::optional<dblock::Lease> lease) {
          std::lock_guard lk(m);
          if (e || !lease) ++failed;
          else lines[static_cast<std::size_t>(i) % pt.names].emplace_back(i, lease->fence());
          if (++ended == pt.waits) all_ended.notify_all();
        },  // released as the callback returns: the next in the line is granted
        milliseconds(120'000));
  std::this_thread::sleep_for(milliseconds(300));  // every wait queued, the heads at the server
  const auto released = Clock::now();
  held.clear();
  bool drained;
  {
    std::unique_lock lk(m);
    drained = all_ended.wait_for(lk, milliseconds(180'000), [&] { return ended == pt.waits; });
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - released).count();
  peak.done = true;
  sampler.join();
  if (!drained) throw std::runtime_error(fmt::format("scale async: {} of {} waits on {} ended within 180 s", ended,
                                                     pt.waits, backend));
  // Each line in arrival order with rising fences: anything else is an error of the run.
  std::uint64_t out_of_order = 0;
  for (const auto& line : lines)
    for (std::size_t k = 1; k < line.size(); ++k)
      if (line[k].first <= line[k - 1].first || line[k].second <= line[k - 1].second) ++out_of_order;
  Row row{backend, std::string(dblock::to_string(strategy)), "scale-async", pt.waits, Summary{}};
  row.own_table = true;
  row.names = pt.names;
  row.s.samples = static_cast<std::size_t>(pt.waits);
  row.s.ops_per_s = seconds > 0 ? pt.waits / seconds : 0;
  row.threads_more = peak.threads - threads0;
  row.sockets_more = peak.sockets - sockets0;
  if (backend != "sqlite") row.server_connections = std::max(0.0, peak.connections - connections0);
  row.errors = static_cast<std::uint64_t>(failed) + out_of_order;
  fmt::print(stderr,
             "dblock-bench: scale async {}: {} waits on {} names: {:.1f} s to grant them all ({:.0f}/s), {} threads "
             "and {} sockets more at most, {} server connections more, {} failed, {} out of order\n",
             backend, pt.waits, pt.names, seconds, row.s.ops_per_s, *row.threads_more, *row.sockets_more,
             row.server_connections ? fmt::format("{:.0f}", *row.server_connections) : "-", failed, out_of_order);
  return row;
}

void run_async_points(BackendReport& rep, const std::string& backend, const std::string& url, const Options& opt) {
  for (const auto& pt : async_points(opt, backend)) {
    try {
      rep.rows.push_back(async_point(backend, url, pt));
    } catch (const std::exception& e) {
      rep.notes.push_back(fmt::format("{} scale async, {} waits on {} names: {}", backend, pt.waits, pt.names,
                                      e.what()));
    }
  }
}

// The backends the scenario runs, with their URLs (sqlite: a file in a fresh directory).
std::vector<std::pair<std::string, std::string>> scale_backends(const Options& opt, const std::string& sqlite_dir) {
  std::vector<std::pair<std::string, std::string>> out;
  if (opt.wants_backend("postgresql"))
    if (const char* u = env_url("DBLOCK_TEST_PG_URL")) out.emplace_back("postgresql", u);
  if (opt.wants_backend("mysql"))
    if (const char* u = env_url("DBLOCK_TEST_MYSQL_URL")) out.emplace_back("mysql", u);
  if (opt.wants_backend("sqlite")) out.emplace_back("sqlite", "sqlite:" + sqlite_dir + "/scale.db");
  if (opt.wants_backend("redis"))
    if (const char* u = env_url("DBLOCK_TEST_REDIS_URL")) out.emplace_back("redis", u);
  return out;
}

}  // namespace

// argv: --scale-worker STRATEGY TABLE NAMES MILLIS SEED; the URL in $DBLOCK_BENCH_WORKER_URL.
int scale_worker_main(int argc, char** argv) {
  return report_worker([&] {
    if (argc != 7) throw std::runtime_error("usage: --scale-worker STRATEGY TABLE NAMES MILLIS SEED");
    dblock::LockOptions lo;
    lo.strategy = dblock::parse_strategy(argv[2]);
    dblock::ClientOptions options;
    options.table = argv[3];
    const std::size_t names = std::stoul(argv[4]);
    const milliseconds run_for(std::stoll(argv[5]));
    std::mt19937 pick(static_cast<unsigned>(std::stoul(argv[6])));
    auto client = dblock::Client::open(worker_url(), options);
    // Connected before the start: 128 processes opening their sessions inside a short run
    // spent much of it connecting (2 s runs measured half the rate of 10 s ones).
    client->lock(fmt::format("bench-scale-warm-{}", argv[6]), lo).try_acquire(kProcessWait).value().release();
    worker_ready_then_wait();
    std::uint64_t grants = 0, timeouts = 0, errors = 0;
    std::string first_error;
    std::vector<double> waits_us;
    const auto start = Clock::now(), until = start + run_for;
    while (Clock::now() < until) {
      const std::string name = fmt::format("bench-scale-proc-{}", pick() % names);
      try {
        auto asked = Clock::now();
        auto lease = client->lock(name, lo).try_acquire(kProcessWait);
        if (!lease) {
          ++timeouts;
          continue;
        }
        const auto granted = Clock::now();
        lease->release();
        if (granted > until) break;  // the run is over: a grant after it is not counted
        waits_us.push_back(std::round(std::chrono::duration<double, std::micro>(granted - asked).count()));
        ++grants;
      } catch (const std::exception& e) {  // counted, not fatal: the report says how many and the first
        if (errors++ == 0) first_error = e.what();
        std::this_thread::sleep_for(milliseconds(10));
      }
    }
    return json{{"elapsed_s", std::chrono::duration<double>(run_for).count()},
                {"grants", grants},
                {"timeouts", timeouts},
                {"errors", errors},
                {"first_error", first_error},
                {"waits_us", waits_us}};
  });
}

BackendReport run_scale(const Options& opt) {
  BackendReport rep;
  if (!opt.wants_scenario("scale")) return rep;
  std::string dir = "/tmp/dblock-bench-scale.XXXXXX";
  if (!mkdtemp(dir.data())) throw std::runtime_error(fmt::format("mkdtemp {} failed", dir));
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_dir{dir};
  const Plan p = plan(opt);
  const auto started = Clock::now();
  for (const auto& [backend, url] : scale_backends(opt, dir)) {
    {
      dblock::ClientOptions options;  // the table, created on first use and kept
      options.table = kTable;
      options.auto_migrate = true;
      dblock::Client::open(url, options);
    }
    run_held(rep, backend, url, p);
    if (backend != "redis") run_process_points(rep, backend, url, p);
    run_async_points(rep, backend, url, opt);
  }
  fmt::print(stderr, "dblock-bench: scale: {:.0f} s\n", std::chrono::duration<double>(Clock::now() - started).count());
  rep.notes.push_back(fmt::format(
      "scale held: one Client (default ClientOptions, table `{}`) acquires N locks with ttl {} ms (renewed every "
      "{} ms; the SQL backends renew a table's leases due together in one statement); acquires on {} threads from "
      "N = 100 (grants/s = N / their span; p50/p99 per acquire); then, two renewal ticks later (the first attaches "
      "each lease to its Client row where the backend has them), "
      "the hold measured over {} ms: the server's connections at its end less those before the Client opened, its "
      "statements per second, its log bytes per held lock per minute and its CPU seconds per second; CPU per grant "
      "over the acquires. `bare-renew`: one connection inserts N rows (the first {} one INSERT each, timed; p50/p99 "
      "and grants/s are theirs), then sends one single-row UPDATE per row per tick (what renewing one statement per "
      "lease costs); a lock row's ratio = its statements/s / bare-renew's at the same N. for-update is left out: it "
      "pins a connection per held lock (see resources). Read as orders of magnitude: CPU comes from /proc in "
      "clock ticks of {} ms (a figure over a few grants is 0 or one tick), and the log figures include the "
      "server's background writes (autovacuum, checkpoints' full-page images, InnoDB purge), which dominate at "
      "small N",
      kTable, p.ttl.count(), (p.ttl / 3).count(), kAcquireThreads, p.window.count(), kBareTimedInserts,
      1000 / sysconf(_SC_CLK_TCK)));
  rep.notes.push_back(fmt::format(
      "scale processes: P worker processes (this binary again), one Client each (default options, ttl 30 s), loop "
      "for {} ms on try_acquire (wait up to {} s) + release of a random name of K (K = 1 and 4P, at most 10,000), "
      "`insert`, each connected (one grant of a name of its own) before they all start; grants/s = the grants "
      "made within the run / its length (a wait still under way at its end is not counted); wait = asking to holding; connections = the peak "
      "of the server's count sampled every 50 ms, less its count before the workers started; statements/s over the run, less the sampler's own; CPU per grant "
      "over the run. A worker's acquire or release that throws is counted in `errors` (so is a worker that "
      "cannot open its Client)",
      p.run_for.count(), kProcessWait.count() / 1000));
  rep.notes.push_back(
      "scale async: one Client (default options, `insert`; redis: `redis`) queues W asynchronous acquires "
      "(Lock::async_acquire, each released as its callback returns) round-robin on K names that another Client "
      "holds; once all have queued (300 ms), that Client lets go and the lines drain. Time = from that release to "
      "the last grant; threads and sockets = this process's (/proc/self), the most reached less before the first "
      "acquire; server connections likewise (sqlite: none); errors = failed waits plus grants out of arrival "
      "order or with a fence not above the one before (0 in a correct run). mysql runs the 10,000-wait point "
      "only: its lease attempts wait on turn keys inside the server, a worker thread and a connection per name");
  return rep;
}

void print_scale_markdown(const std::vector<Row>& rows) {
  auto f = [](const std::optional<double>& v, const char* spec) {
    return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
  };
  bool held = false, procs = false, async = false;
  for (const auto& r : rows)
    held |= r.scenario == "scale-held", procs |= r.scenario == "scale-processes", async |= r.scenario == "scale-async";
  if (held) {
    fmt::print("\n## scale: one Client holds N locks\n\n"
               "| backend | strategy | held | grants/s | p50 us | p99 us | server CPU us/grant | connections | "
               "statements/s | x bare | log B/lock/min | server CPU s/s |\n"
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& r : rows)
      if (r.scenario == "scale-held")
        fmt::print("| {} | {} | {} | {:.0f} | {:.0f} | {:.0f} | {} | {} | {} | {} | {} | {} |\n", r.backend,
                   r.strategy, r.workers, r.s.ops_per_s, r.s.p50_us, r.s.p99_us, f(r.cpu_us_per_grant, "{:.0f}"),
                   f(r.server_connections, "{:.0f}"), f(r.statements_per_s, "{:.1f}"),
                   r.vs.empty() ? "-" : fmt::format("{:.3f}", r.vs[0].ratio), f(r.log_bytes_per_lock_min, "{:.0f}"),
                   f(r.cpu_share, "{:.3f}"));
  }
  if (procs) {
    fmt::print("\n## scale: P processes contend on K names\n\n"
               "| backend | strategy | processes | names | grants/s | wait p50 us | wait p99 us | peak connections | "
               "statements/s | server CPU us/grant | errors |\n"
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& r : rows)
      if (r.scenario == "scale-processes")
        fmt::print("| {} | {} | {} | {} | {:.0f} | {:.0f} | {:.0f} | {} | {} | {} | {} |\n", r.backend, r.strategy,
                   r.workers, r.names, r.s.ops_per_s, r.s.p50_us, r.s.p99_us, f(r.server_connections, "{:.0f}"),
                   f(r.statements_per_s, "{:.0f}"), f(r.cpu_us_per_grant, "{:.0f}"), r.errors);
  }
  if (async) {
    fmt::print("\n## scale: one Client's asynchronous waits\n\n"
               "| backend | strategy | waits | names | grants/s | threads more | sockets more | server connections more "
               "| errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& r : rows)
      if (r.scenario == "scale-async")
        fmt::print("| {} | {} | {} | {} | {:.0f} | {} | {} | {} | {} |\n", r.backend, r.strategy, r.workers, r.names,
                   r.s.ops_per_s, r.threads_more.value_or(0), r.sockets_more.value_or(0),
                   f(r.server_connections, "{:.0f}"), r.errors);
  }
  std::fflush(stdout);
}

}  // namespace dblock_bench
