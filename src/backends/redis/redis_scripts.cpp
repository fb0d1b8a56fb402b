#include "backends/redis/redis_scripts.hpp"

namespace dblock::detail::redis {

// The lock key's value is the grant record, "<fence> <holds> <acquired_at> <waiting> <owner>"
// (owner last: it may contain spaces), so a grant writes one key (SET NX PX) and a release
// deletes one. Every redis.call from Lua costs about as much server time as a bare command's
// whole execution, and a Redlock grant pays it on every node. Measured over five nodes in one
// session, the same client sending each pair of scripts bare, as p50 of the cycle vs the
// fenced floor: the record in a key of its own (3 calls to acquire, 3 to release) 1.18-1.21x,
// the same without number conversions and table answers 1.06-1.14x, the record in the
// value (2 and 2) 1.02-1.06x.
// with_record(): the script with two helpers in front, so each script reads and writes the
// record the same way: parse(v) -> fence, holds, acquired_at, waiting, owner (all nil when v
// is nil or not a record: a redis-py token, a value of an older dblock); record(...) -> the
// string again.
namespace {
std::string with_record(const char* body) {
  return std::string(R"lua(
local function parse(v)
  if v then return string.match(v, '^(%d+) (%d+) (%d+) (%d) (.*)$') end
end
local function record(f, h, at, w, o) return f .. ' ' .. h .. ' ' .. at .. ' ' .. w .. ' ' .. o end
)lua") + body;
}
}  // namespace

// Acquire or re-enter. The common case (a free name) comes first and costs two calls: INCR
// the fence, then SET NX PX the record (the same SET NX PX redis-py takes its lock with); a
// busy name gives the number back (DECR, in the same atomic step, so nobody ever sees it).
// It answers just the fence (an integer: the lease is the TTL the caller asked for) and
// touches no Lua number but the fence: ARGV[2] goes to PX as sent and the record's constant
// fields are strings, because every number <-> string conversion is a strtod or a "%.14g"
// printf in the server, and a table answer costs the server a second reply buffer.
// acquired_at is the caller's clock (ARGV[4], ms; for listing only: expiry is the key's
// PTTL, the server's).
// Re-entry (the record names our owner) adds a hold and extends the key to the longer of
// what is left and the new TTL, keeping the fence: {1, fence, remaining}. A busy name
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
local fence = redis.call('INCR', KEYS[2])
if redis.call('SET', KEYS[1], record(string.format('%d', fence), '1', ARGV[4], '0', ARGV[1]), 'NX', 'PX', ARGV[2]) then
  return fence
end
redis.call('DECR', KEYS[2])
local value = redis.call('GET', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
local f, h, at, w, o = parse(value)
if f and o == ARGV[1] then
  local ttl = tonumber(ARGV[2])
  if left < ttl then left = ttl end
  redis.call('SET', KEYS[1], record(f, tonumber(h) + 1, at, w, o), 'PX', left)
  return {1, tonumber(f), left}
end
if f and ARGV[3] == '1' and w == '0' then redis.call('SET', KEYS[1], record(f, h, at, '1', o), 'KEEPTTL') end
if left < 0 then left = 0 end
return {0, o or value or '', left}
)lua"));
  return s;
}

// Renew: only the holder of this very grant (owner and fence) may extend, so a stale grant
// of the same owner never resurrects or prolongs a newer one. Fences compare as decimal
// strings: both sides are canonical (INCR's, std::to_string's), and no float is involved.
const Script& renew_script() {
  static const Script s(with_record(R"lua(
local f, h, at, w, o = parse(redis.call('GET', KEYS[1]))
if o ~= ARGV[1] or f ~= ARGV[2] then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return tonumber(ARGV[3])
)lua"));
  return s;
}

// Release: the same check as renew; an earlier hold counts down, the last frees the name
// and, if a waiter flagged the grant (see acquire), tells the waiters (PUBLISH), all in one
// step. The holds compare as text ('1': the last hold), so the common path converts no
// number.
const Script& release_script() {
  static const Script s(with_record(R"lua(
local f, h, at, w, o = parse(redis.call('GET', KEYS[1]))
if o ~= ARGV[1] or f ~= ARGV[2] then return 0 end
if h ~= '1' then
  redis.call('SET', KEYS[1], record(f, tonumber(h) - 1, at, w, o), 'KEEPTTL')
  return 1
end
redis.call('DEL', KEYS[1])
if w == '1' then redis.call('PUBLISH', ARGV[3], KEYS[1]) end
return 2
)lua"));
  return s;
}

// Undo of a redlock attempt that did not win: the node may have granted with a fence we
// never saw (its answer timed out), so only the owner is checked.
const Script& abort_script() {
  static const Script s(with_record(R"lua(
local f, h, at, w, o = parse(redis.call('GET', KEYS[1]))
if o ~= ARGV[1] then return 0 end
if h ~= '1' then
  redis.call('SET', KEYS[1], record(f, tonumber(h) - 1, at, w, o), 'KEEPTTL')
  return 1
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], KEYS[1])
return 2
)lua"));
  return s;
}

// Redlock's fence write-back: raise the node's counter to the grant's fence F (so that the
// next grant, whose majority overlaps this one, INCRs past F) and record F as the fence
// of our hold there. Answers whether we hold the name on this node.
const Script& fence_script() {
  static const Script s(with_record(R"lua(
if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end
local f, h, at, w, o = parse(redis.call('GET', KEYS[1]))
if o ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], record(ARGV[2], h, at, w, o), 'KEEPTTL')
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
local f, h, at, w, o = parse(redis.call('GET', KEYS[1]))
if not f then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {o, tonumber(f), tonumber(h), tonumber(at), redis.call('PTTL', KEYS[1]), now}
)lua"));
  return s;
}

}  // namespace dblock::detail::redis
