#include "backends/redis/redis_scripts.hpp"

#include "dblock/errors.hpp"

namespace dblock::detail::redis {

void keys::check_name(const std::string& name) {
  if (name.compare(0, fence_prefix.size(), fence_prefix) == 0)
    throw UsageError("bad lock name '" + name + "': names beginning '" + fence_prefix +
                     "' are the fence counters of the redis and redlock backends");
}

// The lock key's value is the grant record, "<fence> <holds> <acquired_at> <waiting> <attempt>
// <owner>" (owner last: it may contain spaces), so a grant writes one key (SET NX PX) and a
// release deletes one. Every redis.call from Lua costs about as much server time as a bare
// command's whole execution, and a Redlock grant pays it on every node, so the scripts make
// as few as they can and convert few numbers (a strtod or "%.14g" printf in the server).
// with_record(): the script with two helpers in front, so each script reads and writes the
// record the same way: parse(v) -> fence, holds, acquired_at, waiting, attempt, owner (all
// nil when v is nil or not a record: a redis-py token, a value of an older dblock);
// record(...) -> the string again.
namespace {
std::string with_record(const char* body) {
  return std::string(R"lua(
local function parse(v)
  if v then return string.match(v, '^(%d+) (%d+) (%d+) (%d) (%S+) (.*)$') end
end
local function record(f, h, at, w, a, o) return f .. ' ' .. h .. ' ' .. at .. ' ' .. w .. ' ' .. a .. ' ' .. o end
)lua") + body;
}
}  // namespace

// Acquire. The common case (a free name) comes first: the next fence, then SET NX PX the
// record (the same SET NX PX redis-py takes its lock with), then the counter raised to the
// fence. The fence is max(counter + 1, floor), the floor being a clock in microseconds:
// ARGV[6] when given (Redlock sends the client's clock, so nodes whose counters agree answer
// one fence), else the server's TIME. The counter orders grants while Redis keeps it; the
// clock orders them when Redis lost it (a crash before the append-only file's fsync, no
// persistence, an evicted key, a failover to a replica that had not seen the last grants),
// unless that clock stepped back by more than the time the loss took (docs/ARCHITECTURE.md,
// "Redis and Redlock"). Microseconds stay below 2^53 until the year 2255, so Lua's doubles
// hold every fence exactly.
// It answers just the fence (an integer: the lease is the TTL the caller asked for).
// acquired_at is the caller's clock (ARGV[4], ms; for listing only: expiry is the key's
// PTTL, the server's). ARGV[5] names the attempt (Redlock's undo removes only what its own
// attempt wrote; "-" where nothing is undone).
// A record that names our owner is a leftover (the client asks afresh only when it holds no
// live grant: LockDriver::try_acquire): it is taken over with the new fence, unless it was
// kept after its release (holds 0: keep_script), which is busy like anyone else's. A busy name
// answers {0, holder, PTTL}, so that waiters sleep no longer than the holder's lease (0 for
// a key without TTL: a redis-py lock taken without timeout); the holder is the record's
// owner, or a foreign key's whole value. With ARGV[3] = 1 (the caller is subscribed to
// releases, or will be before it tries again) a busy attempt flags the holder's record
// `waiting`, and only a release of a flagged grant PUBLISHes: a waiter flags before it
// subscribes and tries once more after, so it cannot miss the release, and an uncontended
// release publishes nothing. A foreign holder is not flagged: its release does not publish
// anyway. Redlock tells a split vote from a holder with a majority by the holder named.
const Script& acquire_script() {
  static const Script s(with_record(R"lua(
local floor = tonumber(ARGV[6])
if not floor then
  local t = redis.call('TIME')
  floor = t[1] * 1000000 + t[2]
end
local fence = tonumber(redis.call('GET', KEYS[2]) or '0') + 1
if fence < floor then fence = floor end
local fs = string.format('%d', fence)
if redis.call('SET', KEYS[1], record(fs, '1', ARGV[4], '0', ARGV[5], ARGV[1]), 'NX', 'PX', ARGV[2]) then
  redis.call('SET', KEYS[2], fs)
  return fence
end
local value = redis.call('GET', KEYS[1])
local f, h, at, w, a, o = parse(value)
if f and o == ARGV[1] and h ~= '0' then
  redis.call('SET', KEYS[1], record(fs, '1', ARGV[4], w, ARGV[5], o), 'PX', ARGV[2])
  redis.call('SET', KEYS[2], fs)
  return fence
end
if f and ARGV[3] == '1' and w == '0' then redis.call('SET', KEYS[1], record(f, h, at, '1', a, o), 'KEEPTTL') end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then left = 0 end
return {0, o or value or '', left}
)lua"));
  return s;
}

// Renew: only the holder of this very grant (owner and fence) may extend, so a stale grant
// of the same owner never resurrects or prolongs a newer one. Like the SQL strategies it
// keeps the longer of what is left and the new TTL (ttl 0: only the holds change), and
// writes the owner's hold count (ARGV[4]) when it changed: the client keeps the count, the
// record shows it. Fences and holds compare as decimal strings: both sides are canonical
// (string.format('%d')'s, std::to_string's), and no float is involved.
const Script& renew_script() {
  static const Script s(with_record(R"lua(
local f, h, at, w, a, o = parse(redis.call('GET', KEYS[1]))
if o ~= ARGV[1] or f ~= ARGV[2] then return false end
local ttl = tonumber(ARGV[3])
local left = redis.call('PTTL', KEYS[1])
if h ~= ARGV[4] then
  if left < ttl then left = ttl end
  if left < 1 then left = 1 end
  redis.call('SET', KEYS[1], record(f, ARGV[4], at, w, a, o), 'PX', left)
  return left
end
if left >= ttl then return left end
redis.call('PEXPIRE', KEYS[1], ttl)
return ttl
)lua"));
  return s;
}

// Release, and Redlock's undo of an attempt that did not win: deletes the record if it is
// ours and, if a waiter flagged the grant (see acquire), tells the waiters (PUBLISH), all in
// one step. A release names the grant by its fence (the same check as renew). An undo names
// the attempt: the node may have granted with a fence we never saw (its answer timed out),
// and only a record this very attempt wrote may go, so an undo that arrives where the
// attempt never ran (or after another one) changes nothing.
const Script& free_script() {
  static const Script s(with_record(R"lua(
local f, h, at, w, a, o = parse(redis.call('GET', KEYS[1]))
local grant = f
if ARGV[2] == 'attempt' then grant = a end
if o ~= ARGV[1] or grant ~= ARGV[3] then return 0 end
redis.call('DEL', KEYS[1])
if w == '1' then redis.call('PUBLISH', ARGV[4], KEYS[1]) end
return 1
)lua"));
  return s;
}

// A release that keeps the lock taken for ARGV[3] ms more (LockOptions::hold_at_least): the
// same check as release, then holds 0 (kept: see acquire) and exactly that expiry.
const Script& keep_script() {
  static const Script s(with_record(R"lua(
local f, h, at, w, a, o = parse(redis.call('GET', KEYS[1]))
if o ~= ARGV[1] or f ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], record(f, '0', at, w, a, o), 'PX', ARGV[3])
return 1
)lua"));
  return s;
}

// Redlock's fence write-back: raise the node's counter to the grant's fence F (so that the
// next grant, whose majority overlaps this one, draws past F) and record F as the fence
// of our hold there. Answers whether we hold the name on this node.
const Script& fence_script() {
  static const Script s(with_record(R"lua(
if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end
local f, h, at, w, a, o = parse(redis.call('GET', KEYS[1]))
if o ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], record(ARGV[2], h, at, w, a, o), 'KEEPTTL')
return 1
)lua"));
  return s;
}

// An operator's force release: only a dblock holder's lock (the value is a grant record) is
// deleted, never a foreign key that merely has the same name.
const Script& force_release_script() {
  static const Script s(with_record(R"lua(
if not parse(redis.call('GET', KEYS[1])) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], KEYS[1])
return 1
)lua"));
  return s;
}

// One listed lease, read atomically, with the server's clock for expires_at.
const Script& describe_script() {
  static const Script s(with_record(R"lua(
local f, h, at, w, a, o = parse(redis.call('GET', KEYS[1]))
if not f then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {o, tonumber(f), tonumber(h), tonumber(at), redis.call('PTTL', KEYS[1]), now}
)lua"));
  return s;
}

}  // namespace dblock::detail::redis
