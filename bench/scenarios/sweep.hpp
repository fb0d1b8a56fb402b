// dblock-bench scenario `sweep`: how fast Client::sweep() removes expired leases from a big
// table, and whether acquirers on other names stall meanwhile. SQL backends only: Redis
// expires keys and ZooKeeper ephemeral nodes by themselves.
#pragma once

#include <vector>

#include "bench/support/run.hpp"

namespace dblock_bench {

// Per SQL backend and lease strategy (insert, optimistic), two rows, scenario "sweep",
// workers = the acquirer threads, table_rows = the expired rows put in: "<strategy>
// no-sweep" (the acquirers alone; ops/s = their cycles/s) and "<strategy>" (the same
// acquirers while the sweep runs; ops/s = rows swept/s; ratio = p99 / the no-sweep p99).
BackendReport run_sweep(const Options& opt);

// The sweep rows as a table of their own, or nothing when there are none.
void print_sweep_markdown(const std::vector<Row>& rows);

}  // namespace dblock_bench
