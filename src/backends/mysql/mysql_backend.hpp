#pragma once

#include <memory>

#include "core/driver.hpp"
#include "core/url.hpp"

namespace dblock::detail {
// mysql://user:pass@host:port/db (and mariadb://); ?socket=/path for a Unix socket; several
// host:port (a primary and its replicas): connections go to the first that accepts writes.
std::unique_ptr<Backend> open_mysql(const Url& url, const ClientOptions& options);
}  // namespace dblock::detail
