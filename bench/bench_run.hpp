// dblock-bench runners shared by the backends: interleaved uncontended series and the
// hand-off scenario.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "dblock/dblock.hpp"

namespace dblock_bench {

constexpr std::size_t kBlock = 50;  // most timed cycles of one series in a row
constexpr std::size_t kRewarm = 2;  // untimed cycles each time a series resumes
constexpr int kHandoffWorkers = 8;  // threads (each with its own Client) in the handoff scenario

struct Series {
  std::string strategy;         // "bare", "select1", "insert", ...
  std::function<void()> cycle;  // one acquire+release (or the baseline's statements)
  std::vector<double> samples;  // microseconds, pooled over the rounds
};

// What one backend's runs add to the report.
struct BackendReport {
  std::vector<std::string> notes;  // Markdown bullet lines (versions, settings, baselines)
  std::vector<Row> rows;
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
HandoffResult run_handoff(const std::string& backend, const std::string& url, const dblock::ClientOptions& options,
                          dblock::Strategy strategy, const std::string& name, std::size_t warmup, std::size_t n,
                          std::chrono::milliseconds hold);

// Server-wide counters read before and after each hand-off series (e.g. PostgreSQL's WAL
// syncs and commits); the deltas per grant go to stderr and a note. No `read`: none.
struct ServerCounters {
  std::vector<std::string> names;             // one per value read() returns
  std::function<std::vector<double>()> read;  // called with no client of the series open
  std::string what;                           // how to read the figures (for the note)
};

// The selected hand-off scenarios for each strategy, one after the other per strategy:
// `handoff` with `options` as given, then `handoff-polling` with options.notifications =
// false (waiters poll with backoff), each on a name of its own, holding each lease
// opt.hold_ms. Returns the handoff rows, then the handoff-polling rows, and a note on who
// won the hand-offs. A handoff row is compared with each of `baselines`; a handoff-polling
// row first with the same strategy's handoff row (when that ran; baseline
// "<strategy> handoff", ratio = polling p50 / notified p50), then with `baselines`.
BackendReport run_handoff_scenarios(const std::string& backend, const std::string& url,
                                    const dblock::ClientOptions& options,
                                    const std::vector<dblock::Strategy>& strategies, const Options& opt,
                                    const std::vector<Row>& baselines, const ServerCounters& counters = {});

}  // namespace dblock_bench
