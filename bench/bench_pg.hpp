// dblock-bench on PostgreSQL (the server in DBLOCK_TEST_PG_URL), when built with libpqxx.
#pragma once

#include <optional>
#include <string>

#include "bench_run.hpp"

namespace dblock_bench {

// Why the postgresql backend cannot run here (not built in, no server URL), or nothing.
std::optional<std::string> postgresql_skip_reason();

// Runs the selected scenarios in a fresh lock table, dropped at the end. Throws
// dblock::Error, pqxx's exceptions (std::exception) and std::runtime_error.
BackendReport run_postgresql(const Options& opt);

}  // namespace dblock_bench
