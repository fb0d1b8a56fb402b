#include "backends/zookeeper/zk_sessions.hpp"

namespace dblock::detail::zk {

std::shared_ptr<Session> Sessions::session(milliseconds ttl) {
  std::lock_guard lk(mutex_);
  auto& slot = sessions_[ttl.count()];
  if (slot && slot->dead()) slot.reset();
  // Connecting under the mutex keeps it to one session per TTL; other TTLs wait at most the
  // connect timeout, which is what they would wait for a connection of their own.
  if (!slot) slot = std::make_shared<Session>(hosts, ttl, connect_timeout, digest_);
  return slot;
}

void Sessions::retire(const std::shared_ptr<Session>& s) {
  std::lock_guard lk(mutex_);
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
    if (it->second == s) {
      sessions_.erase(it);
      return;
    }
}

}  // namespace dblock::detail::zk
