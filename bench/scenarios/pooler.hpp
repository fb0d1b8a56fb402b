// dblock-bench scenario `pooler`: what a transaction pooler in front of PostgreSQL costs the
// lease strategies. For `insert` and `optimistic`: the uncontended cycle (interleaved), the
// hand-off (8 threads, each side twice, alternating) and 8 contended worker processes with the
// contended scenario's correctness check (exclusion, fence order), connecting to PostgreSQL
// directly and through PgBouncer in transaction mode (DBLOCK_TEST_PGBOUNCER_URL:
// scripts/services' pgbouncer, 20 server connections, the release listener on the server).
// Ratio = through the pooler p50 / direct p50.
#pragma once

#include <vector>

#include "bench/support/run.hpp"

namespace dblock_bench {

// Rows: scenarios "pooler-uncontended", "pooler-handoff" and "pooler-contended", own_table;
// per strategy a direct row ("<strategy>") and a pooled one ("<strategy> pgbouncer", compared
// with the direct row). Nothing, with a line on stderr, when a URL is not set.
// Throws CorrectnessViolation (contended.hpp) when the workers break exclusion or fence order.
BackendReport run_pooler(const Options& opt);

// The pooler rows as a Markdown table of their own on stdout, or nothing when there are none.
void print_pooler_markdown(const std::vector<Row>& rows);

}  // namespace dblock_bench
