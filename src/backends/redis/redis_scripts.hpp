// The Lua scripts of the redis and redlock backends, and the key layout they work on.
//
//   NAME                  the lock: its value is the grant record, a string "<fence> <holds>
//                         <acquired_at ms> <waiting 0|1> <owner>" (waiting = 1 once a
//                         subscribed waiter found NAME busy), its PTTL the lease. The bare
//                         name, so that redis-py's Redis().lock(NAME) (SET NX on the same key,
//                         its token as value) and dblock exclude each other.
//   <table>:fence:NAME    the fence counter (INCR), never expires; list() finds names by it.
//   <table>:released      pub/sub channel; a release that frees NAME publishes NAME if
//                         someone waits (the record's `waiting` flag).
//
// Until 2026-11 the value was the owner alone and the record a key of its own
// (<table>:grant:NAME, before that a hash <table>:meta:NAME), which this version neither reads
// nor writes: an older dblock's lock is a foreign holder here and this version's is one
// there, so mixed versions exclude each other and share the fence counter.
//
// Each script checks and writes in one atomic step (Redis runs a script alone).
#pragma once

#include <string>

#include "backends/redis/redis_connection.hpp"

namespace dblock::detail::redis {

struct Keys {
  std::string prefix;  // "<table>:"
  std::string fence_prefix() const { return prefix + "fence:"; }
  std::string fence(const std::string& name) const { return fence_prefix() + name; }
  std::string channel() const { return prefix + "released"; }
  std::string fence_pattern() const { return prefix + "fence:*"; }
};

// KEYS name, fence; ARGV owner, ttl_ms, flag_waiting 0|1, acquired_at_ms
//   -> fence (an integer: a fresh grant, for ttl_ms), or {1, fence, remaining_ms} (a
//   re-entry), or {0, holder, holder's remaining_ms} (busy)
const Script& acquire_script();
// KEYS name; ARGV owner, fence, ttl_ms -> remaining_ms, or nil when not ours
const Script& renew_script();
// KEYS name; ARGV owner, fence, channel -> 0 not ours, 1 a hold counted down, 2 freed
const Script& release_script();
// KEYS name; ARGV owner, channel -> as release, without the fence check (redlock's undo of an
// attempt on a node whose answer it did not get)
const Script& abort_script();
// KEYS name, fence; ARGV owner, fence -> 1 if we hold name there (redlock write-back)
const Script& fence_script();
// KEYS name; ARGV channel -> 1 if a dblock holder's lock was deleted
const Script& force_release_script();
// KEYS name -> {owner, fence, holds, acquired_at_ms, pttl_ms, now_ms} or nil
const Script& describe_script();

}  // namespace dblock::detail::redis
