#include "backends/zookeeper/zk_backend.hpp"

#include "dblock/errors.hpp"

namespace dblock::detail {
std::unique_ptr<Backend> open_zookeeper(const Url&, const ClientOptions&) {
  throw UsageError("the zookeeper backend is not written yet");
}
}  // namespace dblock::detail
