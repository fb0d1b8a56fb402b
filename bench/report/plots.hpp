// dblock-bench plots: PNG charts of a run next to its CSV file, drawn by gnuplot (Debian:
// gnuplot-nox), which the bench drives with a generated script and data files in a temp
// dir. Without gnuplot the bench says so and carries on.
#pragma once

#include <string>
#include <vector>

#include "bench/support/util.hpp"

namespace dblock_bench {

// For --csv DIR/NAME.csv writes, when the rows are there:
//   DIR/NAME-uncontended.png  uncontended p50 (bars) and p99 (dots) per backend/strategy,
//                             baselines included, log scale
//   DIR/NAME-contended.png    grants/s by worker count per backend/strategy (`contended` rows)
//   DIR/NAME-table-size.png   table-size p50 by other leases present per backend/strategy
//   DIR/NAME-shapes.png       grants/s per backend/strategy and line-up of holders
//                             (`exclusive`, `shared`, `semaphore` rows)
//   DIR/NAME-peers.png        per backend, dblock's strategies and the peer library beside them:
//                             uncontended p50, hand-off p50, grants/s and Jain's index (`peers`)
//   DIR/NAME-scale-statements.png, DIR/NAME-scale-grants.png
//                             by locks held (`scale-held` rows): the server's statements/s
//                             during the hold, and grants/s acquiring them
// A plot without rows, or a gnuplot that is missing or fails, gives one line on stderr;
// never throws.
void write_plots(const std::string& csv_path, const std::vector<Row>& rows);

}  // namespace dblock_bench
