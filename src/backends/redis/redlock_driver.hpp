// The redlock strategy: the redis scripts on N independent nodes, won on a majority within
// the validity time (see redlock_driver.cpp and docs/ARCHITECTURE.md, "Redis and Redlock").
#pragma once

#include <atomic>

#include "backends/redis/redis_scripts.hpp"
#include "backends/redis/redis_subscriber.hpp"
#include "backends/redis/redlock_nodes.hpp"
#include "core/driver.hpp"

namespace dblock::detail::redis {

class RedlockDriver final : public LockDriver {
 public:
  RedlockDriver(Nodes& nodes, ReleaseFeed* feed, milliseconds statement_timeout)
      : nodes_(nodes), feed_(feed), statement_timeout_(statement_timeout) {}
  Attempt try_acquire(AcquireRequest& r) override;
  // A grant's renewal and release (its handle is a KeyedGrant), each on every node.
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                int holds);
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence);
  bool release_after(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds keep);
  RenewalBatch* renewal_batch() noexcept { return nullptr; }  // each grant renews alone
  std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) override {
    return feed_ ? feed_->watch(name, owner) : nullptr;
  }

  // How long one attempt waits for the nodes: short, so a slow or dead node costs little
  // of the lease's validity.
  milliseconds per_node_timeout(milliseconds ttl) const;

 private:
  // Runs a release-like script (answer 0: not ours) on every node: true when a majority said
  // ours, false when a majority can no longer be ours, UnavailableError when undecided.
  bool ours_on_a_majority(const Script& script, const std::string& name, const std::vector<std::string>& args);
  void abort(const std::string& name, const std::string& owner, const std::string& attempt,
             const std::vector<NodeAnswer>& answers, milliseconds timeout);
  Nodes& nodes_;
  ReleaseFeed* feed_;
  milliseconds statement_timeout_;
  std::atomic<std::uint64_t> attempts_{0};  // names each attempt, for its undo
};

}  // namespace dblock::detail::redis
