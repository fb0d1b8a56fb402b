#pragma once

#include <memory>

#include "core/driver.hpp"
#include "core/url.hpp"

namespace dblock::detail {
// etcd://host:port[,host:port...]/prefix: name N locks the keys /prefix/N/<lease hex>, as
// `etcdctl lock /prefix/N` does (strategy etcd).
std::unique_ptr<Backend> open_etcd(const Url& url, const ClientOptions& options);
}  // namespace dblock::detail
