// dblock-bench helpers: command-line options, statistics, machine facts and the report
// (Markdown table on stdout, optional CSV).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dblock_bench {

// A bad command line: main prints one line and exits 64 (EX_USAGE).
struct UsageProblem : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The CSV file, the Markdown page or the bench dir cannot be created: main prints one line and
// exits 73 (EX_CANTCREAT).
struct CantCreate : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  bool help = false;
  bool quick = false;
  std::size_t iterations = 5000;  // timed cycles per series (quick: 300)
  std::size_t warmup = 200;       // untimed cycles per series before the first round
  std::size_t rounds = 3;         // at least this many interleaved rounds
  std::size_t handoffs = 400;     // timed hand-offs per handoff series (quick: 40)
  std::size_t hold_ms = 0;        // how long a hand-off holder keeps the lease (0: releases at once)
  std::size_t shape_hold_ms = 2;  // how long a shared / semaphore scenario holder keeps its grant
  bool shape_polling = false;     // the shared / semaphore scenarios' Clients without notifications
  bool unfair = false;            // LockOptions::fair = false: the lease strategies' race, no queue (--unfair)
  bool keep_awake = false;        // a SCHED_IDLE spinner keeps one vCPU awake for the run (support/awake.hpp)
  std::vector<int> workers;       // contended: the worker counts (empty: the defaults)
  std::string dir;                // empty: a fresh mkdtemp dir under /tmp, removed at the end
  std::string csv;                // empty: no CSV
  std::string markdown;           // empty: no generated page (report/page.hpp)
  std::vector<std::string> backends;   // empty: all (backends/registry.hpp)
  std::vector<std::string> scenarios;  // empty: all (kScenarios)
  std::vector<std::string> skipped_scenarios;  // --skip-scenario: left out of the above
  bool wants_backend(const std::string& name) const;
  bool wants_scenario(const std::string& name) const;
};

inline const std::vector<std::string> kScenarios{"uncontended", "reentrant", "handoff", "handoff-async", "handoff-polling",
                                                 "contended", "shared", "semaphore", "resources", "table-size",
                                                 "sweep", "txn", "peers", "tls", "pooler", "scale"};

// Throws UsageProblem.
Options parse_options(int argc, char** argv);
const char* usage_text();

struct Summary {
  std::size_t samples = 0;
  double mean_us = 0, p50_us = 0, p99_us = 0, ops_per_s = 0;
};
// Nearest-rank percentiles over per-cycle durations in microseconds.
Summary summarize(std::vector<double> samples_us);

struct Compared {
  std::string baseline;  // the `strategy` of the (uncontended) baseline row compared with
  double ratio = 1.0;    // p50 / p50 of the baseline row
};

struct Row {
  // A constructor, not aggregate initialisation, so that the scenario-specific figures below
  // need no initializer at every Row{...} (-Wmissing-field-initializers).
  Row() = default;
  Row(std::string backend_, std::string strategy_, std::string scenario_, int workers_, Summary s_,
      std::vector<Compared> vs_ = {})
      : backend(std::move(backend_)), strategy(std::move(strategy_)), scenario(std::move(scenario_)),
        workers(workers_), s(s_), vs(std::move(vs_)) {}
  std::string backend, strategy, scenario;
  int workers = 1;
  Summary s;
  std::vector<Compared> vs;  // the first is the row's main baseline (the Markdown `ratio`)
  std::size_t shown = 1;     // how many of vs, from the front, the Markdown baseline and ratio cells list
  // The scenarios with a Markdown table of their own (contended, resources: scenarios/contended.hpp,
  // scenarios/resources.hpp) set own_table and their figures below; the main table skips them. The
  // figures are the CSV's trailing columns, empty in other rows.
  bool own_table = false;
  std::optional<double> fairness;              // contended: Jain's index of grants per worker
  std::uint64_t min_grants = 0, max_grants = 0;  // contended: grants per worker
  std::optional<double> connections_per_lock;  // resources: server connections (or fds) per held lock
  std::optional<double> bytes_per_lock;        // resources: RSS growth per held lock
  std::size_t table_rows = 0;  // table-size: other leases present; sweep: expired rows swept (0: n/a)
  std::string holders;                   // shared, semaphore: who contends ("8 readers", ...)
  std::optional<double> release_p50_us;  // shared, semaphore: how long release() took, p50
  // scale (scenarios/scale.hpp): the server's side of holding many locks and of many processes.
  std::optional<double> server_connections;  // held: during the hold; processes: the peak
  std::optional<double> statements_per_s;    // held: during the hold; processes: over the run
  std::optional<double> log_bytes_per_lock_min;  // held: WAL / redo / AOF growth per held lock per minute
  std::optional<double> cpu_us_per_grant;        // server CPU time per grant (held: the acquires)
  std::optional<double> cpu_share;               // held: server CPU seconds per second of the hold
  std::size_t names = 0;                         // processes: the names drawn from
  std::uint64_t errors = 0;                      // processes: acquires or releases that threw
  // scale-async: the process's threads and sockets more than before the waits, at the most
  std::optional<int> threads_more, sockets_more;
};

// p50 / baseline p50 (0 when the baseline has no samples).
Compared compare(const Row& row, const Row& baseline);
// The same measurement as `baseline` in another setup: strategy "<baseline's> <setup>",
// own_table, compared with `baseline` (the tls and pooler scenarios' second rows).
Row variant_row(const Row& baseline, const std::string& setup, Summary s);

std::string machine_description();  // host, nproc, CPU model, kernel
// One request on a fresh TCP connection to host:port, and everything the server sends back
// until it closes (at most 64 KiB, 3 s): ZooKeeper's `srvr`, etcd's `GET /version`. Empty
// when it cannot connect or nothing comes.
std::string tcp_ask(const std::string& host, int port, const std::string& request);
// A server URL from the environment variable `var`; null when unset or empty.
const char* env_url(const char* var);
// One line per strategy that ran both `handoff` and `handoff-polling`: the polling p50 over
// the notified p50 (how much faster notifications make a hand-off). Empty when none did.
std::vector<std::string> polling_summary(const std::vector<Row>& rows);
// notes: the bullet lines under the title (backend versions, settings, definitions); after:
// bullet lines under the table (printed under a heading when there are any). A row's
// `baseline` and `ratio` cells list its first `shown` baselines, joined with " / "; the
// `x select1` cell its ratio to the `select1` row, if it has one.
void print_markdown(const std::vector<std::string>& notes, const std::vector<Row>& rows,
                    const std::vector<std::string>& after = {});
// One line per row per baseline it is compared with (a row with none: one line, baseline and
// ratio empty), then the own-table scenarios' columns fairness, connections_per_lock,
// bytes_per_lock, table_rows, holders, release_p50_us, server_connections, statements_per_s,
// log_bytes_per_lock_min, cpu_us_per_grant, cpu_share, names, errors (empty where they do not apply). Throws std::runtime_error when the
// file cannot be written.
void write_csv(const std::string& path, const std::vector<Row>& rows);

}  // namespace dblock_bench
