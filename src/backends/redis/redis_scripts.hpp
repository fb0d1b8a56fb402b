// The Lua scripts of the redis and redlock backends, and the key layout they work on.
//
//   NAME                         the lock: its value is the grant record, a string "<fence>
//                                <holds> <acquired_at ms> <waiting 0|1|2|3> <attempt> <owner>"
//                                (waiting = 1 once a subscribed waiter found NAME busy, 2
//                                once a reader did: its release gives readers a turn; 3
//                                once a fair one did or is queued: it wakes the queue's head;
//                                attempt: what Redlock's undo may remove), its PTTL the
//                                lease. The bare name, so that redis-py's Redis().lock(NAME)
//                                (SET NX on the same key, its token as value) and dblock
//                                exclude each other.
//                                While readers or a semaphore's holders hold NAME, it is
//                                a hash of holders instead (shaped locks, see
//                                shaped_acquire_script()): "<owner>" -> "<mode s|x> <fence>
//                                <expires_at ms> <holds> <acquired_at ms>", plus
//                                ":permits", ":writer" (a waiting writer's mark),
//                                ":turn" (the readers' turn) and ":waiting". One key
//                                either way, so a writer's record and readers' hash
//                                exclude each other.
//   dblock_locks:fence:NAME      the fence counter: the last fence granted on NAME; never
//                                expires; list() finds names by it. Names beginning
//                                "dblock_locks:fence:" are refused (they would be counters).
//   dblock_locks:queue:NAME      fair waiters (redis strategy, exclusive, LockOptions::fair):
//                                a sorted set, owner -> place in line (1, 2, ...)
//   dblock_locks:alive:NAME      a hash, owner -> until when its ticket holds (server ms);
//                                each wait renews it; and "\0" owner -> "LEASE_MS TOKEN
//                                LIST", the lease a release may hand the name over with,
//                                the attempt that wrote it and where to say so, for a waiter
//                                that takes hand-overs. Both keys expire with their last
//                                ticket.
//   dblock_locks:released        pub/sub channel; a release that frees NAME publishes NAME
//                                if someone waits (the record's `waiting` flag). When fair
//                                waiters do (waiting 3) it passes NAME to the oldest live
//                                ticket's OWNER: "NAME\0OWNER", whose watch alone wakes to
//                                try, unless it granted NAME to OWNER itself (a hand-over).
//   dblock_locks:handed:ID       a list per process (its release feed's, ID random): a
//                                hand-over to one of its waiters pushes
//                                "NAME\0\0FENCE LEASE TOKEN OWNER" there, and the feed's
//                                BLPOP takes it; it expires a minute after its last push.
//
// One lock has one counter and one channel, whatever ClientOptions::table says: the lock
// key is the bare name for every client, so a counter per namespace would let two
// namespaces draw fences for one lock independently. Applications keep apart by database
// number (redis://host:port/N). The counter and channel keep the names the default
// namespace always had, so older clients of the default namespace stay in step.
// An older dblock's record has no attempt field, so this version reads it as a foreign
// holder and the older reads this one's the same way: mixed versions exclude each other.
//
// Each script checks and writes in one atomic step (Redis runs a script alone).
#pragma once

#include <string>

#include "backends/redis/redis_connection.hpp"

namespace dblock::detail::redis {

namespace keys {
inline const std::string fence_prefix = "dblock_locks:fence:";
inline const std::string queue_prefix = "dblock_locks:queue:";
inline const std::string alive_prefix = "dblock_locks:alive:";
inline const std::string handed_prefix = "dblock_locks:handed:";
inline const std::string channel = "dblock_locks:released";
inline std::string fence(const std::string& name) { return fence_prefix + name; }
inline std::string queue(const std::string& name) { return queue_prefix + name; }
inline std::string alive(const std::string& name) { return alive_prefix + name; }
// UsageError for a name that is one of these keys (a fence counter, a queue).
void check_name(const std::string& name);
}  // namespace keys

// KEYS name, fence[, queue, alive]; ARGV owner, ttl_ms, flag_waiting 0|1, acquired_at_ms,
// attempt, fence floor in microseconds ("": the server's clock)[, writer mark ms (default 0:
// none)[, ticket ms[, hand-over lease ms (0: none)]]]
//   -> fence (an integer: a grant, for ttl_ms; a leftover of owner's is taken over), or
//   {0, holder, holder's remaining_ms} (busy; readers hold it: the writer's mark is set for
//   that long, and the remaining no more than half of it; not the asker's turn in the queue:
//   the head's ticket's remaining), or
//   {-1, permits} (a semaphore holds it), {-2, type} (the key is another Redis value).
// With the queue keys (a fair attempt) the asker is granted only in its turn, and a busy
// answer keeps its place in the queue for `ticket ms` more (0: leaves it), taking a
// hand-over for the lease given.
const Script& acquire_script();
// KEYS name, queue, alive, fence; ARGV owner, channel -> 1 if owner had a place in the queue
// (now given up) or had been handed the name (now passed on), else 0. Passes the name on to
// the waiter whose turn it now is if it is free.
const Script& leave_script();
// KEYS name; ARGV owner, fence, ttl_ms, holds -> remaining_ms, or nil when not ours
const Script& renew_script();
// KEYS name[, queue, alive, fence]; ARGV owner, "fence" (a release) or "attempt" (redlock's
// undo, also sent to nodes whose answer it did not get), that fence or attempt id, channel
// -> 1 freed, 0 not ours
const Script& free_script();
// KEYS name; ARGV owner, fence, keep_ms -> 1 kept (holds 0, expiring in keep_ms), 0 not ours
const Script& keep_script();
// KEYS name, fence; ARGV owner, fence -> 1 if we hold name there (redlock write-back)
const Script& fence_script();
// KEYS name[, queue, alive]; ARGV channel -> 1 if a dblock holder's lock was deleted
const Script& force_release_script();
// KEYS name -> {now_ms, {owner, fence, holds, acquired_at_ms, remaining_ms, mode x|s}...} or nil
const Script& describe_script();

// Shaped locks (read/write, semaphores) on the redis strategy, on the hash described above.
// KEYS name, fence; ARGV owner, ttl_ms, flag_waiting 0|1, acquired_at_ms, mode s|x, permits
//   -> fence, {0, holder, remaining_ms} (busy), {-1, permits held}, {-2, type}
const Script& shaped_acquire_script();
// KEYS name; ARGV owner, fence, ttl_ms, holds -> remaining_ms, or nil when not ours
const Script& shaped_renew_script();
// KEYS name; ARGV owner, fence, channel -> 1 freed, 0 not ours
const Script& shaped_release_script();
// KEYS name; ARGV owner, fence, keep_ms -> 1 kept (holds 0, expiring in keep_ms), 0 not ours
const Script& shaped_keep_script();

}  // namespace dblock::detail::redis
