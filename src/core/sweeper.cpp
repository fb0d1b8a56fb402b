#include "dblock/sweeper.hpp"

namespace dblock {

Sweeper::Sweeper(std::shared_ptr<Client> client, SweeperOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  if (options_.batch == 0) throw UsageError("bad sweeper options: batch must be at least 1");
  if (options_.every.count() <= 0) throw UsageError("bad sweeper options: every must be positive");
}

Sweeper::~Sweeper() { stop(); }

std::size_t Sweeper::run_once() {
  auto removed = client_->sweep(options_.batch);
  if (options_.on_sweep) options_.on_sweep(removed);
  return removed;
}

void Sweeper::start() {
  std::lock_guard lk(mutex_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void Sweeper::stop() {
  {
    std::lock_guard lk(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sweeper::loop() {
  std::unique_lock lk(mutex_);
  while (!stopping_) {
    lk.unlock();
    try {
      run_once();
    } catch (const Error& e) {
      if (options_.on_error) options_.on_error(e);
    } catch (const std::exception& e) {
      if (options_.on_error) options_.on_error(InternalError(e.what()));
    }
    lk.lock();
    wake_.wait_for(lk, options_.every, [this] { return stopping_; });
  }
}

}  // namespace dblock
