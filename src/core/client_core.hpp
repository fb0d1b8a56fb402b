// ClientCore: the shared state behind Client, Lock and Lease, and the one implementation of
// waiting, re-entry and release over any backend's LockDriver and GrantHandle.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/attempts.hpp"
#include "core/driver.hpp"
#include "core/event_thread.hpp"
#include "core/gate.hpp"
#include "core/grant.hpp"
#include "core/hangup_watch.hpp"
#include "core/reporter.hpp"
#include "core/url.hpp"
#include "core/watchdog.hpp"
#include "dblock/lease.hpp"
#include "dblock/lock.hpp"

namespace dblock::detail {

struct AcquireOp;

// What Client::lock validated once: the name and the resolved strategy and driver.
struct LockSpec {
  std::string name;
  LockOptions options;
  Strategy strategy;
  LockDriver* driver;
  Shapes shapes;  // what the strategy offers beyond exclusive
};

class ClientCore {
 public:
  ClientCore(Url url, ClientOptions options, std::unique_ptr<Backend> backend);

  // Throws UsageError when the backend does not offer the strategy.
  LockDriver& driver(Strategy strategy);

  // Waits until `deadline` (forever when unset); nullopt when it passed.
  // Throws UsageError for a shape the strategy does not offer (checked before anything is
  // sent) and for a thread that holds the name in the other mode.
  std::optional<Lease> acquire(const std::shared_ptr<ClientCore>& self, const LockSpec& spec,
                               std::optional<Clock::time_point> deadline, Mode mode);
  // The same acquire, asynchronous: it waits in the name's line as a callback, its attempts
  // run on a WaitEngine worker once at the head, and `done` runs on the event thread. Throws
  // UsageError as acquire does, before anything is queued.
  std::shared_ptr<AcquireOp> start(const std::shared_ptr<ClientCore>& self, std::shared_ptr<const LockSpec> spec,
                                   std::optional<Clock::time_point> deadline, Mode mode, AcquireCallback done);
  // Cancels every asynchronous acquire still under way (the Client is being destroyed).
  void cancel_pending() noexcept;
  // One hold of the grant back; throws LockLostError when the backend shows it was not ours.
  // `told_first`: returns only once an on_lost of the grant has run (Lease::release); an
  // asynchronous release posts its end after it instead, and never waits on the event thread.
  void release(const std::shared_ptr<Grant>& grant, bool told_first = true);
  // The same on a stepper; `done` on the event thread, after any on_lost of the grant.
  void async_release(const std::shared_ptr<Grant>& grant, std::function<void(std::exception_ptr)> done);
  // The backend's list, with the hold counts of this Client's own grants (the core keeps
  // them; a backend that cannot show them, ZooKeeper, lists 1).
  std::vector<LeaseInfo> list();

  const Url url;
  const ClientOptions options;
  const std::string identity;
  const std::unique_ptr<Backend> backend;
  // The service's callbacks run here; destroyed last, after every thread that posts to it,
  // running what they posted before it stops.
  EventThread events;
  Reporter reporter;  // outlives the watchdog, whose thread reports renewals and losses

 private:
  friend struct AcquireOp;
  friend class Attempts;
  void check_shape(const LockSpec& spec, Mode mode) const;
  // Runs `attempts` on this thread, blocking between them: until granted, until their
  // deadline (nullopt), or, for an asynchronous acquire (`op`), until cancelled
  // (CancelledError).
  static std::optional<Lease> wait_through(Attempts& attempts, AcquireOp* op);
  // An asynchronous acquire's attempts, once the op is in the gate: on a worker of its own
  // where the driver waits inside the server (run), else one step at a time on the engine's
  // steppers, armed on the release watch and a timer between two steps (step, woken).
  void run(const std::shared_ptr<AcquireOp>& op);
  void step(const std::shared_ptr<AcquireOp>& op);
  void woken(const std::shared_ptr<AcquireOp>& op, std::uint64_t wait);
  void expire(const std::shared_ptr<AcquireOp>& op);  // on the timer, at the op's deadline
  // Posts the op's result to the event thread, once.
  void end(const std::shared_ptr<AcquireOp>& op, std::exception_ptr error, std::optional<Lease> lease);
  std::shared_ptr<Grant> live_grant(const std::string& name, const std::string& owner);
  std::optional<Lease> reenter(const std::shared_ptr<Grant>& grant, const LockSpec& spec, Clock::time_point called);
  std::shared_ptr<Grant> adopt(const std::shared_ptr<ClientCore>& self, const LockSpec& spec,
                               const std::string& owner, const std::shared_ptr<Gate>& gate, Attempt& attempt,
                               Clock::time_point sent, Mode mode);
  bool release_on_server(Grant& grant);

  std::mutex drivers_mutex_;
  std::map<Strategy, std::unique_ptr<LockDriver>> drivers_;
  std::mutex grants_mutex_;
  // Each owner's grant per name, found again by its re-entries.
  std::map<std::pair<std::string, std::string>, std::weak_ptr<Grant>> grants_;
  GateTable gates_;
  std::mutex ops_mutex_;
  std::map<AcquireOp*, std::weak_ptr<AcquireOp>> ops_;  // the asynchronous acquires under way
  HangupWatch hangups_;  // before the watchdog: grants it still holds unwatch on destruction
  Watchdog watchdog_;  // last: destroyed first, before the drivers it calls
};

// One asynchronous acquire (Lock::async_acquire, PendingAcquire). It is queued in its name's
// gate (ticket), then runs its attempts on a worker (watch, woken), then ends once (ended).
struct AcquireOp : std::enable_shared_from_this<AcquireOp> {
  std::shared_ptr<ClientCore> core;
  std::shared_ptr<const LockSpec> spec;  // the Lock's, kept alive with its state
  std::optional<Clock::time_point> deadline;
  Mode mode = Mode::exclusive;
  std::string owner;  // its own: an asynchronous acquire never re-enters another's hold
  Clock::time_point called;
  AcquireCallback done;

  // Ends the wait wherever it is; false when it had ended, or was cancelled, before.
  bool cancel(const char* why) noexcept;
  void withdraw_if_queued() noexcept;
  // Throws CancelledError once cancelled (the attempts ask before each try and each wait).
  void check_cancelled();
  CancelledError cancelled_error() const;  // call with mutex held, once cancelled
  // The attempts' pause on a worker: on the watch when there is one, interrupted by a cancel.
  void pause(ReleaseWatch* watch, Clock::time_point until);
  // The same pause without a thread (ClientCore::step): the watch, a timer, and a cancel
  // each post ClientCore::woken for this wait; the first one runs the next step.
  void arm(ReleaseWatch* watch, Clock::time_point until);
  void wake(std::uint64_t wait) noexcept;

  std::mutex mutex;
  std::condition_variable woken;  // a pause without a watch
  std::shared_ptr<Gate> gate;     // guarded by mutex, as the rest below
  std::uint64_t ticket = 0;       // its place in the gate's line, while queued there
  bool entered = false;           // its turn in the gate came
  ReleaseWatch* watch = nullptr;  // the watch a pause waits on now
  // The number of the stepped wait under way, 0: none. Written under the mutex; read
  // without it by wake, which only drops the stale wakes early.
  std::atomic<std::uint64_t> armed{0};
  const char* cancelled = nullptr;
  bool ended = false;
  // Stepped: the attempts between two steps, used by one step at a time (the one a wake
  // started, after `armed` moved on).
  std::unique_ptr<Attempts> attempts;
  // A wait inside the server that a worker's attempt makes now (ClientCore::run), which a
  // cancel ends at once. Its own lock, never taken under `mutex`.
  WaitCancel server_wait;
  std::shared_ptr<AcquireOp> keep;  // itself, while a stepped wait is armed (AcquireOp::arm)
};

// The state behind a Lock handle (shared by its copies).
struct LockState {
  std::shared_ptr<ClientCore> core;
  LockSpec spec;
  std::mutex mutex;
  std::unordered_map<std::thread::id, std::vector<Lease>> held;  // Lockable holds per thread
};

}  // namespace dblock::detail
