/// @file
/// Lease: the move-only proof that one acquire succeeded.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "dblock/export.hpp"
#include "dblock/options.hpp"

namespace dblock {

namespace detail {
struct Grant;
class ClientCore;
class Attempts;
}  // namespace detail

/// One hold of a lock, as a value (Lock::acquire, Lock::try_acquire): released when
/// destroyed (or by release()). This is the model that lets the holder ask whether it still
/// holds: check lost() (or remaining()) before each step that needs the lock, and hand
/// fence() to the resource so that it can refuse a holder that paused past its lease. A
/// loss is reported three ways: lost() turns true, LockOptions::on_lost fires once, and
/// release() throws LockLostError.
class DBLOCK_EXPORT Lease {
 public:
  /// @name Move-only: the hold moves with the object (an assigned-to Lease releases first).
  ///@{
  Lease(Lease&& other) noexcept;             ///< takes the hold; `other` holds nothing after
  Lease& operator=(Lease&& other) noexcept;  ///< releases this hold, then takes `other`'s
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ///@}
  /// Releases the hold if still held. Never throws: a failure is left to the lease's TTL.
  ~Lease();

  /// The lock's name. A moved-from Lease names nothing: "" and fence 0.
  const std::string& name() const;
  /// Who holds it: host:pid:instance:thread (what `dblock list` shows).
  const std::string& owner() const;
  /// The fencing token: strictly greater than that of every earlier grant of this name.
  /// Re-entrant acquires by the same owner share the fence of the grant they re-enter.
  std::uint64_t fence() const;
  /// Exclusive, or shared (a read/write lock's reader).
  Mode mode() const noexcept;
  /// True once the lease is known lost (it expired before renewal, or another owner holds
  /// it). Needs no round trip: it turns true at the latest at the lease's local deadline
  /// (remaining() reaching zero), which comes before the server frees the lock.
  bool lost() const noexcept;
  /// True until release() (or a move from this object).
  bool held() const noexcept;
  /// Time left before the lease may expire, measured conservatively on this host's
  /// monotonic clock from when the last acquire or renewal was sent; zero once lost.
  std::chrono::milliseconds remaining() const noexcept;

  /// Gives back this hold (the lock is free when the owner's last hold is released).
  /// Idempotent. Throws LockLostError when the backend shows the lease was no longer ours,
  /// so the caller learns its critical section was not protected throughout.
  void release();
  /// The same release without blocking the caller (an event loop's thread): it runs on
  /// dblock's wait steppers, and `done` runs once on the Client's event thread, after any
  /// on_lost of this lease, with nullptr or what release() would have thrown (LockLostError).
  /// This Lease holds nothing from the call on; one that held nothing completes with nullptr
  /// (on the calling thread, when it names no lock).
  void async_release(std::function<void(std::exception_ptr)> done);
  /// The same, as a future.
  [[nodiscard]] std::future<void> async_release();

 private:
  friend class detail::ClientCore;
  friend class detail::Attempts;
  explicit Lease(std::shared_ptr<detail::Grant> grant) noexcept;
  std::shared_ptr<detail::Grant> grant_;  ///< shared by the re-entrant holds of one grant
  bool held_ = false;
};

}  // namespace dblock
