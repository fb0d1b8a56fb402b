// The Lua scripts of the redis and redlock backends, and the key layout they work on.
//
//   NAME                  the lock itself: its value is the owner string, its PTTL the lease.
//                         The bare name, so that redis-py's Redis().lock(NAME) (SET NX on the
//                         same key) and dblock exclude each other.
//   <table>:meta:NAME     hash {owner, fence, holds, acquired_at (ms, server clock), and
//                         waiting = 1 once a subscribed waiter found NAME busy}, with the
//                         same expiry as NAME; present only while dblock holds NAME.
//   <table>:fence:NAME    the fence counter (INCR), never expires.
//   <table>:released      pub/sub channel; a release that frees NAME publishes NAME if
//                         someone waits (the meta hash's `waiting` flag).
//
// Each script checks and writes in one atomic step (Redis runs a script alone).
#pragma once

#include <string>

#include "backends/redis/redis_connection.hpp"

namespace dblock::detail::redis {

struct Keys {
  std::string prefix;  // "<table>:"
  std::string meta(const std::string& name) const { return prefix + "meta:" + name; }
  std::string fence(const std::string& name) const { return prefix + "fence:" + name; }
  std::string channel() const { return prefix + "released"; }
  std::string meta_pattern() const { return prefix + "meta:*"; }
};

// KEYS name, meta, fence; ARGV owner, ttl_ms, flag_waiting 0|1 -> {acquired 0|1, fence, remaining_ms}
const Script& acquire_script();
// KEYS name, meta; ARGV owner, fence, ttl_ms -> remaining_ms, or nil when not ours
const Script& renew_script();
// KEYS name, meta; ARGV owner, fence, channel -> 0 not ours, 1 a hold counted down, 2 freed
const Script& release_script();
// KEYS name, meta; ARGV owner, channel -> as release, without the fence check (redlock's
// undo of an attempt on a node whose answer it did not get)
const Script& abort_script();
// KEYS name, meta, fence; ARGV owner, fence -> 1 if we hold name there (redlock write-back)
const Script& fence_script();
// KEYS name, meta; ARGV channel -> 1 if a dblock holder's lock was deleted
const Script& force_release_script();
// KEYS name, meta -> {owner, fence, holds, acquired_at_ms, pttl_ms, now_ms} or nil
const Script& describe_script();

}  // namespace dblock::detail::redis
