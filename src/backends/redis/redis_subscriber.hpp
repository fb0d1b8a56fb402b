// Release wake-ups and hand-overs for a process's waiters (redis_scripts.hpp has the keys):
// - each server (one for redis, each node for redlock) is SUBSCRIBEd on `<table>:released`:
//   "NAME" wakes the name's first watch in this process, "NAME\0OWNER" (a fair queue's
//   release: OWNER is next) only the watch made for OWNER;
// - a single server (the redis strategy's, which queues fair waiters) also has the process's
//   hand-over list, taken with BLPOP on a connection of its own: "NAME\0\0FENCE LEASE TOKEN
//   OWNER" says a release granted the name to OWNER, whose watch wakes, and whose next
//   attempt takes the grant without asking the server (RedisDriver::take_handover).
// Both are read by one thread, the process's ReleaseFeed (core/release_feed.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/redis/redis_connection.hpp"
#include "core/release_feed.hpp"

namespace dblock::detail::redis {

struct RedisFeed {
  RedisFeed(std::vector<Subscribe> subscribe, std::string list)
      : feed(std::move(subscribe)), handed_list(std::move(list)) {}
  ReleaseFeed feed;
  const std::string handed_list;  // the hand-over list's key; empty: none (redlock)
};

// The process's feed for these servers and channel, made on first use and shared by the
// Clients on them while any uses it: a release then wakes one waiter per process (the
// WakeTable's queue), not one per Client, and each server keeps one subscribed connection per
// process. With `handovers` (the redis strategy's single server) also the process's hand-over
// list, on a connection of its own blocked on it.
std::shared_ptr<RedisFeed> shared_release_feed(const std::vector<Target>& servers, const std::string& channel,
                                               bool handovers);

}  // namespace dblock::detail::redis
