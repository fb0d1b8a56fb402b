// WaitCancel: ends, from another thread, a wait a driver makes inside the server (the
// session strategies' lock waits, MySQL's turn keys, ZooKeeper's and etcd's watches). An
// asynchronous acquire cancelled while its attempt blocks there would otherwise keep its
// place, and the waiter behind it, for the rest of the attempt's slice (up to 1 s).
//
// The driver arms it around its blocking call with how to end that call (a cancel request to
// the server on another connection, a notify); cancel() runs that at once, and a wait armed
// after cancel() is not begun (the driver asks cancelled() once armed). A cancel that comes
// after the arming but before the server has the statement is lost: that wait ends at its
// bound, the rare case the slice still covers.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <utility>

namespace dblock::detail {

class WaitCancel {
 public:
  // While alive, a cancel() calls `end` (once); its destruction disarms, waiting out an
  // `end` running now, so that `end` never outlives what it reaches (the connection).
  class Armed {
   public:
    Armed() = default;
    explicit Armed(WaitCancel* c) : c_(c) {}
    Armed(Armed&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
    Armed& operator=(Armed&&) = delete;
    ~Armed() {
      if (!c_) return;
      std::lock_guard lk(c_->mutex_);
      c_->end_ = nullptr;
    }

   private:
    WaitCancel* c_ = nullptr;
  };

  // `c` may be null (a blocking acquire, which nothing cancels), and `end` empty (a wait
  // nothing can end early): nothing is armed.
  [[nodiscard]] static Armed arm(WaitCancel* c, std::function<void()> end) {
    if (!c) return Armed();
    std::lock_guard lk(c->mutex_);
    if (!c->cancelled_ && end) c->end_ = std::move(end);
    return Armed(c);
  }
  // Without the lock, so that a wait may ask it under a lock of its own that `end` takes.
  static bool cancelled(const WaitCancel* c) { return c && c->cancelled_.load(); }

  // From any thread, once: ends the armed wait, if any. `end` must not throw.
  void cancel() noexcept {
    std::lock_guard lk(mutex_);
    if (cancelled_.exchange(true)) return;
    if (end_) std::exchange(end_, nullptr)();
  }

 private:
  std::mutex mutex_;
  std::function<void()> end_;
  std::atomic<bool> cancelled_{false};  // set before `end` runs
};

}  // namespace dblock::detail
