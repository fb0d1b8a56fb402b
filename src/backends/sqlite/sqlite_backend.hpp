#pragma once

#include <memory>

#include "core/driver.hpp"
#include "core/url.hpp"

namespace dblock::detail {
// sqlite:PATH or sqlite:///abs/path, optional ?auto_migrate=true|false.
std::unique_ptr<Backend> open_sqlite(const Url& url, const ClientOptions& options);
}  // namespace dblock::detail
