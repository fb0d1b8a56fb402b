#pragma once

#include <memory>

#include "core/driver.hpp"
#include "core/url.hpp"

namespace dblock::detail {
// postgresql://user:pass@host:port/db?sslmode=... (and postgres://), passed to libpq.
std::unique_ptr<Backend> open_postgresql(const Url& url, const ClientOptions& options);
}  // namespace dblock::detail
