// One etcd lease and the lock keys put under it (Go's concurrency.Session is the same idea).
//
// A Client's renewed locks of one TTL share one Session: an acquire is then one Txn (put our
// key, read the name's first key) and a release one Txn (delete it), as with a bare
// Put + DeleteRange, where a lease per acquire added a LeaseGrant and a LeaseRevoke, both
// raft writes. An unrenewed lock (LockOptions::auto_renew off) has a Session of its own, so
// that its key expires after its TTL whatever the Client's other locks do.
//
// A shared lease is kept alive as long as the Client holds or waits for any lock under it, so
// a key of ours that nobody holds any more (a failed try's, a timed-out waiter's, a lost
// grant's, or one whose put or delete had no answer) must not live on with it: it would block
// the name for everyone else. give_up() deletes such a key, and when that fails (the server
// away) keeps it in a list that refresh() deletes *before* every keep-alive: no keep-alive is
// ever sent while a key we gave up may still be there, so the worst such a key can do is
// expire with the lease. A lease that expires (or is revoked) loses every lock under it at its
// holders' next renewal, as a ZooKeeper session does; the next acquire grants a new one.
//
// Thread-safety: any thread; the calls that send (refresh, give_up) hold the session's mutex
// while they do, so a key given up and a put of the same key (claim) never cross.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/etcd/etcd_cluster.hpp"
#include "backends/etcd/etcd_keys.hpp"

namespace dblock::detail::etcd {

// Deletes `key` if its create revision is `revision` (0: whatever it is), in one Txn. False:
// it was not there with that revision. Transient errors throw.
bool delete_key(Cluster& cluster, const std::string& key, std::int64_t revision);

class Session {
 public:
  // Grants a lease of `ttl` (throws on failure: a lease granted without its answer has no key
  // and expires by itself). `shared`: kept by the Client for many locks, see above; else one
  // lock's own, revoked when the Session goes.
  Session(std::shared_ptr<Cluster> cluster, seconds ttl, bool shared);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::int64_t id() const noexcept { return id_; }
  Cluster& cluster() const noexcept { return *cluster_; }
  // A key under this lease at most one acquire uses at a time: the Client's Gate lets one
  // thread per name contend, and a lock's own Session holds one lock.
  std::string key(const std::string& prefix) const;
  // A reader's or a semaphore contender's key under this lease: several threads of the Client
  // (each its own owner) may contend for one name in those shapes at once, so each key also
  // gets a random tag of its own.
  std::string shaped_key(const std::string& prefix, KeyShape shape) const;

  // Deletes the keys given up under the lease, then keeps it alive once. False: the lease is
  // gone (expired or revoked), and every key under it with it. Transient errors throw.
  bool refresh();
  // refresh() unless the last one was sent less than `max_age` ago. False: gone.
  bool fresh(Clock::duration max_age);
  bool refresh_due() const;                      // a third of the TTL since the last refresh
  Clock::time_point refresh_due_at() const;
  // The lease lives at least until then: its TTL counts from when the server saw the request
  // that granted or refreshed it, which was after we sent it.
  Clock::time_point expiry() const;
  bool gone() const;
  void mark_gone();  // a put found the lease missing

  // Our key (with that create revision; 0: unknown, a put whose answer was lost) is no longer
  // wanted: deleted now, or before the next keep-alive. A lock's own Session revokes its lease.
  void give_up(const std::string& key, std::int64_t revision) noexcept;
  // An acquire is about to put `key`: it checks for a leftover there itself (compared on its
  // create revision), so a pending give-up of it must not delete the new key later.
  void claim(const std::string& key);

 private:
  struct Unwanted {
    std::string key;
    std::int64_t revision;
  };
  const std::shared_ptr<Cluster> cluster_;
  const std::int64_t id_;
  const bool shared_;
  mutable std::mutex mutex_;
  seconds ttl_{0};  // as the server granted it
  Clock::time_point refreshed_;
  bool gone_ = false;
  std::vector<Unwanted> unwanted_;
};

}  // namespace dblock::detail::etcd
