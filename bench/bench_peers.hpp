// dblock-bench scenario `peers`: dblock beside the library a user would pick instead, on the
// same server in the same run: redis-py's Lock beside the redis strategy, Kazoo's Lock beside
// the zookeeper strategy. Both sides run as worker processes of the same shape (bench_proc.hpp's
// protocol): dblock's are this binary started again, the peer's a Python script in bench/peers
// (peer_worker.py). Two workloads per side:
//   peers-uncontended  1 process, acquire + release of one name, --iterations timed cycles;
//   peers-contended    6 processes, one client each, on one name for a few seconds: acquire,
//                      hold 1 ms (a sleep), release, again at once. Each process stamps every
//                      grant and release with CLOCK_MONOTONIC; the bench puts all holds on one
//                      time line: a hand-off = the next holder's grant - the previous holder's
//                      release, when the holder changed process; Jain's index over the grants
//                      per process. Two holds that overlap stop the run (exit status 1).
#pragma once

#include <string>
#include <vector>

#include "bench_run.hpp"
#include "bench_util.hpp"
#include "dblock/dblock.hpp"

namespace dblock_bench {

// argv[1] of a dblock peers worker process; main() hands such a command line to peer_worker_main.
inline constexpr const char* kPeerWorkerFlag = "--peer-worker";

// The dblock side's worker process: the same arguments and JSON line as peer_worker.py.
int peer_worker_main(int argc, char** argv);

// A peer library: its name in the report, its worker script in bench/peers, and how the script
// takes the lock (for the report's notes).
struct Peer {
  std::string name;    // "redis-py", "Kazoo"
  std::string script;  // "redis_py_lock.py"
  std::string how;     // "redis.Redis.from_url(url).lock(...), ..."
};

// The peers rows of dblock's `strategy` at `url` and of `peer` on the same server (nothing when
// the scenario is not selected; a note when the peer cannot run here, e.g. its Python module is
// missing). A dblock row is compared with the peer's row of the same workload (ratio = dblock
// p50 / peer p50). Throws CorrectnessViolation (bench_contended.hpp) when two holds overlapped,
// std::runtime_error when a worker fails.
BackendReport run_peer_scenario(const std::string& backend, const std::string& url, dblock::Strategy strategy,
                                const Peer& peer, const Options& opt);

// The Markdown "Peers" table of those rows (nothing if none): per pair, the uncontended p50
// and p99, the hand-off p50, grants/s and Jain's index, dblock's and the peer's, and their ratio.
void print_peers_table(const std::vector<Row>& rows);

}  // namespace dblock_bench
