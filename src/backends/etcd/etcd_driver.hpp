// The etcd strategy: etcd's lock recipe (Go's concurrency.Mutex, `etcdctl lock`) behind
// dblock's LockDriver seam.
//
// A renewed lock's key is <prefix>/<name>/<lease hex> under its Client's shared lease for
// that TTL (etcd_session.hpp), put in one transaction that also reads the name's first key,
// so the uncontended path is one Txn to acquire and one to release; an unrenewed lock has a
// lease of its own. The key with the lowest create revision holds the lock, and a waiter
// watches only the deletion of the key just before its own (no herd). The fence is the key's
// create revision. Like the ZooKeeper driver it waits inside try_acquire (up to
// AcquireRequest::wait), keeping its lease alive meanwhile; between the core's calls a
// waiter's key is its QueuePlace, so it keeps its turn; once first, the key is the grant's
// handle, renewed by keeping its lease alive. A key nobody wants any more is deleted, and
// never kept alive (Session::give_up). The leases due at one tick are renewed together
// (RenewalBatch): one keep-alive per lease and one Txn reading every key, not a read each.
//
// A key is named by its lease, so a lease holds at most one key per name: the Client's Gate
// lets one thread per name contend exclusively at a time, so that is enough. A key of ours
// already there when we put one is a leftover (an acquire whose answer was lost, a failed
// release): it is deleted and a new key put, so a leftover is never handed back with its old
// fence.
//
// Read/write locks and semaphores (docs/ARCHITECTURE.md, "Lock shapes") use the same prefix,
// so that `etcdctl lock` and dblock's writers wait for readers: a reader's key and a
// semaphore contender's carry their shape and a random tag besides the lease (the Gate lets
// several threads of a Client in at once in those shapes; etcd_keys.hpp). A writer is any
// other key. A reader holds when no writer's key is below its own and waits for the nearest
// one; a semaphore contender of N holds when fewer than N keys are below its own.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/etcd/etcd_cluster.hpp"
#include "backends/etcd/etcd_session.hpp"
#include "core/driver.hpp"

namespace dblock::detail::etcd {

// A lock's TTL as a lease TTL: whole seconds, rounded up, at least 1 (etcd also raises it to
// its own minimum, 1.5 election timeouts rounded up: 2 s by default).
seconds lease_ttl(milliseconds ttl);

class Driver final : public LockDriver, private RenewalBatch {
 public:
  Driver(std::shared_ptr<Cluster> cluster, std::string root) : cluster_(std::move(cluster)), root_(std::move(root)) {}

  Attempt try_acquire(AcquireRequest& request) override;
  bool waits_in_server() const noexcept override { return true; }

 private:
  struct Contender;
  class Held;
  // Each item's key is a Held's (Held::batched): its lease kept alive once however many keys
  // it holds, and every key read again in one Txn, to see that it is still ours.
  std::vector<Renewal> renew(const std::vector<Item>& items) override;
  // A reader's or a semaphore contender's acquire (AcquireRequest::mode, permits).
  Attempt try_acquire_shaped(AcquireRequest& request);
  // A waiter's look, after the keep-alive its lease is due: its key and the keys `before`
  // selects, into *seen. `expired`: the lease went meanwhile; `again`: a transient error was
  // waited through, look again; `later`: one lasted until `until`, the attempt's end.
  enum class Look { seen, expired, again, later };
  Look look(Contender& c, const pb::RangeRequest& before, Clock::time_point until, pb::TxnResponse* seen);
  // A semaphore contender that waited tells the one behind it that it moved up (holds now).
  bool announce(Contender& c, const std::string& owner);
  // The lease a new key goes under: the shared one for `ttl` (granted anew when it is gone),
  // kept alive within the last third of its TTL; or, for an unrenewed lock, one of its own.
  std::shared_ptr<Session> session(milliseconds ttl, bool renewed);
  // Our key `key` (under a name's prefix) in session `s`, put if absent, and in the same Txn `look`
  // (a read of the name's keys, which sees ours) into *seen. Null: the lease was gone, and
  // nothing was put.
  std::unique_ptr<Contender> enter(const std::string& key, const std::string& owner,
                                   std::shared_ptr<Session> s, const pb::RangeRequest& look, pb::TxnResponse* seen);

  std::shared_ptr<Cluster> cluster_;
  const std::string root_;
  std::mutex sessions_mutex_;
  std::map<seconds, std::shared_ptr<Session>> sessions_;  // the shared lease per TTL
};

}  // namespace dblock::detail::etcd
