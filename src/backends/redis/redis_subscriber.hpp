// Release wake-ups over Redis pub/sub: each server (one for redis, each node for redlock) is
// SUBSCRIBEd on `<table>:released`, and the process's ReleaseFeed (core/release_feed.hpp)
// reads the messages releases publish there (redis_scripts.hpp, keys::channel):
// - "NAME" wakes the name's first watch in this process;
// - "NAME\0OWNER" (a fair queue's release: OWNER is next) only the watch made for OWNER;
// - "NAME\0\0FENCE LEASE TOKEN OWNER": the release handed the name to OWNER, whose watch
//   wakes, and whose next attempt takes the grant from the feed instead of asking the server.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/redis/redis_connection.hpp"
#include "core/release_feed.hpp"

namespace dblock::detail::redis {

// The process's feed for these servers and channel, made on first use and shared by the
// Clients on them while any uses it: a release then wakes one waiter per process (the
// WakeTable's queue), not one per Client, and each server keeps one subscribed connection per
// process.
std::shared_ptr<ReleaseFeed> shared_release_feed(const std::vector<Target>& servers, const std::string& channel);

}  // namespace dblock::detail::redis
