// Owner identities: host:pid:instance:tN. The instance is random per Client, so pid reuse
// and two Clients in one process never look like the same owner; tN numbers the threads
// of this process in the order they first took a lock.
#pragma once

#include <cstdint>
#include <string>

namespace dblock::detail {

std::string make_client_identity();          // host:pid:instance
std::string thread_suffix();                 // ":t<N>" for the calling thread
std::string host_name();
// Ids that must not meet another process's (a Client's instance, its Client rows, a ZooKeeper
// node's prefix, an etcd lease): 64 random bits, or 128 as 32 lowercase hex digits. A
// generator per thread, seeded from 128 bits once per process (std::random_device costs tens
// of microseconds a call), and again in a forked child.
std::uint64_t random64();
std::string random_hex128();

}  // namespace dblock::detail
