#include "backends/redis/redis_scripts.hpp"

namespace dblock::detail::redis {

// A grant record is one string, "<fence> <holds> <acquired_at> <waiting> <owner>" (owner
// last: it may contain spaces), with the lease's expiry, so that writing it is one SET ... PX
// (a hash needed HSET and PEXPIRE), reading it one GET. Every redis.call from Lua costs about
// as much server time as a bare command's whole execution, and a Redlock grant pays it on
// every node: with a hash meta and TIME the scripts cost 1.06-1.13x the fenced floor sent
// bare, with the record 0.84-1.01x (same session).
// with_record(): the script with two helpers in front, so each script reads and writes the
// record the same way: parse(g) -> fence, holds, acquired_at, waiting, owner (all nil when g
// is nil or not a record); record(...) -> the string again.
namespace {
std::string with_record(const char* body) {
  return std::string(R"lua(
local function parse(g)
  if g then return string.match(g, '^(%d+) (%d+) (%d+) (%d) (.*)$') end
end
local function record(f, h, at, w, o) return f .. ' ' .. h .. ' ' .. at .. ' ' .. w .. ' ' .. o end
)lua") + body;
}
}  // namespace

// Acquire or re-enter. The common case (a free name) comes first and does only what a
// fenced, listable lock needs: SET NX PX (what redis-py does too), INCR the fence, write the
// grant record: 3 calls. acquired_at is the caller's clock (ARGV[4], ms; for listing only:
// expiry is the key's PTTL, the server's).
// Re-entry (the value is our owner string) adds a hold and extends both keys to the longer
// of what is left and the new TTL, keeping the fence. A busy name answers the holder's PTTL
// so that waiters sleep no longer than it; 0 when the key has no TTL (a redis-py lock taken
// without timeout). With ARGV[3] = 1 (the caller is subscribed to releases, or will be
// before it tries again) a busy attempt flags the holder's record `waiting`, and only a
// release of a flagged grant PUBLISHes: a waiter flags before it subscribes and tries once
// more after, so it cannot miss the release, and an uncontended release publishes nothing.
// A foreign holder (no record) is not flagged: its release does not publish anyway.
// A busy answer names the holder (the key's value): Redlock tells a split vote from a
// holder with a majority by it.
const Script& acquire_script() {
  static const Script s(with_record(R"lua(
local ttl = tonumber(ARGV[2])
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ttl) then
  local fence = redis.call('INCR', KEYS[3])
  redis.call('SET', KEYS[2], string.format('%d', fence) .. ' 1 ' .. ARGV[4] .. ' 0 ' .. ARGV[1], 'PX', ttl)
  return {1, fence, ttl}
end
local left = redis.call('PTTL', KEYS[1])
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  if left < ttl then left = ttl end
  redis.call('PEXPIRE', KEYS[1], left)
  local f, h, at, w, o = parse(redis.call('GET', KEYS[2]))
  if not f then return {1, 0, left} end
  redis.call('SET', KEYS[2], record(f, tonumber(h) + 1, at, w, o), 'PX', left)
  return {1, tonumber(f), left}
end
if ARGV[3] == '1' then
  local f, h, at, w, o = parse(redis.call('GET', KEYS[2]))
  if f and w == '0' then redis.call('SET', KEYS[2], record(f, h, at, 1, o), 'KEEPTTL') end
end
if left < 0 then left = 0 end
return {0, holder, left}
)lua"));
  return s;
}

// Renew: only the holder of this very grant (owner and fence) may extend, so a stale grant
// of the same owner never resurrects or prolongs a newer one. Fences compare as decimal
// strings: both sides are canonical (INCR's, std::to_string's), and no float is involved.
const Script& renew_script() {
  static const Script s(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
local g = redis.call('GET', KEYS[2])
if not g or string.match(g, '^(%d+) ') ~= ARGV[2] then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return tonumber(ARGV[3])
)lua");
  return s;
}

// Release: the same check as renew (one GET reads the fence, the holds and the waiting
// flag); an earlier hold counts down, the last frees the name and, if a waiter flagged the
// grant (see acquire), tells the waiters (PUBLISH), all in one step.
const Script& release_script() {
  static const Script s(with_record(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local f, h, at, w, o = parse(redis.call('GET', KEYS[2]))
if not f or f ~= ARGV[2] then return 0 end
if tonumber(h) > 1 then
  redis.call('SET', KEYS[2], record(f, tonumber(h) - 1, at, w, o), 'KEEPTTL')
  return 1
end
redis.call('DEL', KEYS[1], KEYS[2])
if w == '1' then redis.call('PUBLISH', ARGV[3], KEYS[1]) end
return 2
)lua"));
  return s;
}

// Undo of a redlock attempt that did not win: the node may have granted with a fence we
// never saw (its answer timed out), so only the owner is checked.
const Script& abort_script() {
  static const Script s(with_record(R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local f, h, at, w, o = parse(redis.call('GET', KEYS[2]))
if f and tonumber(h) > 1 then
  redis.call('SET', KEYS[2], record(f, tonumber(h) - 1, at, w, o), 'KEEPTTL')
  return 1
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[2], KEYS[1])
return 2
)lua"));
  return s;
}

// Redlock's fence write-back: raise the node's counter to the grant's fence F (so that the
// next grant, whose majority overlaps this one, INCRs past F) and record F as the fence
// of our hold there. Answers whether we hold the name (and its record) on this node.
const Script& fence_script() {
  static const Script s(R"lua(
if tonumber(redis.call('GET', KEYS[3]) or '0') < tonumber(ARGV[2]) then redis.call('SET', KEYS[3], ARGV[2]) end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local g = redis.call('GET', KEYS[2])
local rest
if g then rest = string.match(g, '^%d+( .*)$') end
if not rest then return 0 end
redis.call('SET', KEYS[2], ARGV[2] .. rest, 'KEEPTTL')
return 1
)lua");
  return s;
}

// An operator's force release: only a dblock holder's lock (the record exists and names
// the key's current owner) is deleted, never a foreign key that merely has the same name.
const Script& force_release_script() {
  static const Script s(with_record(R"lua(
local g = redis.call('GET', KEYS[2])
if not g then return 0 end
local f, h, at, w, o = parse(g)
if f and redis.call('GET', KEYS[1]) == o then redis.call('DEL', KEYS[1]) end
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[1], KEYS[1])
return 1
)lua"));
  return s;
}

// One listed lease, read atomically, with the server's clock for expires_at.
const Script& describe_script() {
  static const Script s(with_record(R"lua(
local f, h, at, w, o = parse(redis.call('GET', KEYS[2]))
if not f or redis.call('GET', KEYS[1]) ~= o then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {o, tonumber(f), tonumber(h), tonumber(at), redis.call('PTTL', KEYS[1]), now}
)lua"));
  return s;
}

}  // namespace dblock::detail::redis
