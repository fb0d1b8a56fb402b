// dblock-bench runners shared by the backends: interleaved uncontended series and the
// hand-off scenario, and what the server backends (PostgreSQL, MySQL) run alike.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/support/util.hpp"
#include "dblock/dblock.hpp"

namespace dblock_bench {

constexpr std::size_t kBlock = 50;  // most timed cycles of one series in a row
constexpr std::size_t kRewarm = 2;  // untimed cycles each time a series resumes
constexpr int kHandoffWorkers = 8;  // threads (each with its own Client) in the handoff scenario
constexpr std::size_t kHandoffRounds = 4;  // rounds of the handoff scenario's series and floors

struct Series {
  std::string strategy;         // "bare", "select1", "insert", ...
  std::function<void()> cycle;  // one acquire+release (or the baseline's statements)
  std::vector<double> samples;  // microseconds, pooled over the rounds
};

// What one backend's runs add to the report.
struct BackendReport {
  std::vector<std::string> notes;  // Markdown bullet lines (versions, settings, baselines)
  std::vector<Row> rows;
  // One line for the generated page's header: the server's (or library's) version and the
  // settings that decide what a grant waits for (flushes). Empty for cross-backend scenarios.
  std::string server;
};

// The interleaved rounds run_interleaved makes of opt.iterations.
std::size_t interleaved_rounds(const Options& opt);
// Untimed hand-offs before the timed ones.
std::size_t handoff_warmup(const Options& opt);

// One acquire+release of `lock` (try_acquire() then release()); checks what a correct lock
// must show even uncontended: it is granted, and fences increase.
std::function<void()> dblock_cycle(dblock::Lock lock);

// Warms up every series, then runs them interleaved: rounds of at most kBlock timed cycles
// per series, the order rotated each round, so drift and noise hit every series alike.
// Progress on stderr, prefixed with `backend`. Returns the number of rounds.
std::size_t run_interleaved(const std::string& backend, std::vector<Series>& series, const Options& opt);

struct HandoffResult {
  std::vector<double> samples_us;  // one per timed hand-off
  double handoffs_per_s = 0;       // timed hand-offs / the time they took
  double back_to_prev = 0;         // share of timed hand-offs won by the holder before last
  int winners = 0;                 // threads that won at least one timed hand-off
  std::size_t grants = 0;          // leases granted in all (untimed ones included)
};

// kHandoffWorkers threads, each with its own Client::open(url, options), contend for lock
// `name` with `strategy`; a holder takes a timestamp just before release(), the next holder
// one when it has the lease. After a release a thread contends again only once another one
// got the lease, so every hand-off goes to a thread that was already waiting (no barging).
// The first `warmup` hand-offs are not timed. A holder keeps the lease `hold` before it
// takes its timestamp and releases (0: at once). Throws what a worker threw, or
// std::runtime_error when no hand-off happens for a minute.
// Progress is labelled `handoff`, or `handoff-polling` when options.notifications is off.
// fair: LockOptions::fair of every lock (--unfair: false). `wait`: how each wait is made and
// where its grant is timed:
//   blocking  Lock::try_acquire, timed on the waiting thread;
//   async     Lock::async_acquire, timed in its callback on the Client's event thread
//             (labelled `handoff-async`);
//   hop       Lock::try_acquire, then timed on another thread it is handed to as a Client's
//             event thread is (labelled `handoff-hop`): the least any acquire that completes
//             on an event thread adds to the blocking one, with nothing else of dblock's.
enum class HandoffWait { blocking, async, hop };
HandoffResult run_handoff(const std::string& backend, const std::string& url, const dblock::ClientOptions& options,
                          dblock::Strategy strategy, const std::string& name, std::size_t warmup, std::size_t n,
                          std::chrono::milliseconds hold, bool fair = true, HandoffWait wait = HandoffWait::blocking);

// One setup of a comparison of two (a transport, a pooler): its label and URL.
struct Setup {
  std::string label;
  std::string url;
};
// run_handoff on each side, opt.handoffs hand-offs in all per side, in two halves taken
// alternately (a, b, a, b), so that drift over the minutes hits both alike; each side's timed
// samples (us), in the order of `sides`.
std::vector<std::vector<double>> alternating_handoffs(const std::string& label, const std::vector<Setup>& sides,
                                                      const dblock::ClientOptions& options, dblock::Strategy strategy,
                                                      const std::string& name, const Options& opt);

// Server-wide counters read before and after each hand-off series (e.g. PostgreSQL's WAL
// syncs and commits); the deltas per grant go to stderr and a note. No `read`: none.
struct ServerCounters {
  std::vector<std::string> names;             // one per value read() returns
  std::function<std::vector<double>()> read;  // called with no client of the series open
  std::string what;                           // how to read the figures (for the note)
};

// A hand-off floor (floors/): the least a backend's clients do to hand a lock over, timed in
// the same rounds as the `handoff` series of the strategies it is the first baseline of.
struct HandoffFloor {
  std::string label;                    // its row's strategy column: "bare-notify-handoff"
  std::vector<std::string> strategies;  // whose handoff rows are compared with it first
  std::function<std::vector<double>(std::size_t warmup, std::size_t n)> run;  // timed samples, us
};

// The `reentrant` rows (each strategy timed re-entering a lock it holds, compared with each of
// `baselines`) when selected, then the selected hand-off scenarios:
// `handoff` with `options` as given: every strategy's series and every floor's, each on a name
// of its own, in kHandoffRounds rounds of opt.handoffs / kHandoffRounds hand-offs, the order
// rotated each round, so that drift over the minutes (a disk's flush time moves by half
// between series minutes apart) hits a strategy and its floor alike; then per strategy
// `handoff-polling` with options.notifications = false (waiters poll with backoff). Each
// lease is held opt.hold_ms. Returns the floor rows and the handoff rows, then the
// handoff-polling rows, and a note on who won the hand-offs. A floor row is compared with the
// first of `baselines`; a handoff row with its floor first, then with each of `baselines`; a
// handoff-polling row first with the same strategy's handoff row (when that ran; baseline
// "<strategy> handoff", ratio = polling p50 / notified p50), then with `baselines`.
BackendReport run_handoff_scenarios(const std::string& backend, const std::string& url,
                                    const dblock::ClientOptions& options,
                                    const std::vector<dblock::Strategy>& strategies, const Options& opt,
                                    const std::vector<Row>& baselines, const ServerCounters& counters = {},
                                    const std::vector<HandoffFloor>& floors = {});

// A server backend's lock table for one run: a unique name (dblock_bench_<pid>_<4 hex
// digits>), and drop(name) at the end, when the object goes (its errors become a warning).
// Construct it before the clients and connections that use the table, so that they are
// gone (and hold no lock on it) when it drops.
class ScratchTable {
 public:
  ScratchTable(std::string backend, std::function<void(const std::string& name)> drop);
  ~ScratchTable();
  ScratchTable(const ScratchTable&) = delete;
  ScratchTable& operator=(const ScratchTable&) = delete;
  const std::string& name() const { return name_; }

 private:
  std::string backend_, name_;
  std::function<void(const std::string&)> drop_;
};

// What a server backend runs: its baselines and one uncontended series per strategy,
// interleaved, then the hand-off scenarios.
struct ServerRun {
  std::string backend;  // "postgresql", "mysql"
  std::string url;
  dblock::ClientOptions client_options;   // the run's table; the strategies' clients open with it
  std::shared_ptr<dblock::Client> first;  // the client that created the table: runs the first strategy
  std::vector<dblock::Strategy> strategies;
  // Measured whenever the backend runs, whatever the scenarios (the ratios refer to them);
  // the first is `select1`.
  std::vector<Series> baselines;
  // A row's strategy -> the baseline rows it is compared with, before `select1`. Every
  // strategy needs one; a baseline without an entry is compared with `select1` alone.
  std::map<std::string, std::vector<std::string>> compared_with;
  ServerCounters counters;  // read around each hand-off series
  std::vector<HandoffFloor> floors;  // timed with the `handoff` series, in the same rounds
};

// Appends the rows and notes of the scenarios with a table of their own, `contended`
// (scenarios/contended.hpp; its baselines are the uncontended rows already in rep), `shared` and
// `semaphore` (scenarios/shapes.hpp) and `resources` (scenarios/resources.hpp), each when selected.
void add_own_table_scenarios(BackendReport& rep, const std::string& backend, const std::string& url,
                             const dblock::ClientOptions& options, const std::vector<dblock::Strategy>& strategies,
                             const Options& opt);

// The rows: the baselines, the uncontended strategies (each compared with its baselines,
// then `select1`), then run_handoff_scenarios' rows (compared with `select1`).
BackendReport run_server(ServerRun run, const Options& opt);

}  // namespace dblock_bench
