// dblock-bench scenario `scale`: what many held locks and many processes cost the server.
// Held: per backend (postgresql, mysql, sqlite, redis) and strategy, one Client acquires N
// locks (N = 1 .. 10,000) with a short TTL and holds them through a window, over which the
// server's connections, statements per second, log bytes per held lock per minute and CPU are
// read from the server itself; beside each backend the `bare-renew` row does the same N
// renewals as N single-row UPDATEs per tick (one statement per lease, what the library's
// batched renewal replaces). Processes: P worker processes (this binary again), one Client
// each, acquire and release with wait on names drawn from K, for a fixed time: grants/s, the
// wait's p50/p99, the server's peak connections, statements/s and CPU per grant.
// Asynchronous waits: one Client queues 10,000 asynchronous acquires on 4 names (and 1,000
// on 1,000) that another holds, then they are granted: the time, and the threads, sockets
// and server connections they cost at the most.
#pragma once

#include <vector>

#include "bench/support/run.hpp"
#include "bench/support/util.hpp"

namespace dblock_bench {

// argv[1] of a processes worker; main() hands such a command line to scale_worker_main.
inline constexpr const char* kScaleWorkerFlag = "--scale-worker";

// The worker process: opens its Client, says "ready", waits for the start, loops on
// acquire + release of random names of its set, and prints one JSON line. Exit 0, or 70.
int scale_worker_main(int argc, char** argv);

// Rows: scenario "scale-held" (workers = locks held; s = the acquires: p50/p99 us, grants/s;
// strategy `bare-renew` for the per-lease baseline, whose ratio the lock rows carry:
// statements/s / bare-renew statements/s at the same N), "scale-processes" (workers =
// processes, names = K) and "scale-async" (workers = waits, names = K; threads_more,
// sockets_more, server_connections, errors), own_table. Each backend whose URL is set (sqlite always); a point that
// fails leaves a note, not a failed run. Nothing when the scenario is not selected.
BackendReport run_scale(const Options& opt);

// The scale rows as two Markdown tables on stdout, or nothing when there are none.
void print_scale_markdown(const std::vector<Row>& rows);

}  // namespace dblock_bench
