// Lock: one named lock. Meets the standard TimedLockable requirements, so std::unique_lock,
// std::scoped_lock and std::lock_guard work with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dblock/export.hpp"
#include "dblock/lease.hpp"

namespace dblock {

namespace detail {
struct LockState;
}

class DBLOCK_EXPORT Lock {
 public:
  // Copies share one state, so one Lock can be used from many threads like a std::mutex:
  // each thread's holds are its own, and threads of one process queue locally (FIFO)
  // instead of each sending a contender to the backend.
  Lock(const Lock&) = default;
  Lock& operator=(const Lock&) = default;
  Lock(Lock&&) noexcept = default;
  Lock& operator=(Lock&&) noexcept = default;
  ~Lock() = default;

  const std::string& name() const;

  // TimedLockable. A thread may lock again while it holds (re-entrant); each lock() needs
  // an unlock(). unlock() by a thread that holds nothing throws NotOwnerError; otherwise it
  // never throws (it runs in destructors): a backend error leaves the lease to its TTL, and
  // a lease lost earlier was already reported through on_lost.
  void lock();
  bool try_lock();
  void unlock();
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_wait(std::chrono::ceil<std::chrono::milliseconds>(d));
  }
  template <class C, class D>
  bool try_lock_until(const std::chrono::time_point<C, D>& t) {
    return try_lock_for(t - C::now());
  }
  // The fence of the calling thread's newest hold; throws NotOwnerError if it holds none.
  std::uint64_t fence() const;

  // Lease interface: the caller owns the hold and may move it anywhere.
  std::optional<Lease> try_acquire(std::chrono::milliseconds wait = std::chrono::milliseconds{0});
  Lease acquire();  // blocks until held; throws on errors

 private:
  friend class Client;
  explicit Lock(std::shared_ptr<detail::LockState> state) noexcept;
  bool try_lock_wait(std::chrono::milliseconds wait);
  std::shared_ptr<detail::LockState> state_;
};

}  // namespace dblock
