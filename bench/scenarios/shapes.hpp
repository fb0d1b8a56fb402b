// dblock-bench scenarios `shared` and `semaphore`: what a read/write lock's readers and a
// semaphore's permits buy over a mutex. 8 workers (2 worker processes x 4 threads, each
// thread with its own Client, as in the contended scenario) loop on acquire, a short hold and
// release of ONE name: 8 exclusive lockers (the baseline, run in the same rounds), 8 readers,
// 7 readers beside 1 writer, and 8 holders of a semaphore of 4 permits. While they hold, the
// holders count themselves in a shared memory map, which checks the shape's promise (no
// reader beside a writer, at most N permit holders, a writer's fence above every fence seen
// before it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/support/run.hpp"
#include "bench/support/util.hpp"
#include "dblock/dblock.hpp"

namespace dblock_bench {

// argv[1] of a shape worker process; main() hands such a command line to shape_worker_main.
inline constexpr const char* kShapeWorkerFlag = "--shape-worker";
inline constexpr int kShapeWorkers = 8;
inline constexpr std::uint32_t kShapePermits = 4;
// The shape rows' `holders`, in this order: 8 exclusive lockers, 8 readers, the readers and the
// writer of 7 readers + 1 writer, 8 holders of kShapePermits permits.
inline const std::vector<std::string> kShapeHolders{"8 exclusive", "8 readers", "7 readers + 1 writer: readers",
                                                    "7 readers + 1 writer: writer", "8 on 4 permits"};

// The worker process (support/proc.hpp's protocol). Exit 0, or 70 with {"error": ...}.
int shape_worker_main(int argc, char** argv);

// The exclusive, shared and semaphore rows of each strategy that offers a selected shape
// (nothing when neither scenario is selected; a strategy that offers neither is skipped with
// a note). Throws CorrectnessViolation (scenarios/contended.hpp) when a shape's promise broke, or
// std::runtime_error when a worker fails.
BackendReport run_shape_scenarios(const std::string& backend, const std::string& url,
                                  const dblock::ClientOptions& options,
                                  const std::vector<dblock::Strategy>& strategies, const Options& opt);

// The Markdown "Lock shapes" table of those rows (nothing if none), with its definitions and
// one line per strategy on the readers' target (8 readers >= 4x the 8 exclusive lockers).
void print_shapes_table(const std::vector<Row>& rows, const Options& opt);

}  // namespace dblock_bench
