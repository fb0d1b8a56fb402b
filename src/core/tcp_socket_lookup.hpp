// The descriptor of one of this process's TCP connections, found by its two ports, for a
// driver that does not tell its socket (Connector/C++): the hang-up watch needs it to learn
// within milliseconds that the server closed a session lock's connection.
#pragma once

namespace dblock::detail {

// The open descriptor whose TCP connection runs from local port `local_port` to remote port
// `peer_port`, or -1 if none (or the process's descriptors cannot be listed). Within one
// host the pair names at most one connection of ours to that server. Linux (/proc/self/fd).
int tcp_socket_with_ports(int local_port, int peer_port) noexcept;

}  // namespace dblock::detail
