#include "dblock/leadership.hpp"

namespace dblock {

Leadership::Leadership(std::shared_ptr<Client> client, std::string name, LeadershipOptions options)
    : options_(std::move(options)), lock_(client->lock(std::move(name), watched_lock_options())) {
  thread_ = std::thread([this] { campaign(); });
}

// The lock's on_lost (called on the Client's event thread) only wakes the campaign thread,
// which calls on_revoked: a service stopping its work there never delays the Client's other
// callbacks.
LockOptions Leadership::watched_lock_options() {
  if (options_.lock.hold_at_least)
    throw UsageError("bad leadership options: hold_at_least would keep a resigned leader's lock from its successor");
  if (options_.standby_slice.count() <= 0) throw UsageError("bad leadership options: standby_slice must be positive");
  LockOptions o = options_.lock;
  o.on_lost = [signal = signal_, theirs = o.on_lost](const std::string& name, std::uint64_t fence) {
    if (theirs) theirs(name, fence);
    {
      std::lock_guard lk(signal->mutex);
      signal->lost = true;
    }
    signal->wake.notify_all();
  };
  return o;
}

Leadership::~Leadership() { resign(); }

bool Leadership::leading() const noexcept { return fence_.load() != 0; }
std::uint64_t Leadership::fence() const noexcept { return fence_.load(); }

// From a callback (the campaign thread itself) it only asks: the term ends when the
// callback returns, and the thread after it.
void Leadership::resign() {
  {
    std::lock_guard lk(signal_->mutex);
    signal_->stopping = true;
  }
  signal_->wake.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

// A callback that throws is reported through on_error; an on_elected that throws could not
// start the leader's work, so the term ends at once.
void Leadership::campaign() {
  auto report = [this](const Error& e) {
    if (options_.on_error) options_.on_error(e);
  };
  auto call = [&](const std::function<void(std::uint64_t)>& callback, const char* what, std::uint64_t fence) {
    if (!callback) return true;
    try {
      callback(fence);
      return true;
    } catch (const std::exception& e) {
      report(InternalError(std::string(what) + " threw: " + e.what()));
    } catch (...) {
      report(InternalError(std::string(what) + " threw"));
    }
    return false;
  };
  Signal& s = *signal_;
  std::unique_lock lk(s.mutex);
  while (!s.stopping) {
    s.lost = false;  // before the acquire, so that a loss right after it is not missed
    lk.unlock();
    std::optional<Lease> term;
    bool failed = false;
    try {
      term = lock_.try_acquire(options_.standby_slice);  // busy: the slice was spent waiting
    } catch (const Error& e) {
      report(e);
      failed = true;
    }
    lk.lock();
    if (failed) s.wake.wait_for(lk, options_.standby_slice, [&s] { return s.stopping; });
    if (!term) continue;
    if (s.lost || term->lost()) {
      // Lost before it was announced: a standby whose waiting backend was terminated with the
      // holder's can be granted the lock as the holder's backend exits, and then lose it (its
      // connection closes). Announced, on_elected would run for a lock already gone, maybe
      // after the successor's on_elected (seen under TSan: terms 1, 3, 2). The term never
      // began, so neither callback is called; a loss after this check is an ordinary
      // revocation, and the fence tells the two terms apart.
      lk.unlock();
      try {
        term->release();
      } catch (const LockLostError&) {
      } catch (const Error& e) {
        report(e);
      }
      term.reset();
      lk.lock();
      continue;
    }
    lk.unlock();
    fence_ = term->fence();
    bool elected = call(options_.on_elected, "on_elected", term->fence());
    lk.lock();
    if (elected) s.wake.wait(lk, [&s] { return s.stopping || s.lost; });
    lk.unlock();
    fence_ = 0;
    call(options_.on_revoked, "on_revoked", term->fence());
    try {
      term->release();
    } catch (const LockLostError&) {  // the loss that revoked it
    } catch (const Error& e) {
      report(e);
    }
    lk.lock();
  }
}

}  // namespace dblock
