#include "core/attempts.hpp"

#include <algorithm>
#include <utility>

#include "core/client_core.hpp"

namespace dblock::detail {

Attempts::Attempts(std::shared_ptr<ClientCore> core, const LockSpec& spec, std::string owner,
                   std::shared_ptr<Gate> gate, std::optional<Clock::time_point> deadline, Mode mode,
                   Clock::time_point called, milliseconds slice, WaitCancel* cancel)
    : core_(std::move(core)), spec_(spec), owner_(std::move(owner)), gate_(std::move(gate)), deadline_(deadline),
      mode_(mode), called_(called), slice_(slice), cancel_(cancel) {}

Attempts::~Attempts() { give_up(); }

void Attempts::give_up() noexcept {
  place_.reset();
  watch_.reset();
  if (gate_) core_->gates_.leave(spec_.name, std::exchange(gate_, nullptr), owner_);
}

bool Attempts::may_wait() const { return !deadline_ || Clock::now() < *deadline_; }

// A server with no connection slot free (ServerFullError) is asked again later, within the
// caller's wait, as a busy lock would be: a slot frees when another client leaves. A watch it
// cannot open now is left to the next miss.
std::unique_ptr<ReleaseWatch> Attempts::open_watch(bool early) {
  try {
    return early ? spec_.driver->early_watch(spec_.name, owner_) : spec_.driver->watch(spec_.name, owner_);
  } catch (const ServerFullError&) {
    if (!may_wait()) throw;
    return nullptr;
  }
}

Attempts::Step Attempts::step() {
  try {
    return attempt();
  } catch (...) {
    give_up();
    throw;
  }
}

Attempts::Step Attempts::attempt() {
  // A fresh grant: this owner holds none that is live, so anything the server still shows
  // for it is a leftover the driver takes over with a new fence (LockDriver::try_acquire).
  if (!started_) {
    started_ = true;
    if (may_wait()) watch_ = open_watch(true);
    if (watch_) backoff_ = Backoff(milliseconds{100}, milliseconds{1000});
  }
  for (;;) {
    auto sent = Clock::now();
    // Session strategies may wait inside the server; they do so in slices, so that the
    // runner stays in charge (and no read timeout is reached).
    auto wait = deadline_ ? std::clamp(std::chrono::ceil<milliseconds>(*deadline_ - sent), milliseconds{0}, slice_)
                          : slice_;
    AcquireRequest request{spec_.name, owner_, spec_.options.ttl, wait, std::move(place_), spec_.options.auto_renew};
    request.mode = mode_;
    request.permits = spec_.options.permits;
    request.fair = spec_.options.fair;
    request.cancel = cancel_;
    Attempt a;
    try {
      a = spec_.driver->try_acquire(request);
      full_.reset();
    } catch (const ServerFullError& e) {
      if (!may_wait()) throw;
      a = Attempt::busy(milliseconds{0});  // nothing known of a holder
      a.place = std::move(request.place);  // still waiting: its place in the line is kept
      // Each retry is a connection attempt (a process forked, on PostgreSQL): at most a
      // few per second from each waiter, however many wait.
      if (!full_ && !watch_) backoff_ = Backoff(milliseconds{100}, milliseconds{1000});
      full_ = e;
    }
    if (a.acquired()) {
      auto g = core_->adopt(core_, spec_, owner_, gate_, a, sent, mode_);
      gate_ = nullptr;  // the grant's now: it leaves the gate at its release
      core_->reporter.acquired(spec_.name, g->fence, 1, g->granted_at - called_);
      place_.reset();
      watch_.reset();
      return {true, Lease(std::move(g)), nullptr, {}};
    }
    place_ = std::move(a.place);
    auto now = Clock::now();
    if (deadline_ && now >= *deadline_) {
      if (full_) throw *full_;  // the wait ended with the server still full: not a busy lock
      give_up();
      core_->reporter.busy(spec_.name, Clock::now() - called_);
      return {true, std::nullopt, nullptr, {}};
    }
    if (!watch_ && (watch_ = open_watch(false))) {
      // Notified of releases (and woken at the holder's expiry anyway): polling is only a
      // safety net against a lost notification, so it starts late instead of at 1 ms (as
      // with an early watch, above).
      backoff_ = Backoff(milliseconds{100}, milliseconds{1000});
      continue;  // try once more now that a release cannot slip by unseen
    }
    auto until = now + backoff_.next(a.remaining);
    if (deadline_) until = std::min(until, *deadline_);
    return {false, std::nullopt, watch_.get(), until};
  }
}

}  // namespace dblock::detail
