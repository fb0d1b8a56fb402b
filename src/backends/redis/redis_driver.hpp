// The redis strategy on one Redis server: each attempt, renewal and release is one script
// (redis_scripts.hpp) on a pooled connection.
#pragma once

#include <memory>

#include "backends/redis/redis_connection.hpp"
#include "backends/redis/redis_scripts.hpp"
#include "backends/redis/redis_subscriber.hpp"
#include "core/driver.hpp"
#include "core/keyed_grant.hpp"

namespace dblock::detail::redis {

class RedisDriver final : public LockDriver {
 public:
  // subscriber: null when notifications are off (waiters poll).
  RedisDriver(Pool& pool, Subscriber* subscriber) : pool_(pool), sub_(subscriber) {}
  Attempt try_acquire(AcquireRequest& r) override;
  // A grant's renewal and release (its handle is a KeyedGrant).
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                int holds);
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence);
  bool release_after(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds keep);
  std::unique_ptr<ReleaseWatch> watch(const std::string& name) override { return sub_ ? sub_->watch(name) : nullptr; }

 private:
  Pool& pool_;
  Subscriber* sub_;
};

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
