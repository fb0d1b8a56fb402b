#pragma once

#include <memory>

#include "core/driver.hpp"
#include "core/url.hpp"

namespace dblock::detail {
// redis://[:password@]host:port[/db]: one Redis server (strategy redis).
std::unique_ptr<Backend> open_redis(const Url& url, const ClientOptions& options);
// redis-sentinel://host:port,host:port,.../master[?db=N&replicas=N]: the Redis master that
// these Sentinels name (strategy redis), followed across failovers.
std::unique_ptr<Backend> open_redis_sentinel(const Url& url, const ClientOptions& options);
// redlock://host:port,host:port,...: N independent Redis nodes, N odd (strategy redlock).
std::unique_ptr<Backend> open_redlock(const Url& url, const ClientOptions& options);
}  // namespace dblock::detail
