// The zookeeper strategy: Kazoo's Lock recipe behind dblock's LockDriver seam.
//
// A contender creates an ephemeral sequential node /root/N/<uuid>__lock__<seq> (a writer, an
// exclusive hold) or /root/N/<uuid>__rlock__<seq> (a reader, a shared hold), as Kazoo's
// WriteLock and ReadLock do. A writer holds when it is the lowest contender, a reader when no
// writer is below it; a waiter watches only the one node it waits for (zk::blocker) and
// re-reads the children when that goes (no herd). The fence is the node's creation zxid,
// which increases with every node the ensemble creates. Like the SQL session strategies the driver waits inside try_acquire (up
// to AcquireRequest::wait). Between the core's calls a waiter's node is its QueuePlace, so it
// keeps its turn; once first, the node is the grant's handle. Either way the node is deleted
// when the object holding it goes, unless the server already dropped it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/zookeeper/zk_sessions.hpp"
#include "core/driver.hpp"

namespace dblock::detail::zk {

class Driver : public LockDriver {
 public:
  explicit Driver(std::shared_ptr<Sessions> sessions) : sessions_(std::move(sessions)) {}

  Attempt try_acquire(AcquireRequest& request) override;
  bool waits_in_server() const noexcept override { return true; }

 private:
  struct Node;
  class Held;
  // Creates our node under `dir` (a reader's when `shared`); when the listing of `dir` could ride on the create's
  // round trip, it is in *children and *listed is true.
  std::unique_ptr<Node> create(const std::shared_ptr<Session>& s, const std::string& dir, const std::string& owner,
                               bool shared, std::vector<std::string>* children, bool* listed);
  // Waits in the queue of `dir` until `node` (created there when null, a reader's when
  // `shared`) holds: true; false at `until`, or at once for a try-lock (r.wait 0). *sent: when
  // the request that showed us first was sent.
  bool wait_turn(std::unique_ptr<Node>& node, const std::string& dir, const AcquireRequest& r, bool shared,
                 Clock::time_point until, Clock::time_point* sent);
  // Semaphores (permits > 1), Kazoo's Semaphore layout: /root/N holds max_leases as its data
  // and one ephemeral <uuid hex> child per lease; /root/N-__lock__ is a Lock that one
  // contender at a time holds while it counts the leases and takes one.
  Attempt try_acquire_permit(AcquireRequest& r);
  // Creates /root/N with `permits` as its data, or checks the number stored there (UsageError
  // when it differs, as Kazoo's ValueError).
  void ensure_semaphore(Session& s, const std::string& dir, std::uint32_t permits);
  std::unique_ptr<Node> create_lease(const std::shared_ptr<Session>& s, const std::string& dir,
                                     const std::string& owner, std::uint32_t permits);
  // Deletes the node: ZOK, or ZNONODE when someone else did. A connection lost on the way is
  // waited out (the session and its node outlive a blip, up to the session timeout) and the
  // delete repeated; when the session cannot be reached in that time it is retired so that
  // the node goes with it (ZCONNECTIONLOSS: the node lingers until the server expires it).
  int remove(const Node& node) noexcept;

  std::shared_ptr<Sessions> sessions_;
};

}  // namespace dblock::detail::zk
