// Watchdog: per Client, one thread that keeps the deadlines and reports loss, and one that
// renews held leases (every renew_every). Leases whose handles share a RenewalBatch (one
// table's rows) are renewed together, in one statement: when one of them is due, those due
// within half their interval go with it, so a Client's leases settle on one tick. A transient renewal error is retried until the
// local deadline; only a clear "not ours" answer or the deadline passing makes a lease lost,
// and a lost lease is never renewed. The two are separate so that a renewal stuck on the
// network (up to the backend's own timeouts) cannot delay a loss past the deadline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/grant.hpp"

namespace dblock::detail {

class Watchdog {
 public:
  Watchdog();
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void watch(const std::shared_ptr<Grant>& grant);
  // After this returns, no renewal result or loss for the grant is acted on any more.
  void unwatch(const Grant* grant);

 private:
  struct Entry {
    std::weak_ptr<Grant> grant;
    const Grant* key;
    Clock::time_point next_renew;
    GrantHandle::Batched batched;  // the handle's, read once (fixed for its life)
    Clock::duration renew_every;
    bool renewing = false;  // queued for, or in, the renewal thread
    // Set when the deadline passed with no renewal under way (the process was frozen, e.g.
    // SIGSTOP, or the loop ran late): the server is asked first, and the loss is declared
    // only if that renewal fails or is still out at this time.
    Clock::time_point late_check_until = Clock::time_point::min();
    // The last renewal attempt ended without renewing (the server did not answer, or could
    // not be reached): the process ran, so a deadline passing now is no freeze, and gets no
    // late check. (A lease's server frees it at the deadline: a late check declared the loss
    // up to a renewal interval after another client was granted the lock. A Redlock holder
    // cut off by a real packet drop, its nodes resting so that each attempt failed at once,
    // was told 62 ms after the takeover.)
    bool failing = false;
  };
  // Work for the renewal thread: renew a grant, or tell its driver it was declared lost.
  struct Job {
    std::weak_ptr<Grant> grant;
    bool lost;
    GrantHandle::Batched batched{};
  };
  // Shared with the thread, so that a client destroyed from the thread itself (by a
  // callback dropping the last reference) leaves the thread valid state to stop on.
  struct State {
    std::mutex mutex;
    std::condition_variable wake;      // the deadline thread
    std::condition_variable has_jobs;  // the renewal thread
    std::vector<Entry> entries;
    std::deque<Job> jobs;
    Clock::time_point sleeping_until = Clock::time_point::min();  // when the thread wakes next
    // How long the thread sleeps with nothing to watch: the shortest time to a grant's first
    // renewal seen (see run()), so that the next acquire, due no sooner, need not wake it.
    Clock::duration idle_nap = Clock::duration::max();
    // Bumped (under the mutex) by every change the deadline thread must see: a renewal that
    // finished, a new grant. A pass that began before it looks again instead of sleeping on
    // what it computed: the thread lets go of the mutex mid-pass, and a notify then is lost.
    std::uint64_t changes = 0;
    bool stop = false;
  };
  static void run(std::shared_ptr<State> state);
  static void renew_loop(std::shared_ptr<State> state);
  // Renews one grant, or a batch's grants in one call; then settles each. False: stopping.
  static bool renew_one(State& st, const std::shared_ptr<Grant>& g);
  static bool renew_batch(State& st, RenewalBatch& batch, std::vector<std::shared_ptr<Grant>> grants,
                          std::vector<const GrantKey*> keys);
  // Acts on a renewal's answer (none: it failed) sent at `sent`. False: stopping.
  static bool settle(State& st, Grant& g, Clock::time_point sent, const std::optional<Renewal>& r, bool released);
  static void let_go(Grant& grant) noexcept;

  std::shared_ptr<State> state_;
  std::thread thread_, renewer_;
  std::once_flag started_;
};

}  // namespace dblock::detail
