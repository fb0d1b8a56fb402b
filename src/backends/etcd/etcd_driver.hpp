// The etcd strategy: etcd's lock recipe (Go's concurrency.Mutex, `etcdctl lock`) behind
// dblock's LockDriver seam.
//
// Each acquire grants a lease of its own and puts <prefix>/<name>/<lease hex> under it (one
// transaction, which also reads the first key of the name: the uncontended path is a lease
// grant and one Txn); the key with the lowest create revision holds the lock, and a waiter
// watches only the deletion of the key just before its own (no herd). The fence is the key's
// create revision. Like the ZooKeeper driver it waits inside try_acquire (up to
// AcquireRequest::wait), keeping its lease alive meanwhile; between the core's calls a
// waiter's key is its QueuePlace, so it keeps its turn; once first, the key is the grant's
// handle, renewed by keeping its lease alive. Either way the lease is revoked (and the key
// with it) when the object holding it goes.
//
// Why a lease per acquire, not one per Client as a Go session has: a key is named by its
// lease, so a lease holds at most one key per name; with its own lease every acquire has a
// key of its own, as every `etcdctl lock` process does, and a leftover of an earlier acquire
// (an answer lost) is another contender queued ahead, never the same key handed out again
// with its old fence. Each lock also gets its own TTL, expires by itself when its holder
// stops renewing it (auto_renew off), and is lost alone. The cost is one LeaseGrant round
// trip per acquire and one LeaseRevoke per release.
#pragma once

#include <memory>
#include <string>

#include "backends/etcd/etcd_cluster.hpp"
#include "core/driver.hpp"

namespace dblock::detail::etcd {

// A lock's TTL as a lease TTL: whole seconds, rounded up, at least 1 (etcd also raises it to
// its own minimum, 1.5 election timeouts rounded up: 2 s by default).
seconds lease_ttl(milliseconds ttl);

class Driver : public LockDriver {
 public:
  Driver(std::shared_ptr<Cluster> cluster, std::string root) : cluster_(std::move(cluster)), root_(std::move(root)) {}

  Attempt try_acquire(AcquireRequest& request) override;

 private:
  struct Contender;
  class Held;
  // A new lease and our key under `prefix`; *first tells whether no key was created before ours.
  std::unique_ptr<Contender> enter(const std::string& prefix, const std::string& owner, milliseconds ttl, bool* first);

  std::shared_ptr<Cluster> cluster_;
  const std::string root_;
};

}  // namespace dblock::detail::etcd
