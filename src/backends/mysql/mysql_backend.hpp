#pragma once

#include <memory>

#include "core/driver.hpp"
#include "core/url.hpp"

namespace dblock::detail {
// mysql://user:pass@host:port/db (and mariadb://); ?socket=/path for a Unix socket.
std::unique_ptr<Backend> open_mysql(const Url& url, const ClientOptions& options);
}  // namespace dblock::detail
