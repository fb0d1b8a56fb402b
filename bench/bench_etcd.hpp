// dblock-bench on etcd (the server in DBLOCK_TEST_ETCD_URL), when built with the etcd bridge.
#pragma once

#include <optional>
#include <string>

#include "bench_run.hpp"

namespace dblock_bench {

// Why the etcd backend cannot run here (not built in, no server URL), or nothing.
std::optional<std::string> etcd_skip_reason();

// Runs the selected scenarios under a key prefix of the run's own, deleted at the end.
BackendReport run_etcd(const Options& opt);

}  // namespace dblock_bench
