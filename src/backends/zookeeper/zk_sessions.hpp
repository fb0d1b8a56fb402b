// The sessions of one Client: one per distinct requested TTL, since a ZooKeeper lock lives
// exactly as long as its session and the session timeout is what follows the TTL (within
// the server's [minSessionTimeout, maxSessionTimeout]). Usually there is just one.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "backends/zookeeper/zk_session.hpp"

namespace dblock::detail::zk {

class Sessions {
 public:
  Sessions(std::string hosts, std::string root, milliseconds connect_timeout, std::string digest = {})
      : hosts(std::move(hosts)), root(std::move(root)), connect_timeout(connect_timeout), digest_(std::move(digest)) {}

  // A connected session for `ttl`: the one already open, or a new one when there is none or
  // it expired (an expired handle can never be used again).
  std::shared_ptr<Session> session(milliseconds ttl);
  // Stops handing `s` out: it may still carry a node we could not delete (its answer was
  // lost). The handle closes when the last lock on it lets go, and ZooKeeper then removes
  // every ephemeral node of that session, that one included.
  void retire(const std::shared_ptr<Session>& s);

  const std::string hosts;  // "host:port,host:port"
  const std::string root;   // absolute, no trailing '/'
  const milliseconds connect_timeout;

 private:
  const std::string digest_;  // "user:password", or empty: Session
  std::mutex mutex_;
  std::map<milliseconds::rep, std::shared_ptr<Session>> sessions_;
};

}  // namespace dblock::detail::zk
