// ConnectionPool<Conn>: the one list of idle connections, used for SQL sessions (a Client's shared
// pool, and the session strategies' connections pinned while a lock is held) and for Redis
// connections. Conn needs `bool usable()` (no error left it in an unknown state) and
// `bool still_connected()` (an idle connection the server has not closed meanwhile).
#pragma once

#include <chrono>
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dblock/errors.hpp"

namespace dblock::detail {

template <class Conn>
class ConnectionPool {
 public:
  using Open = std::function<std::unique_ptr<Conn>()>;
  struct Limits {
    std::size_t max_open;  // borrowed + idle; a get() beyond it waits for a give-back
    std::size_t max_idle;  // kept for reuse; the rest are closed when given back
    std::chrono::milliseconds wait;  // how long get() waits for a free slot
    std::string what;                // names the pool in the timeout error
  };

  ConnectionPool(Open open, Limits limits) : open_(std::move(open)), limits_(std::move(limits)) {}
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // A borrowed connection, given back when destroyed (dropped if an error left it unusable).
  class Handle {
   public:
    Handle() = default;  // empty
    Handle(ConnectionPool& pool, std::unique_ptr<Conn> c) : pool_(&pool), c_(std::move(c)) {}
    Handle(Handle&& o) noexcept = default;
    Handle& operator=(Handle&& o) noexcept {
      if (this != &o) {
        give_back();
        pool_ = o.pool_;
        c_ = std::move(o.c_);
      }
      return *this;
    }
    ~Handle() { give_back(); }
    Conn* operator->() const { return c_.get(); }
    Conn& operator*() const { return *c_; }
    explicit operator bool() const noexcept { return c_ != nullptr; }
    // Closes the connection instead of giving it back: what it holds on the server (a
    // session lock, an open transaction) must go with it.
    void discard() noexcept {
      if (!c_) return;
      c_.reset();
      pool_->forget();
    }
    // Takes the connection out of its pool, which stops counting it: another pool adopts it.
    std::unique_ptr<Conn> detach() noexcept {
      if (c_) pool_->forget();
      return std::move(c_);
    }

   private:
    void give_back() noexcept {
      if (c_) pool_->give_back(std::move(c_));
    }
    ConnectionPool* pool_ = nullptr;
    std::unique_ptr<Conn> c_;
  };

  // An idle connection the server still has, or a new one; waits up to Limits::wait while
  // max_open are borrowed, then throws TimeoutError. Connects, and checks an idle connection
  // (which may ask another server, as a Sentinel-managed Redis one does), without the lock.
  // Waiters are served in the order they asked: a thread giving a connection back and asking
  // again at once goes behind them (else, on a loaded machine, it took the connection back
  // before the woken waiter ran, again and again: a lease's renewal waiting behind a loop of
  // acquires timed out until the lease expired).
  Handle get() {
    std::unique_lock lk(mutex_);
    const auto ticket = next_ticket_++;
    line_.push_back(ticket);
    const bool turn = freed_.wait_for(lk, limits_.wait, [&] {
      return line_.front() == ticket && (!idle_.empty() || open_count_ < limits_.max_open);
    });
    line_.erase(std::find(line_.begin(), line_.end(), ticket));
    if (!line_.empty()) freed_.notify_all();  // the next in line may be served too, or is now first
    if (!turn)
      throw TimeoutError(limits_.what + ": no free connection within " + std::to_string(limits_.wait.count()) +
                         " ms (pool of " + std::to_string(limits_.max_open) + ")");
    while (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();  // borrowed from here on: its slot stays counted
      lk.unlock();
      if (c->still_connected()) return Handle(*this, std::move(c));
      c.reset();  // closed under us (a server restart): replace it
      lk.lock();
      --open_count_;
    }
    ++open_count_;  // the slot is ours; connect outside the lock
    lk.unlock();
    try {
      return Handle(*this, open_());
    } catch (...) {
      lk.lock();
      --open_count_;
      freed_.notify_all();
      throw;
    }
  }

  // An idle connection the server still has, taken out of this pool for another to adopt;
  // null when none is idle (or none `may` be taken). Opens nothing.
  std::unique_ptr<Conn> take_idle(const std::function<bool(const Conn&)>& may = nullptr) {
    std::unique_lock lk(mutex_);
    for (;;) {
      auto it = std::find_if(idle_.rbegin(), idle_.rend(), [&](const auto& c) { return !may || may(*c); });
      if (it == idle_.rend()) break;
      auto c = std::move(*it);
      idle_.erase(std::next(it).base());
      --open_count_;
      freed_.notify_all();
      lk.unlock();
      if (c->still_connected()) return c;
      c.reset();  // closed under us: dropped
      lk.lock();
    }
    return nullptr;
  }

  // Connections borrowed and idle now.
  std::size_t open_count() {
    std::lock_guard lk(mutex_);
    return open_count_;
  }

  // A connection another pool let go (Handle::detach), borrowed from this one from now on,
  // even beyond max_open; given back, it stays idle only if there is room.
  Handle adopt(std::unique_ptr<Conn> c) {
    if (!c) return Handle();
    {
      std::lock_guard lk(mutex_);
      ++open_count_;
    }
    return Handle(*this, std::move(c));
  }

 private:
  void forget() noexcept {
    {
      std::lock_guard lk(mutex_);
      --open_count_;
    }
    freed_.notify_all();  // every waiter checks whether it is first in line
  }
  void give_back(std::unique_ptr<Conn> c) noexcept {
    std::unique_ptr<Conn> closing;  // closed outside the lock
    {
      std::lock_guard lk(mutex_);
      if (c->usable() && idle_.size() < limits_.max_idle && open_count_ <= limits_.max_open) {
        idle_.push_back(std::move(c));
      } else {
        closing = std::move(c);
        --open_count_;
      }
    }
    freed_.notify_all();
  }

  const Open open_;
  const Limits limits_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<Conn>> idle_;
  std::size_t open_count_ = 0;  // borrowed + idle
  std::deque<std::uint64_t> line_;  // the tickets of get()s waiting, in the order they came
  std::uint64_t next_ticket_ = 0;
};

}  // namespace dblock::detail
