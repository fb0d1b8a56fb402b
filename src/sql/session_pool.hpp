// A bounded pool of Sessions per Client. Sessions that saw a connection-level failure are
// dropped and replaced on the next checkout.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "sql/session.hpp"

namespace dblock::detail::sql {

class SessionPool {
 public:
  using Factory = std::function<std::unique_ptr<Session>()>;
  SessionPool(Factory factory, std::size_t max_sessions, std::chrono::milliseconds checkout_timeout);

  class Handle {
   public:
    Handle(SessionPool& pool, std::unique_ptr<Session> s) : pool_(&pool), s_(std::move(s)) {}
    Handle(Handle&& o) noexcept = default;
    Handle& operator=(Handle&&) = delete;
    ~Handle() {
      if (s_) pool_->give_back(std::move(s_));
    }
    Session* operator->() const { return s_.get(); }
    Session& operator*() const { return *s_; }

   private:
    SessionPool* pool_;
    std::unique_ptr<Session> s_;
  };

  // Waits up to the checkout timeout for a free session; throws TimeoutError after it.
  Handle get();

 private:
  void give_back(std::unique_ptr<Session> s);
  Factory factory_;
  std::size_t max_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<Session>> idle_;
  std::size_t open_ = 0;
};

}  // namespace dblock::detail::sql
