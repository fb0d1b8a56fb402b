#include "dblock/lock.hpp"

#include "core/client_core.hpp"
#include "dblock/errors.hpp"

namespace dblock {

Lock::Lock(std::shared_ptr<detail::LockState> state) noexcept : state_(std::move(state)) {}

const std::string& Lock::name() const { return state_->spec.name; }

std::optional<Lease> Lock::try_acquire(std::chrono::milliseconds wait) { return try_acquire(wait, Mode::exclusive); }

std::optional<Lease> Lock::try_acquire_shared(std::chrono::milliseconds wait) { return try_acquire(wait, Mode::shared); }

std::optional<Lease> Lock::try_acquire(std::chrono::milliseconds wait, Mode mode) {
  auto deadline = detail::Clock::now() + std::max(wait, std::chrono::milliseconds{0});
  return state_->core->acquire(state_->core, state_->spec, deadline, mode);
}

Lease Lock::acquire() {
  return std::move(*state_->core->acquire(state_->core, state_->spec, std::nullopt, Mode::exclusive));
}

Lease Lock::acquire_shared() {
  return std::move(*state_->core->acquire(state_->core, state_->spec, std::nullopt, Mode::shared));
}

void Lock::lock() {
  Lease lease = acquire();
  std::lock_guard lk(state_->mutex);
  state_->held[std::this_thread::get_id()].push_back(std::move(lease));
}

void Lock::lock_shared() {
  Lease lease = acquire_shared();
  std::lock_guard lk(state_->mutex);
  state_->held[std::this_thread::get_id()].push_back(std::move(lease));
}

bool Lock::try_lock() { return try_lock_wait(std::chrono::milliseconds{0}); }

bool Lock::try_lock_shared() { return try_lock_wait(std::chrono::milliseconds{0}, Mode::shared); }

bool Lock::try_lock_wait(std::chrono::milliseconds wait, Mode mode) {
  auto lease = try_acquire(wait, mode);
  if (!lease) return false;
  std::lock_guard lk(state_->mutex);
  state_->held[std::this_thread::get_id()].push_back(std::move(*lease));
  return true;
}

void Lock::unlock() { unlock(Mode::exclusive); }

void Lock::unlock_shared() { unlock(Mode::shared); }

void Lock::unlock(Mode mode) {
  std::optional<Lease> lease;
  {
    std::lock_guard lk(state_->mutex);
    auto it = state_->held.find(std::this_thread::get_id());
    // A thread holds a lock in one mode at a time (the core refuses the other), so its
    // newest hold tells which unlock it needs.
    if (it == state_->held.end() || it->second.empty() || it->second.back().mode() != mode)
      throw NotOwnerError(std::string(mode == Mode::shared ? "unlock_shared" : "unlock") + " of lock '" +
                          state_->spec.name + "' by a thread that does not hold it " + std::string(to_string(mode)));
    lease.emplace(std::move(it->second.back()));
    it->second.pop_back();
    if (it->second.empty()) state_->held.erase(it);
  }
  try {
    lease->release();
  } catch (...) {
    // unlock() runs in destructors (std::lock_guard): it must not throw. A lost lease was
    // reported through on_lost; a backend error leaves the lease to its TTL.
  }
}

PendingAcquire Lock::async_acquire(AcquireCallback done, std::optional<std::chrono::milliseconds> wait, Mode mode) {
  if (!done) throw UsageError("async_acquire of lock '" + state_->spec.name + "' needs a callback");
  std::optional<detail::Clock::time_point> deadline;
  if (wait) deadline = detail::Clock::now() + std::max(*wait, std::chrono::milliseconds{0});
  // The spec lives in the Lock's state, which the acquire keeps alive while under way.
  std::shared_ptr<const detail::LockSpec> spec(state_, &state_->spec);
  return PendingAcquire(state_->core->start(state_->core, std::move(spec), deadline, mode, std::move(done)));
}

std::future<std::optional<Lease>> Lock::async_acquire(std::optional<std::chrono::milliseconds> wait, Mode mode,
                                                      PendingAcquire* pending) {
  auto promise = std::make_shared<std::promise<std::optional<Lease>>>();
  auto future = promise->get_future();
  auto started = async_acquire(
      [promise](std::exception_ptr error, std::optional<Lease> lease) {
        if (error) promise->set_exception(error);
        else promise->set_value(std::move(lease));
      },
      wait, mode);
  if (pending) *pending = std::move(started);
  return future;
}

bool PendingAcquire::cancel() noexcept { return op_ && op_->cancel("PendingAcquire::cancel"); }

std::uint64_t Lock::fence() const {
  std::lock_guard lk(state_->mutex);
  auto it = state_->held.find(std::this_thread::get_id());
  if (it == state_->held.end() || it->second.empty())
    throw NotOwnerError("lock '" + state_->spec.name + "' is not held by this thread");
  return it->second.back().fence();
}

}  // namespace dblock
