// dblock-bench scenario `resources`: what holding many locks at once costs. Per backend and
// strategy, one Client holds N locks (different names) at once (N = 100, --quick 20), and
// the report gives the server connections per held lock and the process memory (RSS) per
// held lock, each as the growth from before the first acquire to when all N are held.
#pragma once

#include <string>
#include <vector>

#include "bench/support/run.hpp"
#include "bench/support/util.hpp"
#include "dblock/dblock.hpp"

namespace dblock_bench {

// The `resources` rows, one per strategy (nothing when the scenario is not selected): scenario
// `resources`, workers = the locks held, ops_per_s/p50/p99 = 0, connections_per_lock and
// bytes_per_lock set. When an acquire fails before N (e.g. a session strategy runs the server
// out of connections), the figures are over the locks held by then and a note says why.
BackendReport run_resources_scenario(const std::string& backend, const std::string& url,
                                     const dblock::ClientOptions& options,
                                     const std::vector<dblock::Strategy>& strategies, const Options& opt);

// Locks held at once per strategy.
std::size_t resources_locks(const Options& opt);

// The Markdown "Resources" table of the resources rows among `rows` (nothing if none).
void print_resources_table(const std::vector<Row>& rows);

}  // namespace dblock_bench
