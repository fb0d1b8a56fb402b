// The Lua scripts of the redis and redlock backends, and the key layout they work on.
//
//   NAME                  the lock itself: its value is the owner string, its PTTL the lease.
//                         The bare name, so that redis-py's Redis().lock(NAME) (SET NX on the
//                         same key) and dblock exclude each other.
//   <table>:grant:NAME    the grant record, a string "<fence> <holds> <acquired_at ms>
//                         <waiting 0|1> <owner>" (waiting = 1 once a subscribed waiter found
//                         NAME busy), with the same expiry as NAME; present only while dblock
//                         holds NAME. (Before 2026-11: a hash at <table>:meta:NAME, which
//                         this version neither reads nor writes.)
//   <table>:fence:NAME    the fence counter (INCR), never expires.
//   <table>:released      pub/sub channel; a release that frees NAME publishes NAME if
//                         someone waits (the record's `waiting` flag).
//
// Each script checks and writes in one atomic step (Redis runs a script alone).
#pragma once

#include <string>

#include "backends/redis/redis_connection.hpp"

namespace dblock::detail::redis {

struct Keys {
  std::string prefix;  // "<table>:"
  std::string grant(const std::string& name) const { return prefix + "grant:" + name; }
  std::string fence(const std::string& name) const { return prefix + "fence:" + name; }
  std::string channel() const { return prefix + "released"; }
  std::string grant_pattern() const { return prefix + "grant:*"; }
};

// KEYS name, grant, fence; ARGV owner, ttl_ms, flag_waiting 0|1, acquired_at_ms
//   -> {acquired 0|1, fence, remaining_ms}
const Script& acquire_script();
// KEYS name, grant; ARGV owner, fence, ttl_ms -> remaining_ms, or nil when not ours
const Script& renew_script();
// KEYS name, grant; ARGV owner, fence, channel -> 0 not ours, 1 a hold counted down, 2 freed
const Script& release_script();
// KEYS name, grant; ARGV owner, channel -> as release, without the fence check (redlock's
// undo of an attempt on a node whose answer it did not get)
const Script& abort_script();
// KEYS name, grant, fence; ARGV owner, fence -> 1 if we hold name there (redlock write-back)
const Script& fence_script();
// KEYS name, grant; ARGV channel -> 1 if a dblock holder's lock was deleted
const Script& force_release_script();
// KEYS name, grant -> {owner, fence, holds, acquired_at_ms, pttl_ms, now_ms} or nil
const Script& describe_script();

}  // namespace dblock::detail::redis
