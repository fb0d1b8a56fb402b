// dblock-bench scenario `contended`: 1, 4, 16 and 64 workers (threads spread over worker
// processes, each thread with its own Client) loop on acquire + release of ONE name for a
// fixed time; throughput, wait percentiles, fairness, and a correctness check (a counter
// that every holder bumps non-atomically must equal the grants; fences must increase).
//
// The workers are this very binary, started again with a hidden subcommand, so that
// contention crosses processes as it does in production, not only threads of one client
// library instance.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/support/run.hpp"
#include "bench/support/util.hpp"
#include "dblock/dblock.hpp"

namespace dblock_bench {

// The lock let two holders in at once, or a fence did not increase: main exits 1, not 70,
// so that a script can tell "the lock is broken" from "the server went away".
struct CorrectnessViolation : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// argv[1] of a worker process; main() hands such a command line to contended_worker_main.
inline constexpr const char* kContendedWorkerFlag = "--contended-worker";

// The worker process: opens its clients, says "ready" on stdout, waits for EOF on stdin
// (the start signal), loops, and prints one JSON line with its results. Exit 0, or 70 with
// {"error": ...} after a dblock or setup error.
int contended_worker_main(int argc, char** argv);

// The `contended` rows for each strategy (nothing when the scenario is not selected).
// `earlier` are the backend's rows so far: a contended row's baseline is the same
// strategy's `uncontended` row, when there is one (ratio = p50 wait / uncontended p50).
// Throws CorrectnessViolation, or std::runtime_error when a worker fails.
BackendReport run_contended_scenario(const std::string& backend, const std::string& url,
                                     const dblock::ClientOptions& options,
                                     const std::vector<dblock::Strategy>& strategies, const Options& opt,
                                     const std::vector<Row>& earlier);

// Jain's fairness index of the grants per worker, (sum x)^2 / (n * sum x^2): 1 = all equal,
// 1/n = one worker got all.
double jain(const std::vector<std::uint64_t>& grants);

// The worker counts and seconds per point that `opt` asks for (--quick: fewer, shorter).
std::vector<int> contended_worker_counts(const Options& opt);
double contended_seconds(const Options& opt);

// The Markdown "Contended" table of the contended rows among `rows` (nothing if none),
// with its definitions.
void print_contended_table(const std::vector<Row>& rows);

}  // namespace dblock_bench
