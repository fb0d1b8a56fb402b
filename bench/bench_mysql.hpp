// dblock-bench on MySQL/MariaDB (the server in DBLOCK_TEST_MYSQL_URL), when built with
// mysql-connector-c++.
#pragma once

#include <optional>
#include <string>

#include "bench_run.hpp"

namespace dblock_bench {

// Why the mysql backend cannot run here (not built in, no server URL), or nothing.
std::optional<std::string> mysql_skip_reason();

// Runs the selected scenarios in a fresh lock table, dropped at the end. Throws
// dblock::Error and std::runtime_error (Connector/C++ errors become one).
BackendReport run_mysql(const Options& opt);

}  // namespace dblock_bench
