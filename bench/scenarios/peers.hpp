// dblock-bench scenario `peers`: dblock beside the library a user would pick instead, on the
// same server in the same run: redis-py's Lock beside the redis strategy, Kazoo's Lock beside
// the zookeeper strategy, python-etcd3's Lock beside the etcd strategy (Python scripts), the npm
// packages advisory-lock beside the postgresql advisory and insert strategies and
// @sesamecare-oss/redlock beside the redlock strategy (Node.js scripts). All sides run as
// worker processes of the same shape (support/proc.hpp's protocol): dblock's are this binary
// started again, a peer's a script in bench/peers (peer_worker.py, peer_worker.js), run from
// the build tree, where the build copies them and installs the npm packages. Two workloads per
// side:
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

#include "bench/support/run.hpp"
#include "bench/support/util.hpp"
#include "dblock/dblock.hpp"

namespace dblock_bench {

// argv[1] of a dblock peers worker process; main() hands such a command line to peer_worker_main.
inline constexpr const char* kPeerWorkerFlag = "--peer-worker";
inline constexpr int kContenders = 6;  // processes, one client each
inline constexpr int kHoldMs = 1;      // a contended holder sleeps this long before it releases

// The dblock side's worker process: the arguments of peer_worker.py after a TABLE (the
// ClientOptions::table, empty for the default), and its JSON line.
int peer_worker_main(int argc, char** argv);

// What runs a peer's worker script.
enum class PeerRuntime { python, node };

// A peer library: its name in the report, its worker script in bench/peers, what runs the
// script, and how the script takes the lock (for the report's notes).
struct Peer {
  std::string name;    // "redis-py", "Kazoo"
  std::string script;  // "redis_py_lock.py"
  PeerRuntime runtime = PeerRuntime::python;
  std::string how;  // "redis.Redis.from_url(url).lock(...), ..."
};

// The peers rows of each of dblock's `strategies` at `url` (its Clients on `table`, empty for
// the default) and of `peer` on the same server (nothing when the scenario is not selected; a
// note saying "not run:" when the peer cannot run here: its runtime, module or script is
// missing). Each dblock row is compared with the peer's row of the same workload (ratio =
// dblock p50 / peer p50). Throws CorrectnessViolation (scenarios/contended.hpp) when two holds
// overlapped, std::runtime_error when a worker fails.
BackendReport run_peer_scenario(const std::string& backend, const std::string& url,
                                const std::vector<dblock::Strategy>& strategies, const Peer& peer,
                                const Options& opt, const std::string& table = {});

// The Markdown "Peers" table of those rows (nothing if none): per pair, the uncontended p50
// and p99, the hand-off p50, grants/s and Jain's index, dblock's and the peer's, and their ratio.
void print_peers_table(const std::vector<Row>& rows);

}  // namespace dblock_bench
