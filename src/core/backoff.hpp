// Adaptive backoff for backends without a release notification: exponential with jitter,
// never sleeping past the holder's expiry (a waiter should be there when it frees).
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace dblock::detail {

class Backoff {
 public:
  using ms = std::chrono::milliseconds;
  explicit Backoff(ms first = ms{1}, ms cap = ms{100});
  // The next pause. holder_remaining > 0 caps it (the lock may free then); zero means unknown.
  std::chrono::microseconds next(ms holder_remaining);
  void reset() noexcept { step_ = first_; }

 private:
  std::chrono::microseconds first_, cap_, step_;
};

}  // namespace dblock::detail
