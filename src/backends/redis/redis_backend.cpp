#include "backends/redis/redis_backend.hpp"

#include "dblock/errors.hpp"

namespace dblock::detail {
std::unique_ptr<Backend> open_redis(const Url&, const ClientOptions&) {
  throw UsageError("the redis backend is not written yet");
}
std::unique_ptr<Backend> open_redlock(const Url&, const ClientOptions&) {
  throw UsageError("the redlock backend is not written yet");
}
}  // namespace dblock::detail
