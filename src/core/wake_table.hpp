// Per-name wake-ups shared by a notification thread (PostgreSQL LISTEN, Redis SUBSCRIBE) and
// the waiters of one or more clients. A generation per watched name counts the releases
// seen. The watches of a name queue in arrival order, and a release wakes only the first
// one: every waiter of the name would find the same answer (the lock free for one of them,
// or taken again), so one attempt per release is enough, and the rest would be a herd of
// round trips. The others still wake at their own deadline (the core's safety-net backoff),
// and a watch that leaves hands the wake to the next one, so a waiter that gives up, throws
// or wins never strands the rest. The epoch moves whenever the thread may have missed
// releases (a reconnect, a subscription lost or gained): that wakes everyone.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/driver.hpp"

namespace dblock::detail {

class WakeWatch;

// What a message says a release did: it granted the name to the next owner in its queue (a
// hand-over), with this fence, for one of the owner's acquires (the ticket's token: a
// hand-over to an acquire that gave up, whose message came late, must not be taken by the
// owner's next acquire of the name). On PostgreSQL a claim anyone who may NOTIFY can make:
// the waiter grants itself only what the server confirms. Redis's come from a key only those
// who may write the lock's keys can push to, with the lease granted.
struct Handover {
  std::uint64_t fence = 0;
  std::string token;
  milliseconds lease{0};  // Redis: the hand-over's lease, counted from the release
};

struct WakeTable {
  std::mutex mutex;
  std::condition_variable changed;  // for the owner's own state (listening, subscribed)
  std::uint64_t epoch = 0;
  bool stop = false;

  // A release of `name` was announced: wake its first waiter (a name nobody waits for is
  // ignored), or, when the release named the `next` owner in the name's queue (fair waiting),
  // that owner's waiter only, if it is one of ours.
  void bump(const std::string& name, const std::string& next = {});
  // A release handed `name` to `next`: that owner's watch, if it is ours, keeps the grant for
  // take_handover and wakes.
  void hand_over(const std::string& name, const std::string& next, Handover grant);
  // The grant handed to `owner`'s watch of `name` since the last call, if any (each once).
  std::optional<Handover> take_handover(const std::string& name, const std::string& owner);
  // Every waiter retries (call with `mutex` held).
  void bump_epoch_locked();
  // Every waiter re-checks (after `stop` was set, with `mutex` held).
  void wake_all_locked();
  // A watch on `name` by `owner` (call with `mutex` held); it keeps the table alive.
  static std::unique_ptr<ReleaseWatch> watch_locked(std::shared_ptr<WakeTable> table, std::string name,
                                                    std::string owner);

 private:
  friend class WakeWatch;
  struct Name {
    std::uint64_t generation = 0;
    std::deque<WakeWatch*> queue;  // the watches of this name, first come first
  };
  std::map<std::string, Name> names_;  // only names someone waits for
};

}  // namespace dblock::detail
