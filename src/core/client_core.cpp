#include "core/client_core.hpp"

#include <algorithm>

#include "core/backoff.hpp"
#include "core/owner.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail {

ClientCore::ClientCore(Url u, ClientOptions o, std::unique_ptr<Backend> b)
    : url(std::move(u)), options(std::move(o)), identity(make_client_identity()), backend(std::move(b)) {}

LockDriver& ClientCore::driver(Strategy strategy) {
  std::lock_guard lk(drivers_mutex_);
  auto& slot = drivers_[strategy];
  if (!slot) slot = backend->make_driver(strategy);
  return *slot;
}

std::optional<Lease> ClientCore::acquire(const std::shared_ptr<ClientCore>& self, const LockSpec& spec,
                                         std::optional<Clock::time_point> deadline) {
  auto gate = gates_.enter(spec.name, deadline);
  if (!gate) return std::nullopt;  // another thread of this process had it until the deadline
  const std::string base = identity + thread_suffix();
  const std::string owner = owner_for(spec.name, base);
  try {
    Backoff backoff;
    std::unique_ptr<ReleaseWatch> watch;  // armed at the first busy answer, then kept
    for (;;) {
      auto sent = Clock::now();
      // Session strategies may wait inside the server; they do so in slices of at most
      // 10 s, so that the loop stays in charge (and no read timeout is reached).
      constexpr milliseconds slice{10'000};
      auto wait = deadline ? std::clamp(std::chrono::ceil<milliseconds>(*deadline - sent), milliseconds{0}, slice)
                           : slice;
      Attempt a = spec.driver->try_acquire({spec.name, owner, spec.options.ttl, wait});
      if (a.acquired) return Lease(adopt(self, spec, owner, gate, a, sent));
      auto now = Clock::now();
      if (deadline && now >= *deadline) break;
      if (!watch && (watch = spec.driver->watch(spec.name))) {
        // Notified of releases (and woken at the holder's expiry anyway): polling is only a
        // safety net against a lost notification, so it starts late instead of at 1 ms.
        backoff = Backoff(milliseconds{100}, milliseconds{1000});
        continue;  // try once more now that a release cannot slip by unseen
      }
      auto until = now + backoff.next(a.remaining);
      if (deadline) until = std::min(until, *deadline);
      if (watch) watch->wait_until(until);
      else std::this_thread::sleep_until(until);
    }
  } catch (...) {
    spec.driver->abandon(spec.name, owner);  // e.g. ZooKeeper deletes the node it queued
    forget_unless_held(spec.name, base, owner);
    gates_.leave(spec.name, gate);
    throw;
  }
  spec.driver->abandon(spec.name, owner);  // the deadline passed: drop any place kept in a queue
  gates_.leave(spec.name, gate);
  return std::nullopt;
}

// Owners and leftovers. A grant the server may still hold although we no longer track it (an
// acquire whose answer was lost, a last release that failed) would otherwise be *re-entered*
// by the next acquire of the same thread: same owner, so the backend counts a second hold and
// hands out the old fence again, and the leftover hold keeps the lock until its TTL (the
// torture run caught this around a PostgreSQL restart). So after such a failure the thread's
// owner string for that name changes (":e<N>"): the leftover is then someone else's lease,
// waited for like any other, and the next grant gets a new fence.
std::string ClientCore::owner_for(const std::string& name, const std::string& base) {
  std::lock_guard lk(grants_mutex_);
  auto it = epochs_.find({name, base});
  return it == epochs_.end() ? base : base + ":e" + std::to_string(it->second);
}

void ClientCore::forget_unless_held(const std::string& name, const std::string& base, const std::string& owner) {
  std::lock_guard lk(grants_mutex_);
  for (auto it = grants_.lower_bound(std::make_tuple(name, owner, std::uint64_t{0}));
       it != grants_.end() && std::get<0>(it->first) == name && std::get<1>(it->first) == owner; ++it)
    if (auto g = it->second.lock(); g && !g->lost()) return;  // a failed re-entry: the owner must stay
  ++epochs_[{name, base}];
}

std::shared_ptr<Grant> ClientCore::adopt(const std::shared_ptr<ClientCore>& self, const LockSpec& spec,
                                         const std::string& owner, const std::shared_ptr<Gate>& gate,
                                         const Attempt& a, Clock::time_point sent) {
  std::unique_lock lk(grants_mutex_);
  auto key = std::make_tuple(spec.name, owner, a.fence);
  if (auto it = grants_.find(key); it != grants_.end())
    if (auto g = it->second.lock(); g && !g->lost()) {  // a re-entrant hold of a live grant
      ++g->holds;
      g->set_deadline(sent + a.remaining);
      return g;
    }
  auto g = std::make_shared<Grant>();
  g->core = self;
  g->driver = spec.driver;
  g->gate = gate;
  g->name = spec.name;
  g->owner = owner;
  g->owner_base = identity + thread_suffix();  // adopt runs on the acquiring thread
  g->fence = a.fence;
  g->ttl = spec.options.ttl;
  g->renew_every = spec.options.renew_every.value_or(spec.options.ttl / 3);
  g->auto_renew = spec.options.auto_renew;
  g->on_lost = spec.options.on_lost;
  g->holds = 1;
  g->set_deadline(sent + a.remaining);
  grants_[key] = g;
  lk.unlock();
  watchdog_.watch(g);
  return g;
}

void ClientCore::release(const std::shared_ptr<Grant>& g) {
  bool last;
  {
    std::lock_guard lk(grants_mutex_);
    last = --g->holds == 0;
    if (last) {
      auto it = grants_.find(std::make_tuple(g->name, g->owner, g->fence));
      if (it != grants_.end() && it->second.lock() == g) grants_.erase(it);
    }
  }
  // Stop renewing before the row goes, so the renewal thread cannot mistake our own
  // release for a loss.
  if (last) watchdog_.unwatch(g.get());
  struct LeaveGate {
    ClientCore* core;
    const std::shared_ptr<Grant>& g;
    ~LeaveGate() { core->gates_.leave(g->name, g->gate); }
  } leave{this, g};
  bool released;
  try {
    released = release_on_server(*g, last);
  } catch (...) {
    if (last) forget_unless_held(g->name, g->owner_base, g->owner);
    throw;
  }
  if (!released) {
    g->mark_lost();
    throw LockLostError("lock '" + g->name + "' (fence " + std::to_string(g->fence) +
                        ") was lost before release: it expired or another owner took it");
  }
}

// A last release that fails on a transient error (the server restarting, a dropped connection)
// is retried for up to the statement timeout, but never past the lease's own expiry: left
// alone, the lock would stay taken until its TTL. Only the last hold is retried, because only
// it is idempotent: a lost reply to a count-down would count down twice. A retry that finds
// the lock no longer ours cannot tell "our first try went through" from "it expired", and
// either way we do not hold it: that is a release, not a loss.
bool ClientCore::release_on_server(const Grant& g, bool last) {
  if (!last) return g.driver->release(g.name, g.owner, g.fence);
  const auto until = std::min(Clock::now() + options.statement_timeout, g.deadline());
  Backoff backoff(milliseconds{50}, milliseconds{1000});
  for (bool retried = false;; retried = true) {
    auto pause = backoff.next(milliseconds{0});
    try {
      return g.driver->release(g.name, g.owner, g.fence) || retried;
    } catch (const UnavailableError&) {
      if (Clock::now() + pause >= until) throw;
    } catch (const TimeoutError&) {
      if (Clock::now() + pause >= until) throw;
    }
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace dblock::detail
