#include "dblock/lease.hpp"

#include <algorithm>
#include <utility>

#include "core/client_core.hpp"
#include "dblock/errors.hpp"

namespace dblock {

Lease::Lease(std::shared_ptr<detail::Grant> grant) noexcept : grant_(std::move(grant)), held_(true) {}

Lease::Lease(Lease&& other) noexcept : grant_(std::move(other.grant_)), held_(std::exchange(other.held_, false)) {}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    try {
      release();
    } catch (...) {
    }
    grant_ = std::move(other.grant_);
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

Lease::~Lease() {
  try {
    release();
  } catch (...) {  // destructors never throw; the lease expires by its TTL
  }
}

namespace {
const std::string none;  // what a moved-from Lease names
}  // namespace

const std::string& Lease::name() const { return grant_ ? grant_->name : none; }
const std::string& Lease::owner() const { return grant_ ? grant_->owner : none; }
std::uint64_t Lease::fence() const { return grant_ ? grant_->fence : 0; }
bool Lease::lost() const noexcept { return grant_ && grant_->lost(); }
Mode Lease::mode() const noexcept { return grant_ ? grant_->mode : Mode::exclusive; }
bool Lease::held() const noexcept { return held_; }

std::chrono::milliseconds Lease::remaining() const noexcept {
  if (!grant_ || !held_ || grant_->lost()) return std::chrono::milliseconds{0};
  return std::max(std::chrono::milliseconds{0},
                  std::chrono::duration_cast<std::chrono::milliseconds>(grant_->deadline() - detail::Clock::now()));
}

void Lease::release() {
  if (!held_) return;
  held_ = false;
  grant_->core->release(grant_);
}

void Lease::async_release(std::function<void(std::exception_ptr)> done) {
  if (!done) throw UsageError("async_release of lock '" + name() + "' needs a callback");
  if (!grant_) return done(nullptr);
  auto core = grant_->core;
  if (!std::exchange(held_, false)) {
    core->events.post([done = std::move(done)] { done(nullptr); });
    return;
  }
  core->async_release(grant_, std::move(done));
}

std::future<void> Lease::async_release() {
  auto promise = std::make_shared<std::promise<void>>();
  auto future = promise->get_future();
  async_release([promise](std::exception_ptr error) {
    if (error) promise->set_exception(error);
    else promise->set_value();
  });
  return future;
}

}  // namespace dblock
