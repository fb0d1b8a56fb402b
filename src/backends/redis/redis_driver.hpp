// The redis strategy on one Redis server: each attempt, renewal and release is one script
// (redis_scripts.hpp) on a pooled connection.
#pragma once

#include <memory>

#include "backends/redis/redis_connection.hpp"
#include "backends/redis/redis_scripts.hpp"
#include "backends/redis/redis_subscriber.hpp"
#include "core/driver.hpp"

namespace dblock::detail::redis {

class RedisDriver final : public LockDriver {
 public:
  // subscriber: null when notifications are off (waiters poll).
  RedisDriver(Pool& pool, Subscriber* subscriber) : pool_(pool), sub_(subscriber) {}
  Attempt try_acquire(const AcquireRequest& r) override;
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl) override;
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence) override;
  std::unique_ptr<ReleaseWatch> watch(const std::string& name) override { return sub_ ? sub_->watch(name) : nullptr; }

 private:
  Pool& pool_;
  Subscriber* sub_;
};

// Reads the acquire script's answer (see acquire_script()); ttl: the TTL the attempt asked
// for, which a fresh grant holds.
Attempt parse_attempt(const redisReply& r, milliseconds ttl);
// The acquire script's acquired_at: this machine's clock in ms since the epoch, as text
// (for listing only; expiry is the server's PTTL).
std::string now_ms_text();

}  // namespace dblock::detail::redis
