#include "core/backoff.hpp"

#include <algorithm>

namespace dblock::detail {

namespace {
// Seeded once per thread: std::random_device costs tens of microseconds per construction,
// which an uncontended acquire must not pay.
std::minstd_rand& rng() {
  thread_local std::minstd_rand engine(std::random_device{}());
  return engine;
}
}  // namespace

Backoff::Backoff(ms first, ms cap) : first_(first), cap_(std::max(cap, first)), step_(first) {}

std::chrono::microseconds Backoff::next(ms holder_remaining) {
  using us = std::chrono::microseconds;
  // "Equal jitter": half the step fixed, half random, so contenders spread out but none
  // sleeps much less than the step.
  auto half = step_.count() / 2;
  std::uniform_int_distribution<long long> jitter(0, std::max<long long>(half, 0));
  us pause{half + jitter(rng())};
  step_ = std::min(cap_, step_ * 2);
  if (holder_remaining.count() > 0) pause = std::min<us>(pause, holder_remaining + us{500});
  return std::max(pause, us{100});
}

}  // namespace dblock::detail
