// The zookeeper strategy: Kazoo's Lock recipe behind dblock's LockDriver seam.
//
// A contender creates an ephemeral sequential node /root/N/<uuid>__lock__<seq>; the lowest
// sequence holds; a waiter watches only its predecessor and re-reads the children when that
// goes (no herd). The fence is the node's creation zxid, which increases with every node the
// ensemble creates. Like the SQL session strategies the driver waits inside try_acquire (up
// to AcquireRequest::wait), and keeps its queued node across the core's calls so a waiter
// keeps its place; abandon() drops it when the caller gives up.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/zookeeper/zk_pool.hpp"
#include "core/driver.hpp"

namespace dblock::detail::zk {

class Driver : public LockDriver {
 public:
  explicit Driver(std::shared_ptr<Pool> pool) : pool_(std::move(pool)) {}

  Attempt try_acquire(const AcquireRequest& request) override;
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl) override;
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence) override;
  void abandon(const std::string& name, const std::string& owner) noexcept override;
  void lost(const std::string& name, const std::string& owner, std::uint64_t fence) noexcept override;

  // Our own grant of `name` (its hold count), for Backend::list; 0 when not ours.
  int holds(const std::string& name, std::uint64_t fence);

 private:
  // One contender node of ours: queued, then granted. Re-entrant holds count in `holds`
  // (ZooKeeper locks are per session, so the count lives here, in memory).
  struct Node {
    std::shared_ptr<Session> session;
    std::string path;  // the full path of the node
    std::uint64_t czxid = 0;
    bool granted = false;
    int holds = 0;
  };
  using Key = std::pair<std::string, std::string>;  // name, owner

  std::shared_ptr<Node> find(const Key& key);
  void forget(const Key& key, const std::shared_ptr<Node>& node);
  // Creates our node under `dir`; when the listing of `dir` could ride on the create's
  // round trip, it is in *children and *listed is true.
  std::shared_ptr<Node> create(const std::shared_ptr<Session>& s, const std::string& dir, const std::string& owner,
                               std::vector<std::string>* children, bool* listed);
  // Deletes the node: ZOK, or ZNONODE when someone else did. A connection lost on the way is
  // waited out (the session and its node outlive a blip, up to the session timeout) and the
  // delete repeated; when the session cannot be reached in that time it is retired so that
  // the node goes with it (ZCONNECTIONLOSS: the node lingers until the server expires it).
  int remove(const Node& node) noexcept;

  std::shared_ptr<Pool> pool_;
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<Node>> nodes_;
};

}  // namespace dblock::detail::zk
