#pragma once

#include <memory>

#include "core/driver.hpp"
#include "core/url.hpp"

namespace dblock::detail {
// zookeeper://host:port[,host:port...]/root: name N locks the node /root/N (strategy zookeeper).
std::unique_ptr<Backend> open_zookeeper(const Url& url, const ClientOptions& options);
}  // namespace dblock::detail
