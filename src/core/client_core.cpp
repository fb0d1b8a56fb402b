#include "core/client_core.hpp"

#include <algorithm>
#include <atomic>
#include <optional>

#include "core/backoff.hpp"
#include "core/owner.hpp"
#include "core/wait_engine.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail {

ClientCore::ClientCore(Url u, ClientOptions o, std::unique_ptr<Backend> b)
    : url(std::move(u)), options(std::move(o)), identity(make_client_identity()), backend(std::move(b)),
      reporter(options.on_event, events) {}

LockDriver& ClientCore::driver(Strategy strategy) {
  std::lock_guard lk(drivers_mutex_);
  auto& slot = drivers_[strategy];
  if (!slot) slot = backend->make_driver(strategy);
  return *slot;
}

void ClientCore::check_shape(const LockSpec& spec, Mode mode) const {
  if (mode != Mode::shared) return;
  if (!spec.shapes.shared)
    throw UsageError("strategy " + std::string(to_string(spec.strategy)) +
                     " does not offer shared (read) locks: lock '" + spec.name + "' can only be held exclusively");
  if (spec.options.permits > 1)
    throw UsageError("lock '" + spec.name + "' is a semaphore (permits " + std::to_string(spec.options.permits) +
                     "): it has no shared holds");
}

std::optional<Lease> ClientCore::acquire(const std::shared_ptr<ClientCore>& self, const LockSpec& spec,
                                         std::optional<Clock::time_point> deadline, Mode mode) {
  const auto called = Clock::now();
  check_shape(spec, mode);
  const std::string owner = identity + thread_suffix();
  auto gate = gates_.enter(spec.name, owner, deadline, mode, spec.options.permits);
  if (!gate) {  // another thread of this process had it until the deadline
    reporter.busy(spec.name, Clock::now() - called);
    return std::nullopt;
  }
  try {
    if (auto held = live_grant(spec.name, owner))
      if (auto lease = reenter(held, spec, called)) return lease;
  } catch (...) {
    gates_.leave(spec.name, gate, owner);
    throw;
  }
  // The caller's thread is a waiting thread already: it runs the attempts itself, the same
  // ones an asynchronous acquire runs on the WaitEngine.
  Attempts attempts(self, spec, owner, gate, deadline, mode, called, milliseconds{10'000});
  return wait_through(attempts, nullptr);
}

std::optional<Lease> ClientCore::wait_through(Attempts& attempts, AcquireOp* op) {
  for (;;) {
    if (op) op->check_cancelled();
    auto s = attempts.step();
    if (s.ended) return std::move(s.lease);
    if (op) op->pause(s.watch, s.until);
    else if (s.watch) s.watch->wait_until(s.until);
    else std::this_thread::sleep_until(s.until);
  }
}

std::shared_ptr<AcquireOp> ClientCore::start(const std::shared_ptr<ClientCore>& self,
                                             std::shared_ptr<const LockSpec> spec,
                                             std::optional<Clock::time_point> deadline, Mode mode,
                                             AcquireCallback done) {
  check_shape(*spec, mode);
  static std::atomic<std::uint64_t> next{1};
  auto op = std::make_shared<AcquireOp>();
  op->core = self;
  op->spec = std::move(spec);
  op->deadline = deadline;
  op->mode = mode;
  op->owner = identity + ":a" + std::to_string(next.fetch_add(1));
  op->called = Clock::now();
  op->done = std::move(done);
  {
    std::lock_guard lk(ops_mutex_);
    ops_[op.get()] = op;
  }
  // Its turn runs on the thread that made room (a release): it only hands the op to the
  // engine. The line keeps the op alive while it is queued there (a PendingAcquire may be
  // dropped).
  auto to_worker = [op] {
    if (op->spec->driver->waits_in_server()) WaitEngine::get().run([op] { op->core->run(op); });
    else WaitEngine::get().post([op] { op->core->step(op); });
  };
  auto turn = [op, to_worker] {
    {
      std::lock_guard lk(op->mutex);
      op->entered = true;
    }
    to_worker();
  };
  std::shared_ptr<Gate> gate = gates_.ref(op->spec->name);
  {
    std::lock_guard lk(op->mutex);
    op->gate = gate;  // before the turn that needs it can run
  }
  std::uint64_t ticket;
  try {
    ticket = gates_.enter_or_queue(op->spec->name, gate, op->owner, mode, op->spec->options.permits, turn);
  } catch (...) {
    std::lock_guard lk(ops_mutex_);
    ops_.erase(op.get());
    throw;
  }
  bool cancelled;
  {
    std::lock_guard lk(op->mutex);
    if (ticket == 0) op->entered = true;
    else if (!op->entered) op->ticket = ticket;
    cancelled = op->cancelled;  // by the Client's destruction, under way as this started
  }
  if (cancelled) op->withdraw_if_queued();
  if (ticket == 0) to_worker();
  else if (deadline) WaitEngine::get().at(*deadline, [weak = std::weak_ptr<AcquireOp>(op)] {
      if (auto o = weak.lock()) o->core->expire(o);
    });
  return op;
}

void ClientCore::run(const std::shared_ptr<AcquireOp>& op) {
  // op->gate was set before its turn could come. A cancel made before this stops the attempts
  // at their first check, which leaves the gate; one made while an attempt waits inside the
  // server ends that wait (op->server_wait), and the attempts stop at their next check.
  std::optional<Lease> lease;
  std::exception_ptr error;
  try {
    Attempts attempts(op->core, *op->spec, op->owner, op->gate, op->deadline, op->mode, op->called,
                      milliseconds{1'000}, &op->server_wait);
    lease = wait_through(attempts, op.get());
  } catch (...) {
    error = std::current_exception();
  }
  // This worker is free once the op ends: the next turn the end starts may take it.
  WaitEngine::get().finishing();
  end(op, error, std::move(lease));
}

void ClientCore::step(const std::shared_ptr<AcquireOp>& op) {
  std::optional<Lease> lease;
  std::exception_ptr error;
  try {
    op->check_cancelled();
    // The wait a lease driver is told of is only how long its place in the queue lasts
    // (AcquireRequest::wait): the 1 s slice, renewed by every step.
    if (!op->attempts)
      op->attempts = std::make_unique<Attempts>(op->core, *op->spec, op->owner, op->gate, op->deadline, op->mode,
                                                op->called, milliseconds{1'000});
    auto s = op->attempts->step();
    if (!s.ended) return op->arm(s.watch, s.until);
    lease = std::move(s.lease);
  } catch (...) {
    error = std::current_exception();
  }
  op->attempts.reset();  // gives up the server's place and the gate, unless granted
  end(op, error, std::move(lease));
}

void ClientCore::woken(const std::shared_ptr<AcquireOp>& op, std::uint64_t wait) {
  std::shared_ptr<AcquireOp> kept;  // the caller holds it now
  {
    std::lock_guard lk(op->mutex);
    if (wait != op->armed.load(std::memory_order_relaxed) || op->ended) return;  // another wake came first
    op->armed.store(0, std::memory_order_relaxed);
    kept = std::move(op->keep);
  }
  step(op);
}

void ClientCore::expire(const std::shared_ptr<AcquireOp>& op) {
  std::uint64_t ticket;
  {
    std::lock_guard lk(op->mutex);
    if (op->entered || op->ended) return;  // its attempts keep their own deadline
    ticket = op->ticket;
  }
  if (!gates_.withdraw(op->spec->name, op->gate, ticket)) return;  // its turn came first
  reporter.busy(op->spec->name, Clock::now() - op->called);
  end(op, nullptr, std::nullopt);
}

void ClientCore::end(const std::shared_ptr<AcquireOp>& op, std::exception_ptr error, std::optional<Lease> lease) {
  std::optional<Lease> raced;  // granted as it was cancelled: given back
  {
    std::lock_guard lk(op->mutex);
    if (op->ended) return;
    op->ended = true;
    // Cancelled: whatever else it came to (an error may be the cancelled wait's own), the
    // caller asked for the cancel and is told of it.
    if (op->cancelled) {
      raced = std::move(lease);
      lease.reset();
      error = std::make_exception_ptr(op->cancelled_error());
    }
  }
  raced.reset();
  {
    std::lock_guard lk(ops_mutex_);
    ops_.erase(op.get());
  }
  // The result goes to the event thread without the op: a Lease keeps the core alive by
  // itself, and a wait that ran out or failed keeps nothing.
  auto result = std::make_shared<std::optional<Lease>>(std::move(lease));
  events.post([done = std::move(op->done), error, result] { done(error, std::move(*result)); });
}

void ClientCore::cancel_pending() noexcept {
  std::vector<std::shared_ptr<AcquireOp>> ops;
  {
    std::lock_guard lk(ops_mutex_);
    for (auto& [_, weak] : ops_)
      if (auto op = weak.lock()) ops.push_back(std::move(op));
  }
  for (auto& op : ops) op->cancel("its Client was destroyed");
}

bool AcquireOp::cancel(const char* why) noexcept {
  {
    std::lock_guard lk(mutex);
    if (ended || cancelled) return false;
    cancelled = why;
    if (watch) watch->interrupt();
    woken.notify_all();
    wake(armed.load(std::memory_order_relaxed));  // a stepped wait: its next step ends it
  }
  server_wait.cancel();  // a round trip, where an attempt waits inside the server now
  withdraw_if_queued();
  return true;
}

void AcquireOp::arm(ReleaseWatch* w, Clock::time_point until) {
  std::uint64_t wait;
  {
    static std::atomic<std::uint64_t> next{1};
    std::lock_guard lk(mutex);
    wait = next.fetch_add(1);
    armed.store(wait, std::memory_order_relaxed);
    if (cancelled) return wake(wait);
    // Nothing else may hold the op now (a PendingAcquire may be dropped): it holds itself
    // until woken, and the watch and the timer, which may outlive it, hold it weakly. So the
    // watch, which calls back under its own lock, is never the one that destroys it (and
    // the watch with it).
    keep = shared_from_this();
  }
  // The watch and the timer (the thread every Client shares) each only post the step. A
  // watch that cannot call back leaves the timer to poll, as a waiter without one does.
  auto post = [weak = weak_from_this(), wait] {
    if (auto op = weak.lock()) op->wake(wait);
  };
  if (w) w->arm(post);
  WaitEngine::get().at(until, post);
}

void AcquireOp::wake(std::uint64_t wait) noexcept {
  // A stale wake (the timer's, after the watch's) is dropped here, not by a step posted for
  // nothing; ClientCore::woken decides under the mutex.
  if (wait == 0 || armed.load(std::memory_order_relaxed) != wait) return;
  try {
    WaitEngine::get().post([op = shared_from_this(), wait] { op->core->woken(op, wait); });
  } catch (...) {  // no memory for the job: the timer's wake-up comes later
  }
}

void AcquireOp::withdraw_if_queued() noexcept {
  std::shared_ptr<Gate> g;
  std::uint64_t queued;
  {
    std::lock_guard lk(mutex);
    g = gate;
    queued = entered ? 0 : ticket;
  }
  // Still in the process's line: out of it now, and ended here. Otherwise its worker ends it
  // (the attempts stop at the check or the pause they are at, giving up the server's place).
  if (queued != 0 && core->gates_.withdraw(spec->name, g, queued)) core->end(shared_from_this(), nullptr, std::nullopt);
}

CancelledError AcquireOp::cancelled_error() const {
  return CancelledError("the acquire of lock '" + spec->name + "' was cancelled (" + cancelled + ")");
}

void AcquireOp::check_cancelled() {
  std::lock_guard lk(mutex);
  if (cancelled) throw cancelled_error();
}

void AcquireOp::pause(ReleaseWatch* w, Clock::time_point until) {
  std::unique_lock lk(mutex);
  if (cancelled) return;
  if (!w) {
    woken.wait_until(lk, until, [&] { return cancelled != nullptr; });
    return;
  }
  watch = w;  // a cancel from now on interrupts it
  lk.unlock();
  w->wait_until(until);
  lk.lock();
  watch = nullptr;  // before the attempts may destroy it
}

std::shared_ptr<Grant> ClientCore::live_grant(const std::string& name, const std::string& owner) {
  std::lock_guard lk(grants_mutex_);
  auto it = grants_.find({name, owner});
  if (it == grants_.end()) return nullptr;
  auto g = it->second.lock();
  return g && !g->lost() ? g : nullptr;
}

// A re-entry tells the server the new count and extends the lease, in one statement that
// also checks the grant is still ours. Not ours any more: the grant is lost (its holders
// are told), and the caller acquires afresh.
std::optional<Lease> ClientCore::reenter(const std::shared_ptr<Grant>& g, const LockSpec& spec,
                                         Clock::time_point called) {
  int holds = 0;
  {
    auto use = g->take();
    if (g->released || g->lost()) return std::nullopt;
    const auto sent = Clock::now();
    auto r = g->handle->renew(spec.options.ttl, g->holds + 1);
    if (r.held) {
      holds = ++g->holds;
      g->set_deadline(sent, r.remaining);
    }
  }
  if (holds > 0) {
    reporter.acquired(spec.name, g->fence, holds, Clock::now() - called);
    return Lease(g);
  }
  g->mark_lost();
  return std::nullopt;
}

std::shared_ptr<Grant> ClientCore::adopt(const std::shared_ptr<ClientCore>& self, const LockSpec& spec,
                                         const std::string& owner, const std::shared_ptr<Gate>& gate, Attempt& a,
                                         Clock::time_point sent, Mode mode) {
  auto g = std::make_shared<Grant>();
  g->core = self;
  g->gate = gate;
  g->name = spec.name;
  g->owner = owner;
  g->fence = a.fence;
  g->mode = mode;
  g->ttl = spec.options.ttl;
  g->renew_every = spec.options.renew_every.value_or(spec.options.ttl / 3);
  g->auto_renew = spec.options.auto_renew;
  g->on_lost = spec.options.on_lost;
  g->hold_at_least = spec.options.hold_at_least;
  g->granted_at = Clock::now();
  g->reporter = &reporter;
  g->handle = std::move(a.grant);
  g->holds = 1;
  g->set_deadline(sent, a.remaining);
  // A session lock's connection closed by the server (its backend killed, a restart) is
  // the lock lost now, not at the next renewal: the watchdog then lets the handle go.
  // Registered before the grant is published, so no other thread uses the handle yet.
  // The callback takes no lock of ours but the grant's leaf mutex in mark_lost: the owner's
  // release and the watchdog cancel it while holding `use`. (on_lost runs on the event thread.)
  if (int fd = g->handle->socket(); fd >= 0)
    g->hangup = hangups_.watch(fd, [weak = std::weak_ptr<Grant>(g)] {
      if (auto lost = weak.lock()) {
        lost->expire_now();
        lost->mark_lost();
      }
    });
  {
    std::lock_guard lk(grants_mutex_);
    grants_[{spec.name, owner}] = g;  // replaces a lost grant of this owner's
  }
  watchdog_.watch(g);
  return g;
}

void ClientCore::async_release(const std::shared_ptr<Grant>& g, std::function<void(std::exception_ptr)> done) {
  // One round trip, as a step is (a release that meets a transient error retries, as a step
  // that meets one waits for its connection).
  WaitEngine::get().post([g, done = std::move(done)]() mutable {
    std::exception_ptr error;
    try {
      g->core->release(g, false);
    } catch (...) {
      error = std::current_exception();
    }
    // Queued behind any on_lost of the grant's, which runs first.
    g->core->events.post([done = std::move(done), error] { done(error); });
  });
}

void ClientCore::release(const std::shared_ptr<Grant>& g, bool told_first) {
  // An on_lost queued for this grant (by the hang-up watch, the watchdog or this release) is
  // waited for last, once the gate is left and `use` let go: then release() never returns
  // while on_lost still runs (a Leadership resigned during a hang-up is destroyed right after
  // its release), and that on_lost may take `use` (unlock, list) or this name's Gate (acquire
  // again) without a deadlock. First the hang-up callback that had started when the release
  // cancelled the watch, which queues it. Declared first, so it runs after LeaveGate.
  struct WaitOnLost {
    const std::shared_ptr<Grant>& g;
    bool told_first;
    bool armed = false;
    ~WaitOnLost() {
      if (armed) g->hangup.wait();  // reads what cancel() wrote under `use` on this thread
      if (told_first) g->wait_told();
    }
  } wait_on_lost{g, told_first};
  struct LeaveGate {
    ClientCore* core;
    const std::shared_ptr<Grant>& g;
    ~LeaveGate() { core->gates_.leave(g->name, g->gate, g->owner); }
  } leave{this, g};
  bool ours = true, last, hung_up = false;
  int holds;
  {
    auto use = g->take();
    holds = --g->holds;
    last = holds == 0;
    // An earlier hold: only the server's copy of the count changes. If this throws, the
    // count here is still one less; the next renewal writes it.
    if (!last) ours = g->handle->renew(milliseconds{0}, g->holds).held;
    // The last: from here on nothing else calls the handle (re-entries and renewals check
    // `released`), so the release below runs without holding `use`.
    g->released = last;
    if (last) {
      // Before the handle closes its connection (release_on_server), so that the socket number
      // cannot be reused while watched for this grant; cancelled, not waited for, under `use`.
      hung_up = g->hangup.cancel();
      wait_on_lost.armed = true;
    }
  }
  if (last) {
    {
      std::lock_guard lk(grants_mutex_);
      auto it = grants_.find({g->name, g->owner});
      if (it != grants_.end() && it->second.lock() == g) grants_.erase(it);
    }
    // Stop renewing before the lock goes, so the renewal thread cannot mistake our own
    // release for a loss.
    watchdog_.unwatch(g.get());
    // A connection the server closed took the lock with it, whatever the handle can tell
    // (a rollback on a closed connection does not fail).
    ours = release_on_server(*g) && !hung_up;
  }
  if (!ours) {
    g->mark_lost();
    throw LockLostError("lock '" + g->name + "' (fence " + std::to_string(g->fence) +
                        ") was lost before release: it expired or another owner took it");
  }
  reporter.released(g->name, g->fence, holds, Clock::now() - g->granted_at);
}

// A last release that fails on a transient error (the server restarting, a dropped connection)
// is retried for up to the statement timeout, but never past the lease's own expiry: left
// alone, the lock would stay taken until its TTL. A retry that finds the lock no longer ours
// cannot tell "our first try went through" from "it expired", and either way we do not hold
// it: that is a release, not a loss. Should every try fail, what the server still holds is
// the owner's leftover: its TTL frees it, or the owner's next acquire takes it over.
// With hold_at_least, a release before that time has passed since the grant keeps the lease
// for the rest of it instead. The rest is measured here from when the acquire's answer came
// back, so later than the server granted it: the lease is kept a little longer than asked,
// never shorter, and its expiry is then the server's clock's business.
bool ClientCore::release_on_server(Grant& g) {
  const auto until = std::min(Clock::now() + options.statement_timeout, g.deadline());
  Backoff backoff(milliseconds{50}, milliseconds{1000});
  for (bool retried = false;; retried = true) {
    auto pause = backoff.next(milliseconds{0});
    try {
      if (g.hold_at_least) {
        auto keep = std::chrono::ceil<milliseconds>(*g.hold_at_least - (Clock::now() - g.granted_at));
        if (keep.count() > 0) return g.handle->release_after(keep) || retried;
      }
      return g.handle->release() || retried;
    } catch (const UnavailableError&) {
      if (Clock::now() + pause >= until) throw;
    } catch (const TimeoutError&) {
      if (Clock::now() + pause >= until) throw;
    }
    std::this_thread::sleep_for(pause);
  }
}

std::vector<LeaseInfo> ClientCore::list() {
  auto leases = backend->list();
  for (auto& l : leases) {
    std::shared_ptr<Grant> g;
    {
      std::lock_guard lk(grants_mutex_);  // not held with `use`: release() takes them the other way round
      if (auto it = grants_.find({l.name, l.owner}); it != grants_.end()) g = it->second.lock();
    }
    if (!g || g->fence != l.fence) continue;
    std::lock_guard use(g->use);
    if (!g->released) l.holds = static_cast<std::uint32_t>(g->holds);
  }
  return leases;
}

}  // namespace dblock::detail
