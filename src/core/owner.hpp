// Owner identities: host:pid:instance:tN. The instance is random per Client, so pid reuse
// and two Clients in one process never look like the same owner; tN numbers the threads
// of this process in the order they first took a lock.
#pragma once

#include <string>

namespace dblock::detail {

std::string make_client_identity();          // host:pid:instance
std::string thread_suffix();                 // ":t<N>" for the calling thread
std::string host_name();

}  // namespace dblock::detail
