// dblock-bench on ZooKeeper (the server in DBLOCK_TEST_ZK_URL), when built with zookeeper_mt.
#pragma once

#include <optional>
#include <string>

#include "bench_run.hpp"

namespace dblock_bench {

// Why the zookeeper backend cannot run here (not built in, no server URL), or nothing.
std::optional<std::string> zookeeper_skip_reason();

// Runs the selected scenarios under a fresh root node, deleted at the end.
BackendReport run_zookeeper(const Options& opt);

}  // namespace dblock_bench
