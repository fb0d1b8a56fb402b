// dblock-bench's backends, in the order a run takes them. Each has a file of its own,
// bench/backends/<name>.cpp, that bench/CMakeLists.txt builds only when the build has the
// backend (DBLOCK_WITH_<X>), and one entry in registry.cpp's table; a backend the build lacks
// keeps its entry there, whose skip reason says so.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/support/run.hpp"  // BackendReport
#include "bench/support/util.hpp"  // Options

namespace dblock_bench {

struct BackendSpec {
  const char* name;  // as --backend and the report name it
  // Why it cannot run here (not built in, no server URL), or nothing.
  std::optional<std::string> (*skip_reason)();
  // Runs the selected scenarios on a lock table (key namespace, root node) of the run's own,
  // removed at the end. Called only when skip_reason() answered nothing.
  BackendReport (*run)(const Options&);
  // The bare statements of the backend's lock as one cycle, on a connection of `url`'s own
  // transport (plaintext or TLS), on `table` where the backend has tables (the scenario's lock
  // table, already migrated): the tls scenario's floor. Null where the bench has none.
  std::function<void()> (*bare_cycle)(const std::string& url, const std::string& table) = nullptr;
};

// Every backend, in run order.
const std::vector<BackendSpec>& backends();
// Their names, in the same order (what --backend accepts).
std::vector<std::string> backend_names();
// The one called `name`; throws std::logic_error when there is none.
const BackendSpec& backend_spec(const std::string& name);

}  // namespace dblock_bench
