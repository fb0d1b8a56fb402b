// Redis Sentinel: how the redis backend finds its server when the URL names Sentinels and a
// master instead of a server (redis-sentinel://host:port,host:port/master). Every connection
// the backend opens (the pool's, the wake-up subscriber's) asks the Sentinels in turn where
// the master is, connects there and checks that it answers ROLE master; a connection that
// meets a replica or a loading server afterwards is dropped, so the next one asks again. The
// strategies run unchanged on whatever server this finds.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "core/url.hpp"

namespace dblock::detail::redis {

struct Sentinels {
  std::vector<HostPort> addresses;
  std::string master;  // the name the Sentinels monitor it under
  // The Sentinels' own credentials (sentinel-user, sentinel-password); none: the URL's, sent
  // only to a Sentinel that asks (NOAUTH).
  std::string user, password;
  // The Sentinel that last named a server that proved to be the master: asked first next time,
  // so that a dead Sentinel costs one refused connect per failover, not one per connection.
  mutable std::atomic<std::size_t> preferred{0};
  // For the process's shared wake-up subscriber: the same Sentinels and master, the same key.
  std::string key() const;
};

}  // namespace dblock::detail::redis
