// dblock-bench on Redis (DBLOCK_TEST_REDIS_URL) and Redlock (DBLOCK_TEST_REDLOCK_URL), when
// built with hiredis.
#pragma once

#include <optional>
#include <string>

#include "bench_run.hpp"

namespace dblock_bench {

// Why the redis / redlock backend cannot run here (not built in, no server URL), or nothing.
std::optional<std::string> redis_skip_reason();
std::optional<std::string> redlock_skip_reason();

// Run the selected scenarios in a key namespace of the run's own, deleted at the end.
BackendReport run_redis(const Options& opt);
BackendReport run_redlock(const Options& opt);

}  // namespace dblock_bench
