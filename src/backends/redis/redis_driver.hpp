// The redis strategy on one Redis server: each attempt, renewal and release is one script
// (redis_scripts.hpp) on a pooled connection.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "backends/redis/redis_connection.hpp"
#include "backends/redis/redis_scripts.hpp"
#include "backends/redis/redis_subscriber.hpp"
#include "core/driver.hpp"
#include "core/keyed_grant.hpp"

namespace dblock::detail::redis {

// What a master that Sentinels fail over asks of the strategy (redis-sentinel URLs); the
// defaults are a single server's.
struct Failover {
  // How long an attempt keeps looking for the master after a connection to it failed or met
  // a replica (each try opens a new connection, which asks the Sentinels again); 0: one try.
  milliseconds retry_for{0};
  // WAIT for this many replicas after each grant and renewal: a grant is answered, and a
  // renewal counted, only once they have it. 0: not asked.
  int replicas = 0;
  milliseconds wait_timeout{0};  // WAIT's own limit (also at most half the TTL asked)
};

class RedisDriver final : public LockDriver, private RenewalBatch {
 public:
  // feed: null when notifications are off (waiters poll).
  RedisDriver(ConnectionPool& pool, RedisFeed* feed, Failover failover = {})
      : pool_(pool), feed_(feed ? &feed->feed : nullptr), handed_list_(feed ? feed->handed_list : ""),
        failover_(failover) {}
  Attempt try_acquire(AcquireRequest& r) override;
  // A grant's renewal and release (its handle is a KeyedGrant).
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                int holds);
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence);
  bool release_after(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds keep);
  RenewalBatch* renewal_batch() noexcept { return this; }
  std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) override {
    return feed_ ? feed_->watch(name, owner) : nullptr;
  }
  // Once the process's subscription is confirmed, a watch is an entry in a table.
  std::unique_ptr<ReleaseWatch> early_watch(const std::string& name, const std::string& owner) override {
    return feed_ ? feed_->watch_if_live(name, owner) : nullptr;
  }

 private:
  // The renewals of a Client's records due at one tick: each record's renew script, pipelined
  // on one connection (one round trip), then one WAIT for them all where replicas are asked for.
  std::vector<Renewal> renew(const std::vector<Item>& items) override;
  Attempt attempt(AcquireRequest& r);
  milliseconds handover_lease(const AcquireRequest& r) const;
  // The grant a release handed this waiter, if its message came (on the hand-over list).
  std::optional<Attempt> take_handover(AcquireRequest& r);
  ConnectionPool& pool_;
  ReleaseFeed* feed_;
  const std::string handed_list_;  // where a release tells this process of a hand-over
  const Failover failover_;
};

// After a write on c: when failover.replicas > 0, WAITs for that many replicas to have it.
// Too few within the time: `undo` (if any) runs on c, the connection is dropped (its server may
// be a master cut off from its replicas) and UnavailableError thrown.
void confirm_replicated(Connection& c, const Failover& failover, milliseconds ttl,
                        const std::function<void(Connection&)>& undo = nullptr);

// How long a fair waiter's ticket holds without a new attempt (acquire_script()): the core
// tries again at least every second while it waits (its backoff's cap once a release watch is
// armed), so a live waiter keeps its place, and a dead one's lapses within this.
constexpr milliseconds ticket_life{3000};

// One server's answer to the acquire script (see acquire_script()): granted with a fence
// (for the TTL asked), or busy with the holder's time left.
struct Answer {
  bool granted = false;
  std::uint64_t fence = 0;
  milliseconds remaining{0};
};
Answer parse_answer(const redisReply& r, milliseconds ttl);
// The acquire script's acquired_at: this machine's clock in ms since the epoch, as text
// (for listing only; expiry is the server's PTTL).
std::string now_ms_text();

}  // namespace dblock::detail::redis
