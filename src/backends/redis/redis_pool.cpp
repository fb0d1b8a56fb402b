#include "backends/redis/redis_pool.hpp"

#include "dblock/errors.hpp"

namespace dblock::detail::redis {

Pool::Handle Pool::get() {
  std::unique_lock lk(mutex_);
  // Every connection is borrowed: wait for one (bounded, so a stuck command cannot hang us).
  if (!freed_.wait_for(lk, target_.command_timeout + target_.connect_timeout,
                       [&] { return !idle_.empty() || open_ < size_; }))
    throw TimeoutError("redis: no free connection to " + target_.where + " (pool of " + std::to_string(size_) + ")");
  while (!idle_.empty()) {
    auto c = std::move(idle_.back());
    idle_.pop_back();
    if (c->still_open()) return Handle(*this, std::move(c));
    --open_;  // closed by the server while idle (a restart): open a fresh one below
  }
  ++open_;
  lk.unlock();
  try {
    return Handle(*this, std::make_unique<Connection>(target_));
  } catch (...) {
    lk.lock();
    --open_;
    freed_.notify_one();
    throw;
  }
}

void Pool::give_back(std::unique_ptr<Connection> c) noexcept {
  std::lock_guard lk(mutex_);
  if (c && c->usable())
    idle_.push_back(std::move(c));
  else
    --open_;  // a broken connection is dropped; the next get() opens a fresh one
  freed_.notify_one();
}

}  // namespace dblock::detail::redis
