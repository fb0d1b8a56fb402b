// The Redis hand-off floor (floors/floor.hpp): the least a fenced Redis lock must send, on raw
// hiredis, woken by pub/sub as dblock's waiters are.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dblock_bench {

// `redis/bare-pubsub-handoff`: each thread on a connection of its own to the server of `url`
// (redis://), the key `<prefix>:floor`. A grant is one round trip, as dblock's: an EVALSHA
// of `SET key owner NX PX 30000` and, when that took the key, `INCR <prefix>:floor:fence`,
// the fence (dblock's script does the same in four calls: it also reads the server's clock,
// which its fences never fall below); a release is one round trip, as dblock's: an EVALSHA
// of GET-compare-owner, DEL and PUBLISH `<prefix>:floor:released` (dblock's script publishes
// only when a waiter flagged the grant: here there always is one). One subscribed connection
// wakes the longest waiting thread per message, as dblock's one subscriber per process
// does. Returns the timed samples in microseconds.
std::vector<double> run_redis_floor_handoff(const std::string& url, const std::string& prefix,
                                            std::size_t warmup, std::size_t n);

}  // namespace dblock_bench
