#include "backends/redis/redis_driver.hpp"

#include "dblock/errors.hpp"

namespace dblock::detail::redis {

std::string now_ms_text() {
  return std::to_string(std::chrono::duration_cast<milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count());
}

Answer parse_answer(const redisReply& r, milliseconds ttl) {
  if (r.type == REDIS_REPLY_INTEGER && r.integer > 0)  // a grant answers its fence alone
    return Answer{true, static_cast<std::uint64_t>(r.integer), ttl};
  if (r.type != REDIS_REPLY_ARRAY || r.elements != 3)
    throw InternalError("redis: unexpected answer to the acquire script");
  return Answer{false, 0, milliseconds{std::max<std::int64_t>(0, as_int(*r.element[2]))}};
}

Attempt RedisDriver::try_acquire(AcquireRequest& r) {
  auto c = pool_.get();
  // Attempt "-": nothing undoes a single server's grant. Fence floor "": the server's clock.
  auto reply = c->eval(acquire_script(), {r.name, keys::fence(r.name)},
                       {r.owner, std::to_string(r.ttl.count()), sub_ ? "1" : "0", now_ms_text(), "-", ""});
  auto a = parse_answer(*reply, r.ttl);
  return a.granted ? keyed_grant(*this, r, a.fence, a.remaining) : Attempt::busy(a.remaining);
}

Renewal RedisDriver::renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                           int holds) {
  auto c = pool_.get();
  auto reply = c->eval(renew_script(), {name},
                       {owner, std::to_string(fence), std::to_string(ttl.count()), std::to_string(holds)});
  if (reply->type == REDIS_REPLY_NIL) return Renewal{false, milliseconds{0}};
  return Renewal{true, milliseconds{as_int(*reply)}};
}

bool RedisDriver::release(const std::string& name, const std::string& owner, std::uint64_t fence) {
  auto c = pool_.get();
  auto reply = c->eval(free_script(), {name}, {owner, "fence", std::to_string(fence), keys::channel});
  return as_int(*reply) != 0;
}

bool RedisDriver::release_after(const std::string& name, const std::string& owner, std::uint64_t fence,
                                milliseconds keep) {
  auto c = pool_.get();
  auto reply = c->eval(keep_script(), {name}, {owner, std::to_string(fence), std::to_string(keep.count())});
  return as_int(*reply) != 0;
}

}  // namespace dblock::detail::redis
