#include "sql/session_pool.hpp"

namespace dblock::detail::sql {

SessionPool::SessionPool(Factory factory, std::size_t max_sessions, std::chrono::milliseconds checkout_timeout)
    : factory_(std::move(factory)), max_(max_sessions), timeout_(checkout_timeout) {}

SessionPool::Handle SessionPool::get() {
  std::unique_lock lk(mutex_);
  if (!freed_.wait_for(lk, timeout_, [&] { return !idle_.empty() || open_ < max_; }))
    throw TimeoutError("no free database session within " + std::to_string(timeout_.count()) +
                       "ms (pool of " + std::to_string(max_) + ")");
  while (!idle_.empty()) {
    auto s = std::move(idle_.back());
    idle_.pop_back();
    if (s->still_connected()) return Handle(*this, std::move(s));
    --open_;  // closed under us (a server restart): replace it
  }
  ++open_;  // reserve the slot, then connect without holding the mutex
  lk.unlock();
  try {
    return Handle(*this, factory_());
  } catch (...) {
    lk.lock();
    --open_;
    freed_.notify_one();
    throw;
  }
}

void SessionPool::give_back(std::unique_ptr<Session> s) {
  std::lock_guard lk(mutex_);
  if (s->usable()) idle_.push_back(std::move(s));
  else --open_;
  freed_.notify_one();
}

}  // namespace dblock::detail::sql
