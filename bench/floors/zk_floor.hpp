// The ZooKeeper hand-off floor (floors/floor.hpp): the lock recipe (Curator's, Kazoo's, and
// dblock's) on the raw C client, with dblock's fence.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dblock_bench {

// `zookeeper/bare-watch-handoff`: each thread on a session of its own to `hosts` contends
// for the lock directory `dir` (which must exist) as dblock does: an ephemeral sequential
// `<32 hex>__lock__` child created with the children listed right behind it (one round trip);
// while a child with a lower sequence remains, a data watch on the one right before ours,
// and once it fires the children listed again; the fence is our node's czxid, as dblock's;
// release = delete our node. Returns the timed samples in microseconds.
std::vector<double> run_zk_floor_handoff(const std::string& hosts, const std::string& dir, std::size_t warmup,
                                         std::size_t n);

}  // namespace dblock_bench
