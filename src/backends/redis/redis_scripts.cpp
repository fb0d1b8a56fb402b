#include "backends/redis/redis_scripts.hpp"

namespace dblock::detail::redis {

// Acquire or re-enter. Every redis.call from Lua costs about as much server time as a bare
// command's whole execution, so the common case (a free name) comes first and does only
// what a fenced, listable lock needs: SET NX PX (what redis-py does too), INCR the fence,
// TIME, and the meta hash (HSET + PEXPIRE). HSET writes every field a grant has, so a meta
// hash left behind (its key deleted by hand) needs no DEL first; at most its `waiting` flag
// survives, which costs one needless PUBLISH.
// Re-entry (the value is our owner string) adds a hold and extends both keys to the longer
// of what is left and the new TTL, keeping the fence. A busy name answers the holder's PTTL
// so that waiters sleep no longer than it; 0 when the key has no TTL (a redis-py lock taken
// without timeout). With ARGV[3] = 1 (the caller is subscribed to releases, or will be
// before it tries again) a busy attempt flags the holder's meta hash `waiting`, and only a
// release of a flagged grant PUBLISHes: a waiter flags before it subscribes and tries once
// more after, so it cannot miss the release, and an uncontended release publishes nothing.
// A foreign holder (no meta hash) is not flagged: its release does not publish anyway.
// A busy answer names the holder (the key's value): Redlock tells a split vote from a
// holder with a majority by it.
const Script& acquire_script() {
  static const Script s(R"lua(
local ttl = tonumber(ARGV[2])
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ttl) then
  local fence = redis.call('INCR', KEYS[3])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'fence', fence, 'holds', 1, 'acquired_at', now)
  redis.call('PEXPIRE', KEYS[2], ttl)
  return {1, fence, ttl}
end
local left = redis.call('PTTL', KEYS[1])
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  if left < ttl then left = ttl end
  redis.call('PEXPIRE', KEYS[1], left)
  redis.call('HINCRBY', KEYS[2], 'holds', 1)
  redis.call('PEXPIRE', KEYS[2], left)
  return {1, tonumber(redis.call('HGET', KEYS[2], 'fence') or '0'), left}
end
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then redis.call('HSET', KEYS[2], 'waiting', 1) end
if left < 0 then left = 0 end
return {0, holder, left}
)lua");
  return s;
}

// Renew: only the holder of this very grant (owner and fence) may extend, so a stale grant
// of the same owner never resurrects or prolongs a newer one.
const Script& renew_script() {
  static const Script s(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
if tonumber(redis.call('HGET', KEYS[2], 'fence') or '-1') ~= tonumber(ARGV[2]) then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return tonumber(ARGV[3])
)lua");
  return s;
}

// Release: the same check as renew (one HMGET reads the fence, the holds and the waiting
// flag); an earlier hold counts down, the last frees the name and, if a waiter flagged the
// grant (see acquire), tells the waiters (PUBLISH), all in one step.
const Script& release_script() {
  static const Script s(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local m = redis.call('HMGET', KEYS[2], 'fence', 'holds', 'waiting')
if tonumber(m[1] or '-1') ~= tonumber(ARGV[2]) then return 0 end
if tonumber(m[2] or '1') > 1 then
  redis.call('HINCRBY', KEYS[2], 'holds', -1)
  return 1
end
redis.call('DEL', KEYS[1], KEYS[2])
if m[3] then redis.call('PUBLISH', ARGV[3], KEYS[1]) end
return 2
)lua");
  return s;
}

// Undo of a redlock attempt that did not win: the node may have granted with a fence we
// never saw (its answer timed out), so only the owner is checked.
const Script& abort_script() {
  static const Script s(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('HINCRBY', KEYS[2], 'holds', -1) > 0 then return 1 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[2], KEYS[1])
return 2
)lua");
  return s;
}

// Redlock's fence write-back: raise the node's counter to the grant's fence F (so that the
// next grant, whose majority overlaps this one, INCRs past F) and record F as the fence
// of our hold there. Answers whether we still hold the name on this node.
const Script& fence_script() {
  static const Script s(R"lua(
local f = tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[3]) or '0') < f then redis.call('SET', KEYS[3], ARGV[2]) end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], 'fence', ARGV[2])
return 1
)lua");
  return s;
}

// An operator's force release: only a dblock holder's lock (the meta hash exists and names
// the key's current owner) is deleted, never a foreign key that merely has the same name.
const Script& force_release_script() {
  static const Script s(R"lua(
local owner = redis.call('HGET', KEYS[2], 'owner')
if not owner then return 0 end
if redis.call('GET', KEYS[1]) == owner then redis.call('DEL', KEYS[1]) end
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[1], KEYS[1])
return 1
)lua");
  return s;
}

// One listed lease, read atomically, with the server's clock for expires_at.
const Script& describe_script() {
  static const Script s(R"lua(
local m = redis.call('HMGET', KEYS[2], 'owner', 'fence', 'holds', 'acquired_at')
if not m[1] or redis.call('GET', KEYS[1]) ~= m[1] then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {m[1], tonumber(m[2]), tonumber(m[3]), tonumber(m[4]), redis.call('PTTL', KEYS[1]), now}
)lua");
  return s;
}

}  // namespace dblock::detail::redis
