#include "bench/report/page.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "bench/scenarios/fill.hpp"    // short_count
#include "bench/scenarios/peers.hpp"   // kContenders, kHoldMs
#include "bench/scenarios/shapes.hpp"  // kShapeHolders
#include "bench/support/run.hpp"       // kHandoffWorkers, kHandoffRounds
#include "dblock/dblock.hpp"

namespace fs = std::filesystem;

namespace dblock_bench {

namespace {

// ---- facts about the run ------------------------------------------------------------

std::string shell_quoted(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                            "-_./=:,+@%") == std::string::npos)
    return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The first line a command prints, or "" (no shell quoting needed: the arguments are ours).
std::string first_line_of(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[256];
    if (std::fgets(buf, sizeof buf, p)) out = buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string file_field(const char* path, const std::string& key) {  // "key<sep> value" lines
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) {
      auto v = line.find_first_not_of(" \t:=\"", key.size());
      std::string value = v == std::string::npos ? "" : line.substr(v);
      while (!value.empty() && (value.back() == '"' || value.back() == ' ')) value.pop_back();
      return value;
    }
  return {};
}

std::string utc(std::chrono::system_clock::time_point t, const char* format) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  if (!(in >> a >> b >> c)) return "unknown";
  return fmt::format("{}, {}, {}", a, b, c);
}

// ---- reading the rows ---------------------------------------------------------------

bool is_lock_strategy(const std::string& strategy) {  // else a bare baseline (select1, bare-insert, ...)
  try {
    dblock::parse_strategy(strategy);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

struct Key {
  std::string backend, strategy;
};

// The lock strategies that ran, per backend, in the order the run measured them.
std::vector<Key> strategies_in(const std::vector<Row>& rows, const std::set<std::string>& scenarios) {
  std::vector<Key> out;
  for (const auto& r : rows)
    if (scenarios.count(r.scenario) && is_lock_strategy(r.strategy) &&
        std::none_of(out.begin(), out.end(),
                     [&](const Key& k) { return k.backend == r.backend && k.strategy == r.strategy; }))
      out.push_back({r.backend, r.strategy});
  return out;
}

const Row* find(const std::vector<Row>& rows, const std::string& backend, const std::string& strategy,
                const std::string& scenario, int workers = -1) {
  for (const auto& r : rows)
    if (r.backend == backend && r.strategy == strategy && r.scenario == scenario &&
        (workers < 0 || r.workers == workers))
      return &r;
  return nullptr;
}

bool any_of_scenario(const std::vector<Row>& rows, const std::string& scenario) {
  return std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.scenario == scenario; });
}

std::optional<double> ratio_to(const Row& r, const std::string& baseline) {
  for (const auto& c : r.vs)
    if (c.baseline == baseline) return c.ratio;
  return std::nullopt;
}

// ---- numbers --------------------------------------------------------------------------

std::string us(double v) { return v <= 0 ? "-" : v < 10 ? fmt::format("{:.1f}", v) : fmt::format("{:.0f}", v); }
std::string ms(double v_us) {
  const double v = v_us / 1000;
  return v_us <= 0 ? "-" : v < 10 ? fmt::format("{:.2f}", v) : v < 100 ? fmt::format("{:.1f}", v)
                                                                         : fmt::format("{:.0f}", v);
}
std::string times(double r) {
  return r <= 0 ? "-" : r < 10 ? fmt::format("{:.2f}", r) : r < 100 ? fmt::format("{:.1f}", r) : fmt::format("{:.0f}", r);
}
std::string two_digits(double r) {  // two significant digits: 0.0063, 0.63, 6.3, 63
  return r >= 10 ? fmt::format("{:.0f}", r) : r >= 1 ? fmt::format("{:.1f}", r) : fmt::format("{:.2g}", r);
}
std::string per_s(double v) { return v <= 0 ? "-" : fmt::format("{:.0f}", v); }

// ---- the page -------------------------------------------------------------------------

class Page {
 public:
  template <typename... Args>
  void line(fmt::format_string<Args...> f, Args&&... args) {
    fmt::format_to(std::back_inserter(buf_), f, std::forward<Args>(args)...);
    buf_.push_back('\n');
  }
  void text(const std::string& s) { line("{}", s); }
  void heading(const std::string& title) { line("\n## {}\n", title); }
  // A table: the header's cells, then one alignment per column ('l' or 'r').
  void table(const std::vector<std::string>& head, const std::string& align,
             const std::vector<std::vector<std::string>>& body) {
    std::string h = "|", a = "|";
    for (std::size_t i = 0; i < head.size(); ++i) {
      h += " " + head[i] + " |";
      a += i < align.size() && align[i] == 'r' ? "---:|" : "---|";
    }
    text(h);
    text(a);
    for (const auto& row : body) {
      std::string l = "|";
      for (const auto& c : row) l += " " + (c.empty() ? std::string("-") : c) + " |";
      text(l);
    }
  }
  std::string str() const { return fmt::to_string(buf_); }

 private:
  fmt::memory_buffer buf_;
};

void header(Page& p, const RunReport& run, const Options& opt, std::chrono::system_clock::time_point ended) {
  const auto& f = run.facts;
  const auto minutes = std::chrono::duration_cast<std::chrono::minutes>(ended - f.started).count();
  p.text("# Benchmarks: which lock for which job");
  p.text("");
  p.text("Generated by `dblock-bench --markdown` from one run; not edited by hand. Every figure below comes from");
  p.text("that run. To regenerate the page, start the servers the bench uses and run the same command:");
  p.text("");
  p.text("```");
  p.text("tls=\"postgresql-tls mysql-tls redis-tls etcd-tls pgbouncer\"  # the TLS twins (scenario tls), the pooler");
  p.text("scripts/services start && scripts/services start $tls");
  p.text("eval \"$(scripts/services env; scripts/services env $tls)\"");
  p.text(f.command);
  p.text("```");
  p.text("");
  p.text("The servers' flush (the **Servers** lines below say which) and the vCPUs (`--keep-awake`) are the run's");
  p.text("two conditions. With the flush off, the databases' commits do not wait for the disk: start the servers");
  p.text("with `DBLOCK_SERVICES_FLUSH=off` (PostgreSQL `fsync = off`, MariaDB");
  p.text("`innodb_flush_log_at_trx_commit = 2`; `scripts/services restart postgresql mysql` to change running ones)");
  p.text("and run the bench under `eatmydata` (Debian's package: SQLite's fsync returns at once).");
  p.text("");
  p.line("- **Command**: `{}`", f.command);
  p.line("- **Date**: {} to {} UTC ({} min; the end is when this page was written)", utc(f.started, "%Y-%m-%d %H:%M"),
         utc(ended, "%H:%M"), minutes);
  if (run.done.size() == run.parts.size()) {
    p.text("- **Coverage**: the whole run, every part of it done");
  } else {
    std::string done, left;
    for (const auto& d : run.done) done += (done.empty() ? "" : ", ") + d;
    for (const auto& x : run.parts)
      if (std::find(run.done.begin(), run.done.end(), x) == run.done.end()) left += (left.empty() ? "" : ", ") + x;
    p.line("- **Coverage**: part of the run: {} done; {} not (the page is written again as each part ends, and the "
           "run stopped before these)", done.empty() ? "nothing" : done, left);
  }
  p.line("- **Commit**: {}", f.commit);
  p.line("- **Machine**: {}", f.machine);
  p.line("- **Load average** (1, 5, 15 min): {} at the start, {} when this page was written", f.load,
         load_average());
  for (const auto& n : run.notes)
    if (n.rfind("vCPUs: ", 0) == 0) p.line("- **vCPUs**: {}", n.substr(7));
  p.line("- **Waiters**: {}", opt.unfair ? "unfair (--unfair: no queue, whoever asks first wins)"
                                         : "fair (the default: waiters queue)");
  std::string scenarios;
  for (const auto& s : opt.scenarios) scenarios += (scenarios.empty() ? "" : ", ") + s;
  if (scenarios.empty()) scenarios = "all";
  std::string skipped;
  for (const auto& s : opt.skipped_scenarios) skipped += (skipped.empty() ? " but " : ", ") + s;
  p.line("- **Scenarios**: {}{}; {} timed cycles per uncontended series, {} timed hand-offs per hand-off series",
         scenarios, skipped, opt.iterations, opt.handoffs);
  p.text("- **Servers** (the settings that decide what a grant waits for):");
  for (const auto& s : run.servers) p.line("  - {}", s);
  for (const auto& s : run.skipped) p.line("  - skipped {}", s);
}

void reading(Page& p) {
  p.heading("Reading these figures");
  p.text("Times are microseconds (us) or milliseconds (ms), p50 and p99 over the run's samples. Quote the");
  p.text("ratios, which compare series measured side by side in this run, not the absolute times: a durable grant");
  p.text("waits for an fsync whose cost moves with the disk and the hour, and the load average above says how busy");
  p.text("the machine was. Client and servers share the machine, so server work and client work compete.");
}

struct Advice {
  const char* job;
  const char* choose;
  std::vector<Key> keys;  // whose figures the last column shows
  const char* why;
};

std::string figures_of(const std::vector<Row>& rows, const Key& k) {
  const std::string who = k.backend == k.strategy ? k.backend : k.backend + " " + k.strategy;
  std::vector<std::string> parts;
  if (const Row* u = find(rows, k.backend, k.strategy, "uncontended")) parts.push_back(ms(u->s.p50_us) + " ms alone");
  if (const Row* h = find(rows, k.backend, k.strategy, "handoff")) parts.push_back("hand-off " + ms(h->s.p50_us) + " ms");
  double lo = 0, hi = 0, jain = 2;
  for (const auto& r : rows)
    if (r.backend == k.backend && r.strategy == k.strategy && r.scenario == "contended" && r.workers >= 4) {
      lo = lo == 0 ? r.s.ops_per_s : std::min(lo, r.s.ops_per_s);
      hi = std::max(hi, r.s.ops_per_s);
      if (r.fairness) jain = std::min(jain, *r.fairness);
    }
  if (hi > 0)
    parts.push_back(lo == hi ? fmt::format("{:.0f} grants/s with 4 workers", hi)
                             : fmt::format("{:.0f}-{:.0f} grants/s with 4 or more workers", lo, hi));
  if (jain <= 1) parts.push_back(fmt::format("Jain {:.2f} or more", jain));
  if (parts.empty()) return who + ": not measured in this run";
  std::string out = who + ": ";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

void advice(Page& p, const std::vector<Row>& rows) {
  // Why each choice holds is a property of the strategy, true whatever this run measured;
  // the figures beside it are this run's.
  static const std::vector<Advice> kAdvice = {
      {"one machine, no server", "SQLite `insert` (or `optimistic`)", {{"sqlite", "insert"}},
       "no server to run or lose; one writer at a time on the file, so grants/s do not grow with workers"},
      {"PostgreSQL, short critical sections, many waiters", "`advisory`", {{"postgresql", "advisory"}},
       "the server queues the waiters and hands the lock over itself, nothing is flushed per grant; pins one "
       "connection per held lock"},
      {"PostgreSQL, jobs of minutes to hours (cron, `dblock run`), many locks held, holders that may die",
       "`insert` (a lease)", {{"postgresql", "insert"}},
       "no pinned connection, survives a server restart, visible in `dblock list`, freed at its TTL when the "
       "holder dies; one flushed commit per grant"},
      {"PostgreSQL, a row you lock anyway", "`for-update`", {{"postgresql", "for-update"}},
       "holds a transaction open as long as the lock (vacuum, idle-in-transaction timeouts): not for long jobs"},
      {"MySQL / MariaDB, short critical sections, many waiters", "`advisory` (GET_LOCK) or `for-update`",
       {{"mysql", "advisory"}, {"mysql", "for-update"}},
       "the server queues the waiters, no durable commit per grant; one pinned connection per held lock"},
      {"MySQL / MariaDB, long jobs", "`insert` or `optimistic`", {{"mysql", "insert"}},
       "a lease as on PostgreSQL, a durable commit per grant and per release; MySQL has no notifications, so lease "
       "waiters poll"},
      {"Redis already there", "`redis`", {{"redis", "redis"}},
       "a lease in one script round trip each way; durable only as far as Redis' persistence (appendfsync above)"},
      {"must survive a Redis node failure", "`redlock` (5 nodes)", {{"redlock", "redlock"}},
       "every acquire and release goes to all nodes and needs a majority's answer, so it costs more per call"},
      {"ZooKeeper already there", "`zookeeper`", {{"zookeeper", "zookeeper"}},
       "waiters queue as sequential nodes, each watching the one before it (first come, first served); every "
       "grant is a write to the ensemble's log"},
      {"etcd already there", "`etcd`", {{"etcd", "etcd"}},
       "waiters queue by revision, each watching the key before it; every grant is a write to the WAL"},
  };
  p.heading("Which strategy for what");
  p.text("The reasons in the third column are what each strategy is, whatever the figures; the last column is what");
  p.line("this run measured (uncontended p50, hand-off p50 with {} waiters, and the `contended` scenario's range).",
         kHandoffWorkers);
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& a : kAdvice) {
    std::string figs;
    for (const auto& k : a.keys) figs += (figs.empty() ? "" : "; ") + figures_of(rows, k);
    body.push_back({a.job, a.choose, a.why, figs});
  }
  // Read/write locks: which strategies let 8 readers through best, from this run.
  std::vector<std::pair<double, std::string>> readers;
  for (const auto& r : rows)
    if (r.scenario == "shared" && r.holders == "8 readers" && !r.vs.empty())
      readers.emplace_back(r.vs.front().ratio, fmt::format("{} {} {:.1f}x", r.backend, r.strategy, r.vs.front().ratio));
  std::sort(readers.begin(), readers.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string best;
  for (std::size_t i = 0; i < readers.size() && i < 4; ++i) best += (i ? ", " : "") + readers[i].second;
  body.push_back({"many readers of one name", "a strategy with read/write locks (section \"Read/write locks\")",
                  "readers hold at once; the section's table shows what a writer beside them gets",
                  best.empty() ? std::string("not measured in this run")
                               : "8 readers' grants/s over 8 exclusive lockers': " + best});
  p.table({"job", "choose", "why", "this run"}, "llll", body);
  p.text("");
  p.text("Session strategies (`for-update`, `advisory`) end with their connection and cost one server connection per");
  p.text("held lock; leases (`insert`, `optimistic`, `redis`, `redlock`, `zookeeper`, `etcd`) cost none and are freed");
  p.text("when their holder dies (at their TTL; ZooKeeper's at the session's timeout). Every strategy's fences increase");
  p.text("with each grant.");
}

void uncontended(Page& p, const std::vector<Row>& rows, const Options& opt) {
  // Baselines alone (a run of other scenarios, whose floors they are) make no section.
  if (strategies_in(rows, {"uncontended"}).empty()) return;
  p.heading("Uncontended: one acquire + release");
  p.line("One thread, `try_acquire()` then `release()` of one name, {} timed cycles per series, interleaved in the", opt.iterations);
  p.text("same run with bare baselines written on the driver directly: the statements each strategy cannot avoid");
  p.text("(`bare-...`, redis `set-nx-px+del`, zookeeper `bare-create-delete`) and the least a correct fenced lease");
  p.text("sends (`bare-lease-...`, redis `fenced-floor`, etcd `bare-recipe`); the notes at the end say what each sends.");
  p.text("Ratio = dblock's p50 / the baseline's p50: 1.00 adds nothing; below 1, dblock needs fewer round trips than");
  p.text("the bare statements (the fence drawn in the lock's own statement, a read it can skip).");
  p.text("`x round trip` = p50 / one round trip to the same server (`SELECT 1`, PING, a ZooKeeper exists, an etcd");
  p.text("Range). `re-entry` = acquiring again a lock the thread already holds.");
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& k : strategies_in(rows, {"uncontended"})) {
    const Row* r = find(rows, k.backend, k.strategy, "uncontended");
    if (!r) continue;
    std::string vs;
    for (std::size_t i = 0; i < r->vs.size() && i < std::max<std::size_t>(r->shown, 1); ++i)
      if (r->vs[i].baseline != "select1")
        vs += fmt::format("{}`{}` {}", vs.empty() ? "" : ", ", r->vs[i].baseline, times(r->vs[i].ratio));
    auto rt = ratio_to(*r, "select1");
    const Row* re = find(rows, k.backend, k.strategy, "reentrant");
    body.push_back({k.backend, k.strategy, us(r->s.p50_us), us(r->s.p99_us), vs, rt ? times(*rt) : "",
                    re ? us(re->s.p50_us) : ""});
  }
  p.table({"backend", "strategy", "p50 us", "p99 us", "ratio to its baselines (p50)", "x round trip", "re-entry p50 us"},
          "llrrlrr", body);
  p.text("");
  p.text("The baselines' own p50 in this run (us):");
  std::vector<std::string> backends;
  for (const auto& r : rows)
    if (r.scenario == "uncontended" && std::find(backends.begin(), backends.end(), r.backend) == backends.end())
      backends.push_back(r.backend);
  for (const auto& b : backends) {
    std::string line;
    for (const auto& r : rows)
      if (r.backend == b && r.scenario == "uncontended" && !is_lock_strategy(r.strategy))
        line += fmt::format("{}`{}` {}", line.empty() ? "" : ", ", r.strategy, us(r.s.p50_us));
    if (!line.empty()) p.line("- {}: {}", b, line);
  }
}

void handoff(Page& p, const std::vector<Row>& rows, const Options& opt) {
  if (!any_of_scenario(rows, "handoff") && !any_of_scenario(rows, "handoff-polling")) return;
  p.heading(fmt::format("Hand-off: {} waiters on one name", kHandoffWorkers));
  p.line("{} threads, each with its own Client, contend for one name; {} timed hand-offs per series, latency from",
         kHandoffWorkers, opt.handoffs);
  p.text("the holder's `release()` call to the next holder's grant (no barging). The floor is dblock's own grant and");
  p.text("release written directly on the driver with the backend's fastest wake-up and nothing else of dblock's");
  p.text("(`bare-...-handoff`, defined in the notes): ratio 1.00 = dblock adds nothing to a hand-off. The floors and");
  p.line("the notified series run in {} rounds, the order rotated each round, so that drift (a disk's flush time",
         kHandoffRounds);
  p.text("moves by half between series minutes apart) hits a strategy and its floor alike. `x round trip`");
  p.text("as above (SQLite: x its bare INSERT + DELETE). Polling: the same with notifications off, waiters poll with");
  p.text("backoff; polling / notified is what notifications buy (ZooKeeper and etcd always watch: about 1).");
  p.text("Async: the same series through `Lock::async_acquire`, in the same rounds; async / blocking is what");
  p.text("waiting without a thread costs a hand-off (the grant timed when its callback runs on the event thread).");
  p.text("Hop: the blocking series once more, each grant then handed to a thread built as a Client's event thread");
  p.text("and timed there: what completing on an event thread costs by itself; async / hop is what the rest of the");
  p.text("asynchronous path adds (1.00: nothing).");
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& k : strategies_in(rows, {"handoff", "handoff-polling"})) {
    const Row* h = find(rows, k.backend, k.strategy, "handoff");
    const Row* off = find(rows, k.backend, k.strategy, "handoff-polling");
    std::string floor, rt;
    if (h)
      for (const auto& c : h->vs) {
        const bool is_floor = c.baseline.size() > 8 && c.baseline.compare(c.baseline.size() - 8, 8, "-handoff") == 0;
        if (is_floor && floor.empty()) {
          const Row* f = find(rows, k.backend, c.baseline, "handoff");
          floor = fmt::format("`{}` {} us: {}", c.baseline, f ? us(f->s.p50_us) : "?", times(c.ratio));
        } else if (!is_floor && rt.empty()) {
          rt = times(c.ratio);
        }
      }
    const Row* async = find(rows, k.backend, k.strategy, "handoff-async");
    const Row* hop = find(rows, k.backend, k.strategy, "handoff-hop");
    std::string polling_ratio, async_ratio, hop_ratio, async_hop;
    if (off && h && h->s.p50_us > 0) polling_ratio = times(off->s.p50_us / h->s.p50_us);
    if (async && h && h->s.p50_us > 0) async_ratio = times(async->s.p50_us / h->s.p50_us);
    if (hop && h && h->s.p50_us > 0) hop_ratio = times(hop->s.p50_us / h->s.p50_us);
    if (async && hop && hop->s.p50_us > 0) async_hop = times(async->s.p50_us / hop->s.p50_us);
    body.push_back({k.backend, k.strategy, h ? us(h->s.p50_us) : "", h ? us(h->s.p99_us) : "",
                    h ? per_s(h->s.ops_per_s) : "", floor, rt, async ? us(async->s.p50_us) : "", async_ratio,
                    hop ? us(hop->s.p50_us) : "", hop_ratio, async_hop, off ? us(off->s.p50_us) : "",
                    polling_ratio});
  }
  p.table({"backend", "strategy", "p50 us", "p99 us", "hand-offs/s", "floor p50: ratio", "x round trip",
           "async p50 us", "async / blocking", "hop p50 us", "hop / blocking", "async / hop", "polling p50 us",
           "polling / notified"},
          "llrrrlrrrrrrrr", body);
}

void contended(Page& p, const std::vector<Row>& rows) {
  if (!any_of_scenario(rows, "contended")) return;
  std::set<int> counts;
  for (const auto& r : rows)
    if (r.scenario == "contended") counts.insert(r.workers);
  p.heading("Contended: many workers on one name");
  p.text("N workers (threads spread over worker processes, each with its own Client) loop on acquire + release of");
  p.text("one name. First grants/s, and Jain's fairness index over the grants per worker (1.00: every worker got as");
  p.text("many; the lowest over the worker counts); then the wait from asking to holding, p50 / p99 in ms. Every");
  p.text("holder bumps a counter in a shared file and checks that its fence went up: a lost update or a stale fence");
  p.text("ends the run, so these figures come from a run with none.");
  p.text("");
  std::vector<std::string> head{"backend", "strategy"}, head2{"backend", "strategy"};
  std::string align = "ll", align2 = "ll";
  for (int n : counts) {
    head.push_back(fmt::format("{} {}", n, n == 1 ? "worker" : "workers"));
    head2.push_back(fmt::format("{}", n));
    align += 'r';
    align2 += 'r';
  }
  head.push_back("Jain");
  align += 'r';
  std::vector<std::vector<std::string>> grants, waits;
  for (const auto& k : strategies_in(rows, {"contended"})) {
    std::vector<std::string> g{k.backend, k.strategy}, w{k.backend, k.strategy};
    double jain = 2;
    for (int n : counts) {
      const Row* r = find(rows, k.backend, k.strategy, "contended", n);
      g.push_back(r ? per_s(r->s.ops_per_s) : "");
      w.push_back(r ? ms(r->s.p50_us) + " / " + ms(r->s.p99_us) : "");
      if (r && r->fairness) jain = std::min(jain, *r->fairness);
    }
    g.push_back(jain <= 1 ? fmt::format("{:.2f}", jain) : "");
    grants.push_back(std::move(g));
    waits.push_back(std::move(w));
  }
  p.table(head, align, grants);
  p.text("");
  p.text("Wait p50 / p99 (ms) by workers:");
  p.text("");
  p.table(head2, align2, waits);
}

void shapes(Page& p, const std::vector<Row>& rows, const Options& opt) {
  if (!any_of_scenario(rows, "exclusive")) return;
  p.heading("Read/write locks and semaphores");
  p.line("8 workers on one name, each holding its grant {} ms: 8 exclusive lockers (the baseline), 8 readers, 7",
         opt.shape_hold_ms);
  p.text("readers beside 1 writer (the readers' and the writer's grants/s), and 8 workers on a semaphore of 4");
  p.text("permits. Cells: grants/s (x the 8 exclusive lockers'); readers that share a grant approach 8x, 4 permits");
  p.text("4x. A strategy that does not offer a shape has no cell. Holders count themselves: a reader beside a");
  p.text("writer or a fifth permit holder ends the run.");
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& k : strategies_in(rows, {"exclusive", "shared", "semaphore"})) {
    std::vector<std::string> line{k.backend, k.strategy};
    for (const auto& h : kShapeHolders) {
      const Row* r = nullptr;
      for (const auto& x : rows)
        if (x.backend == k.backend && x.strategy == k.strategy && x.holders == h) r = &x;
      if (!r) line.emplace_back();
      else if (h == kShapeHolders.front()) line.push_back(per_s(r->s.ops_per_s));
      else line.push_back(fmt::format("{} ({}x)", per_s(r->s.ops_per_s), r->vs.empty() ? "-" : times(r->vs[0].ratio)));
    }
    body.push_back(std::move(line));
  }
  std::vector<std::string> head{"backend", "strategy"};
  for (const auto& h : kShapeHolders) head.push_back(h);
  p.table(head, "llrrrrr", body);
}

void transactions(Page& p, const std::vector<Row>& rows) {
  if (!any_of_scenario(rows, "txn")) return;
  p.heading("Locks in the caller's transaction");
  p.text("A transaction of the service's own that updates one row (`bare-txn`), then the same with");
  p.text("`LockTable::lock_in` first (a lock held until that transaction ends) or `check_in` (a check that a lease");
  p.text("held across the run is still ours); `-prepared`: with prepared statements. The floors add the least such a");
  p.text("call must send: `+select1` a round trip, `+lock-floor` the name's row locked and a fence drawn,");
  p.text("`+check-floor` the row share-locked. Ratio = p50 / the baseline named.");
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    if (r.scenario != "txn") continue;
    std::string vs;
    for (std::size_t i = 0; i < r.vs.size() && i < std::max<std::size_t>(r.shown, 1); ++i)
      if (r.vs[i].baseline != r.strategy)
        vs += fmt::format("{}`{}` {}", vs.empty() ? "" : ", ", r.vs[i].baseline, times(r.vs[i].ratio));
    body.push_back({r.backend, "`" + r.strategy + "`", us(r.s.p50_us), us(r.s.p99_us), vs});
  }
  p.table({"backend", "transaction", "p50 us", "p99 us", "ratio (p50)"}, "llrrl", body);
}

void resources(Page& p, const std::vector<Row>& rows) {
  if (!any_of_scenario(rows, "resources")) return;
  p.heading("Resources per held lock");
  p.text("One Client holds many locks on different names at once; per held lock, the growth from before the first");
  p.text("acquire of server connections (SQLite: the process's open files) and of the process's resident memory.");
  p.text("Session strategies pin a connection per held lock, so a server's connection limit bounds how many locks");
  p.text("one service holds at once; leases pin none.");
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& k : strategies_in(rows, {"resources"})) {
    const Row* r = find(rows, k.backend, k.strategy, "resources");
    body.push_back({k.backend, k.strategy, fmt::format("{}", r->workers),
                    r->connections_per_lock ? fmt::format("{:.2f}", *r->connections_per_lock) : "",
                    r->bytes_per_lock ? fmt::format("{:.0f}", *r->bytes_per_lock) : ""});
  }
  p.table({"backend", "strategy", "locks held", "connections per lock", "bytes per lock"}, "llrrr", body);
}

void table_size(Page& p, const std::vector<Row>& rows) {
  if (!any_of_scenario(rows, "table-size")) return;
  p.heading("Many names: the uncontended cycle beside other live leases");
  p.text("The uncontended cycle with other live leases already in the table or key space (ZooKeeper: children of");
  p.text("the root). Cells: other leases: p50 us (x the same strategy's p50 beside 1 other). A ratio near 1 means");
  p.text("the index keeps every acquire a lookup of one key, whatever the table holds.");
  p.text("");
  std::vector<std::vector<std::string>> body;
  std::size_t columns = 0;
  for (const auto& k : strategies_in(rows, {"table-size"})) {
    std::vector<const Row*> by_size;
    for (const auto& r : rows)
      if (r.backend == k.backend && r.strategy == k.strategy && r.scenario == "table-size") by_size.push_back(&r);
    std::sort(by_size.begin(), by_size.end(), [](const Row* a, const Row* b) { return a->table_rows < b->table_rows; });
    std::vector<std::string> line{k.backend, k.strategy};
    for (std::size_t i = 0; i < by_size.size(); ++i) {
      const Row* r = by_size[i];
      line.push_back(i == 0 ? fmt::format("{}: {}", short_count(r->table_rows), us(r->s.p50_us))
                            : fmt::format("{}: {} ({}x)", short_count(r->table_rows), us(r->s.p50_us),
                                          r->vs.empty() ? "-" : times(r->vs[0].ratio)));
    }
    columns = std::max(columns, by_size.size());
    body.push_back(std::move(line));
  }
  std::vector<std::string> head{"backend", "strategy"};
  std::string align = "ll";
  for (std::size_t i = 0; i < columns; ++i) {
    head.push_back(i == 0 ? "fewest others" : i + 1 == columns ? "most others" : "more others");
    align += 'r';
  }
  for (auto& line : body) line.resize(head.size());
  p.table(head, align, body);
}

void sweep(Page& p, const std::vector<Row>& rows) {
  if (!any_of_scenario(rows, "sweep")) return;
  p.heading("Sweeping expired rows");
  p.text("Expired rows put in a table of its own, then one `Client::sweep()` (batches of 1000); meanwhile 4 threads");
  p.text("acquire and release names of their own, compared with the same threads without a sweep (ratio on p99).");
  p.text("Only the SQL lease strategies leave rows to sweep: Redis keys expire, ZooKeeper's ephemeral nodes go with");
  p.text("their session and etcd's keys with their lease.");
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    if (r.scenario != "sweep" || r.vs.empty() || r.vs[0].baseline == r.strategy) continue;  // a no-sweep row
    const Row* idle = find(rows, r.backend, r.vs[0].baseline, "sweep");
    body.push_back({r.backend, r.strategy, fmt::format("{}", r.table_rows), per_s(r.s.ops_per_s),
                    idle ? us(idle->s.p50_us) + " / " + us(idle->s.p99_us) : "",
                    us(r.s.p50_us) + " / " + us(r.s.p99_us), times(r.vs[0].ratio)});
  }
  p.table({"backend", "strategy", "expired rows", "swept rows/s", "acquirers p50 / p99 us alone", "during the sweep",
           "p99 ratio"},
          "llrrrrr", body);
}

void peers(Page& p, const std::vector<Row>& rows) {
  if (!any_of_scenario(rows, "peers-uncontended") && !any_of_scenario(rows, "peers-contended")) return;
  p.heading("Peers: dblock beside the library a user would pick instead");
  p.text("The same server, the same run, each side as worker processes taking turns. Uncontended: one process");
  p.line("acquires and releases one name. Contended: {} processes on one name, each holding {} ms: the hand-off from",
         kContenders, kHoldMs);
  p.text("one process's release to the next process's grant, grants/s and Jain's index. Cells: dblock / peer (the");
  p.text("ratio): below 1 is better for dblock on latencies, above 1 on grants/s and Jain.");
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    if (r.scenario != "peers-uncontended" || r.vs.empty() || !is_lock_strategy(r.strategy)) continue;
    const std::string& peer = r.vs.front().baseline;
    const Row* pu = find(rows, r.backend, peer, "peers-uncontended");
    const Row* dc = find(rows, r.backend, r.strategy, "peers-contended");
    const Row* pc = find(rows, r.backend, peer, "peers-contended");
    auto pair = [](double d, double q, bool time) {
      auto f = [&](double v) { return time ? us(v) : v < 2 ? fmt::format("{:.2f}", v) : per_s(v); };
      return fmt::format("{} / {} ({})", f(d), f(q), q > 0 ? two_digits(d / q) : "-");
    };
    body.push_back({r.backend, r.strategy, peer, pu ? pair(r.s.p50_us, pu->s.p50_us, true) : "",
                    dc && pc ? pair(dc->s.p50_us, pc->s.p50_us, true) : "",
                    dc && pc ? pair(dc->s.ops_per_s, pc->s.ops_per_s, false) : "",
                    dc && pc ? pair(dc->fairness.value_or(0), pc->fairness.value_or(0), false) : ""});
  }
  p.table({"backend", "dblock", "peer", "uncontended p50 us", "hand-off p50 us", "grants/s", "Jain"}, "lllrrrr", body);
}

void tls(Page& p, const std::vector<Row>& rows) {
  if (!any_of_scenario(rows, "tls-uncontended")) return;
  p.heading("TLS: what encryption costs");
  p.text("Each backend's natural strategy in plaintext to the plain test server and over TLS (the server verified, a");
  p.text("client certificate presented) to its TLS twin, started with the same settings, on warm connections: the");
  p.text("handshake is paid once per pooled connection, not per lock. Cells: plaintext / TLS p50 us (the ratio).");
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    if (r.scenario != "tls-uncontended" || r.vs.empty()) continue;  // the TLS row names its plaintext row
    const std::string& plain = r.vs[0].baseline;
    auto cell = [&](const Row* a, const Row* b) {
      return a && b && !b->vs.empty() ? fmt::format("{} / {} ({})", us(a->s.p50_us), us(b->s.p50_us), times(b->vs[0].ratio))
                                      : std::string("-");
    };
    body.push_back({r.backend, plain, cell(find(rows, r.backend, plain, "tls-uncontended"), &r),
                    cell(find(rows, r.backend, plain, "tls-handoff"), find(rows, r.backend, r.strategy, "tls-handoff"))});
  }
  p.table({"backend", "strategy", "uncontended p50 us", "hand-off p50 us"}, "llrr", body);
}

void pooler(Page& p, const std::vector<Row>& rows) {
  if (!any_of_scenario(rows, "pooler-uncontended")) return;
  p.heading("Through a transaction pooler: PgBouncer");
  p.text("The lease strategies connecting to PostgreSQL directly and through PgBouncer in transaction mode in front of");
  p.text("it (20 server connections; `pooler=transaction`: statements unnamed, the release listener on the server");
  p.text("itself). Contended: 8 worker processes on one name, exclusion and fence order checked. Cells: direct /");
  p.text("through the pooler p50 us (the ratio).");
  p.text("");
  std::vector<std::vector<std::string>> body;
  for (const auto& r : rows) {
    if (r.scenario != "pooler-uncontended" || !r.vs.empty()) continue;  // the direct rows
    auto cell = [&](const char* scenario) {
      const Row* a = find(rows, r.backend, r.strategy, scenario);
      const Row* b = find(rows, r.backend, r.strategy + " pgbouncer", scenario);
      return a && b && !b->vs.empty() ? fmt::format("{} / {} ({})", us(a->s.p50_us), us(b->s.p50_us), times(b->vs[0].ratio))
                                      : std::string("-");
    };
    body.push_back({r.strategy, cell("pooler-uncontended"), cell("pooler-handoff"), cell("pooler-contended")});
  }
  p.table({"strategy", "uncontended p50 us", "hand-off p50 us", "contended wait p50 us"}, "lrrr", body);
}

// A measured figure (a measured 0, e.g. CPU below the clock tick, shows as 0), or empty.
std::string opt_cell(const std::optional<double>& v, const std::function<std::string(double)>& f) {
  return !v ? std::string() : *v <= 0 ? std::string("0") : f(*v);
}

void scale(Page& p, const std::vector<Row>& rows) {
  if (any_of_scenario(rows, "scale-held")) {
    p.heading("Scale: one Client holds N locks");
    p.text("One Client acquires N locks with a short TTL (the notes give it, and the window), then holds them; the");
    p.text("server's own figures over the hold: its connections, statements per second, log bytes (WAL, InnoDB redo,");
    p.text("AOF) per held lock per minute and CPU seconds per second, and its CPU per grant over the acquires.");
    p.text("`bare-renew` renews the same N rows one UPDATE per row per tick; x bare = statements/s / bare-renew's at");
    p.text("the same N: what batching the renewals saves. An empty cell: the backend has no such figure (notes).");
    p.text("");
    std::vector<std::vector<std::string>> body;
    for (const auto& r : rows) {
      if (r.scenario != "scale-held") continue;
      body.push_back({r.backend, r.strategy, short_count(static_cast<std::size_t>(r.workers)), per_s(r.s.ops_per_s),
                      us(r.s.p50_us), us(r.s.p99_us), opt_cell(r.cpu_us_per_grant, us),
                      opt_cell(r.server_connections, [](double v) { return fmt::format("{:.0f}", v); }),
                      opt_cell(r.statements_per_s, two_digits), r.vs.empty() ? "" : two_digits(r.vs[0].ratio),
                      opt_cell(r.log_bytes_per_lock_min, two_digits), opt_cell(r.cpu_share, two_digits)});
    }
    p.table({"backend", "strategy", "held", "grants/s", "p50 us", "p99 us", "CPU us/grant", "connections",
             "statements/s", "x bare", "log B/lock/min", "CPU s/s"},
            "llrrrrrrrrrr", body);
  }
  if (any_of_scenario(rows, "scale-processes")) {
    p.heading("Scale: P processes contend on K names");
    p.text("P worker processes, one Client each, acquire (with wait) and release random names of K for a fixed time:");
    p.text("grants/s, the wait's p50/p99, the server's peak connections, its statements per second and CPU per grant,");
    p.text("and the acquires or releases that threw (a process count above what the server's connection limit takes");
    p.text("is capped; the notes say so).");
    p.text("");
    std::vector<std::vector<std::string>> body;
    for (const auto& r : rows) {
      if (r.scenario != "scale-processes") continue;
      body.push_back({r.backend, r.strategy, fmt::format("{}", r.workers), short_count(r.names), per_s(r.s.ops_per_s),
                      us(r.s.p50_us), us(r.s.p99_us),
                      opt_cell(r.server_connections, [](double v) { return fmt::format("{:.0f}", v); }),
                      opt_cell(r.statements_per_s, per_s), opt_cell(r.cpu_us_per_grant, us),
                      fmt::format("{}", r.errors)});
    }
    p.table({"backend", "strategy", "processes", "names", "grants/s", "wait p50 us", "wait p99 us", "peak connections",
             "statements/s", "CPU us/grant", "errors"},
            "llrrrrrrrrr", body);
  }
  if (any_of_scenario(rows, "scale-async")) {
    p.heading("Scale: one Client's asynchronous waits");
    p.text("One Client queues W asynchronous acquires (`Lock::async_acquire`) on K names another Client holds, then");
    p.text("that Client lets go: the time to grant them all, and the most threads and sockets this process and");
    p.text("connections the server had beside what they were before (the contract's bound for 10,000 waits: 8 and");
    p.text("10). Errors: failed waits, and grants out of arrival order or whose fence did not rise (0: none).");
    p.text("");
    std::vector<std::vector<std::string>> body;
    for (const auto& r : rows) {
      if (r.scenario != "scale-async") continue;
      auto count = [](const std::optional<int>& v) { return v ? fmt::format("{}", *v) : std::string("-"); };
      body.push_back({r.backend, r.strategy, short_count(static_cast<std::size_t>(r.workers)), short_count(r.names),
                      r.s.ops_per_s > 0 ? fmt::format("{:.1f}", r.workers / r.s.ops_per_s) : "-",
                      per_s(r.s.ops_per_s), count(r.threads_more), count(r.sockets_more),
                      opt_cell(r.server_connections, [](double v) { return fmt::format("{:.0f}", v); }),
                      fmt::format("{}", r.errors)});
    }
    p.table({"backend", "strategy", "waits", "names", "s to grant all", "grants/s", "threads more", "sockets more",
             "server connections more", "errors"},
            "llrrrrrrrr", body);
  }
}

void plots(Page& p, const RunReport& run, const Options& opt) {
  if (opt.csv.empty()) return;
  const fs::path csv = fs::absolute(opt.csv);
  const fs::path stem = csv.parent_path() / (csv.extension() == ".csv" ? csv.stem() : csv.filename());
  const fs::path page_dir = fs::absolute(opt.markdown).parent_path();
  std::vector<std::string> lines;
  for (const char* what :
       {"uncontended", "contended", "shapes", "table-size", "peers", "scale-statements", "scale-grants"}) {
    const fs::path png = stem.string() + "-" + what + ".png";
    std::error_code ec;
    auto written = fs::last_write_time(png, ec);
    if (ec) continue;
    // Only what this run drew: a plot left by an earlier run is not this run's.
    const auto started = fs::file_time_type::clock::now() -
                         std::chrono::duration_cast<fs::file_time_type::duration>(std::chrono::system_clock::now() -
                                                                                  run.facts.started);
    if (written < started) continue;
    lines.push_back(fmt::format("![{}]({})", what, png.lexically_relative(page_dir).generic_string()));
  }
  if (lines.empty()) return;
  p.heading("Plots");
  p.line("Drawn by gnuplot from this run's rows (the CSV: `{}`).", fs::path(opt.csv).lexically_normal().generic_string());
  p.text("");
  for (const auto& l : lines) p.line("{}\n", l);
}

void notes(Page& p, const RunReport& run) {
  p.heading("What each baseline sends, and other notes of the run");
  for (const auto& n : run.notes)
    if (n.rfind("vCPUs: ", 0) != 0) p.line("- {}", n);
}

}  // namespace

RunFacts run_facts(int argc, char** argv) {
  RunFacts f;
  f.started = std::chrono::system_clock::now();
  for (int i = 0; i < argc; ++i) f.command += (i ? " " : "") + shell_quoted(argv[i]);
  f.commit = first_line_of("git -C " + shell_quoted(DBLOCK_BENCH_SOURCE_DIR) +
                           " describe --always --dirty 2>/dev/null");
  if (f.commit.empty()) f.commit = "unknown";
  std::string cpu = file_field("/proc/cpuinfo", "model name");
  double mem_kb = 0;
  try {
    mem_kb = std::stod(file_field("/proc/meminfo", "MemTotal"));
  } catch (const std::exception&) {
  }
  std::string kernel = "unknown kernel";
  if (utsname u{}; uname(&u) == 0) kernel = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  std::string os = file_field("/etc/os-release", "PRETTY_NAME=");
  f.machine = fmt::format("{}, {} vCPUs, {:.1f} GiB memory, {}{}", cpu.empty() ? "unknown CPU" : cpu,
                          sysconf(_SC_NPROCESSORS_ONLN), mem_kb / (1024 * 1024), kernel, os.empty() ? "" : ", " + os);
  f.load = load_average();
  return f;
}

void probe_markdown_path(const std::string& path) {
  const fs::path dir = fs::absolute(path).parent_path();
  if (!fs::is_directory(dir) || access(dir.c_str(), W_OK) != 0)
    throw std::runtime_error(fmt::format("cannot write Markdown page '{}': no writable directory {}", path, dir.string()));
}

void write_markdown(const RunReport& run, const Options& opt) {
  const auto ended = std::chrono::system_clock::now();
  Page p;
  header(p, run, opt, ended);
  reading(p);
  advice(p, run.rows);
  uncontended(p, run.rows, opt);
  handoff(p, run.rows, opt);
  contended(p, run.rows);
  shapes(p, run.rows, opt);
  transactions(p, run.rows);
  resources(p, run.rows);
  table_size(p, run.rows);
  sweep(p, run.rows);
  peers(p, run.rows);
  tls(p, run.rows);
  pooler(p, run.rows);
  scale(p, run.rows);
  plots(p, run, opt);
  notes(p, run);
  const std::string tmp = opt.markdown + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << p.str();
    out.flush();
    if (!out) throw std::runtime_error(fmt::format("cannot write Markdown page '{}'", tmp));
  }
  std::error_code ec;
  fs::rename(tmp, opt.markdown, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot write Markdown page '{}': {}", opt.markdown, ec.message()));
}

}  // namespace dblock_bench
