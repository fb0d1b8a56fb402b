// dblock-bench scenario `table-size`: does an uncontended acquire+release cost the same with
// 1, 10 000 and 1 000 000 other live leases in the table (ZooKeeper: 1, 1 000, 10 000
// children of the root)? Each backend runs on a table of the scenario's own, filled in bulk
// before each timed part and removed at the end.
#pragma once

#include <vector>

#include "bench/support/run.hpp"

namespace dblock_bench {

// Rows: scenario "table-size", table_rows = the other leases present, compared with the same
// strategy at the fewest rows (baseline "<strategy> 1 row", ratio = p50 / that p50).
BackendReport run_table_size(const Options& opt);

// The table-size rows of `rows` as a table of their own (backend x strategy, one column per
// row count), or nothing when there are none.
void print_table_size_markdown(const std::vector<Row>& rows);

}  // namespace dblock_bench
