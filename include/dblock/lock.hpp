/// @file
/// Lock: one named lock. Meets the standard TimedLockable requirements, so std::unique_lock,
/// std::scoped_lock and std::lock_guard work with it, and SharedTimedLockable where its
/// strategy offers shared holds (a read/write lock), so std::shared_lock works too.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "dblock/export.hpp"
#include "dblock/lease.hpp"
#include "dblock/options.hpp"

namespace dblock {

namespace detail {
struct LockState;
struct AcquireOp;
}  // namespace detail

/// How an asynchronous acquire ends (Lock::async_acquire), called once on the Client's event
/// thread (the thread that runs on_lost and on_event): a Lease when held; no Lease and no
/// error when the wait ran out; or an error: CancelledError when cancelled, or what the
/// blocking acquire would have thrown. What it throws is dropped.
using AcquireCallback = std::function<void(std::exception_ptr error, std::optional<Lease> lease)>;

/// An asynchronous acquire under way: cancel() ends it. Dropping this handle does not.
class DBLOCK_EXPORT PendingAcquire {
 public:
  PendingAcquire() = default;  ///< no acquire: cancel() returns false
  /// Ends the wait: a place in the process's line is given up at once, a place in the
  /// server's (a fair ticket, a ZooKeeper node) with one round trip, and the callback gets
  /// CancelledError. A grant that raced the cancel is released. False when the acquire had
  /// already ended (the callback then has, or will have, its result).
  bool cancel() noexcept;

 private:
  friend class Lock;
  explicit PendingAcquire(std::shared_ptr<detail::AcquireOp> op) noexcept : op_(std::move(op)) {}
  std::shared_ptr<detail::AcquireOp> op_;
};

/// A handle on one named lock of one Client (Client::lock), like a std::mutex object: making
/// it takes nothing. It offers two ways to hold the lock, which differ in who owns the hold
/// and in how a lost lock is reported (the table in dblock.hpp):
///
/// - **lock() / unlock()**, the std TimedLockable interface: the hold is kept inside the Lock
///   for the calling thread, which must unlock it itself. unlock() never throws (it runs in
///   std::lock_guard's destructor), so a lock lost while held is reported **only** through
///   LockOptions::on_lost: set it when using this model.
/// - **acquire() / try_acquire()** return a Lease that the caller owns and may move: ask
///   Lease::lost() or Lease::remaining() whenever it matters, and Lease::release() throws
///   LockLostError if the lock was lost; on_lost fires too.
///
/// Both count re-entry per thread, draw a fence with every new grant and renew in the
/// background (LockOptions::auto_renew). A hold taken one way is given back the same way.
class DBLOCK_EXPORT Lock {
 public:
  /// @name Copies share one state
  /// So one Lock can be used from many threads like a std::mutex: each thread's holds are
  /// its own, and threads of one process queue locally (FIFO) instead of each sending a
  /// contender to the backend.
  ///@{
  Lock(const Lock&) = default;                 ///< another handle on the same state
  Lock& operator=(const Lock&) = default;      ///< another handle on the same state
  Lock(Lock&&) noexcept = default;             ///< the state moves
  Lock& operator=(Lock&&) noexcept = default;  ///< the state moves
  ~Lock() = default;                           ///< holds taken with lock() stay until unlock()
  ///@}

  const std::string& name() const;  ///< the lock's name, as given to Client::lock

  /// @name TimedLockable
  /// A thread may lock again while it holds (re-entrant); each lock() needs an unlock().
  /// lock() blocks until held; try_lock() makes one attempt; try_lock_for/try_lock_until
  /// wait up to the given time. unlock() by a thread that holds nothing throws
  /// NotOwnerError; otherwise it never throws (it runs in destructors): a backend error
  /// leaves the lease to its TTL, and a lease lost earlier was already reported through
  /// on_lost, which is this model's only report of a loss (no call here says "lost").
  ///@{
  void lock();      ///< blocks until held; throws on errors
  [[nodiscard]] bool try_lock();  ///< one attempt: true when held
  void unlock();    ///< gives back the calling thread's newest hold
  /// Waits up to `d`: true when held.
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_wait(std::chrono::ceil<std::chrono::milliseconds>(d));
  }
  /// Waits until `t`: true when held.
  template <class C, class D>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<C, D>& t) {
    return try_lock_for(t - C::now());
  }
  ///@}
  /// The fence of the calling thread's newest hold; throws NotOwnerError if it holds none.
  std::uint64_t fence() const;

  /// @name SharedTimedLockable: a read/write lock's readers
  /// Many threads and processes may hold the lock shared at once; an exclusive holder
  /// excludes them all, and once a writer waits, new readers queue behind it. Throws
  /// UsageError, before anything is sent, where the strategy offers no shared holds, for a
  /// semaphore (LockOptions::permits > 1), and for a thread that holds the lock in the other
  /// mode (no upgrade or downgrade). unlock_shared() gives back the calling thread's newest
  /// shared hold (NotOwnerError if it has none); it never throws otherwise.
  ///@{
  void lock_shared();      ///< blocks until held shared; throws on errors
  [[nodiscard]] bool try_lock_shared();  ///< one attempt: true when held shared
  void unlock_shared();    ///< gives back the calling thread's newest shared hold
  /// Waits up to `d`: true when held shared.
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_wait(std::chrono::ceil<std::chrono::milliseconds>(d), Mode::shared);
  }
  /// Waits until `t`: true when held shared.
  template <class C, class D>
  [[nodiscard]] bool try_lock_shared_until(const std::chrono::time_point<C, D>& t) {
    return try_lock_shared_for(t - C::now());
  }
  ///@}

  /// @name Lease interface: the hold as a value
  /// The caller owns the returned Lease and may move it to another thread or object; the
  /// hold ends when the Lease is destroyed or released. A loss shows in Lease::lost() and
  /// makes Lease::release() throw LockLostError, besides LockOptions::on_lost.
  ///@{
  /// Waits up to `wait` (0: one attempt); nullopt when the lock was not had in that time.
  [[nodiscard]] std::optional<Lease> try_acquire(std::chrono::milliseconds wait = std::chrono::milliseconds{0});
  [[nodiscard]] Lease acquire();  ///< blocks until held; throws on errors
  /// The same, shared (a reader): see lock_shared().
  [[nodiscard]] std::optional<Lease> try_acquire_shared(std::chrono::milliseconds wait = std::chrono::milliseconds{0});
  [[nodiscard]] Lease acquire_shared();  ///< blocks until held shared; throws on errors
  ///@}

  /// @name Asynchronous acquire: waiting without a thread
  /// The same acquire as acquire(), try_acquire() and their shared forms (the same line, the
  /// same fairness, fences and loss reports), but the call returns at once and `done` runs
  /// on the Client's event thread when it ends. A wait holds no thread of the caller's, and
  /// the process's waits for one name share one thread of dblock's (docs/ARCHITECTURE.md,
  /// "Threads"). Each asynchronous acquire is an owner of its own: it never re-enters a hold,
  /// not even one taken on the same thread, so two tasks of one event loop exclude each other.
  /// `wait`: how long to wait (0: one attempt); unset: until held. The shape is checked before
  /// anything is sent: a UsageError is thrown by the call, not passed to `done`.
  ///@{
  PendingAcquire async_acquire(AcquireCallback done, std::optional<std::chrono::milliseconds> wait = std::nullopt,
                               Mode mode = Mode::exclusive);
  /// The same, with a future: get() returns the Lease (nullopt when the wait ran out) or
  /// throws the error. `pending`, when given, receives the handle that cancels it.
  [[nodiscard]] std::future<std::optional<Lease>> async_acquire(
      std::optional<std::chrono::milliseconds> wait = std::nullopt, Mode mode = Mode::exclusive,
      PendingAcquire* pending = nullptr);
  ///@}

 private:
  friend class Client;
  explicit Lock(std::shared_ptr<detail::LockState> state) noexcept;
  [[nodiscard]] bool try_lock_wait(std::chrono::milliseconds wait, Mode mode = Mode::exclusive);
  [[nodiscard]] std::optional<Lease> try_acquire(std::chrono::milliseconds wait, Mode mode);
  void unlock(Mode mode);
  std::shared_ptr<detail::LockState> state_;
};

}  // namespace dblock
