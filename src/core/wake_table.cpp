#include "core/wake_table.hpp"

namespace dblock::detail {

class WakeWatch final : public ReleaseWatch {
 public:
  WakeWatch(std::shared_ptr<WakeTable> t, std::string name) : t_(std::move(t)), name_(std::move(name)) {
    auto& n = t_->names_[name_];  // the caller holds the mutex
    ++n.watchers;
    seen_generation_ = n.generation;
    seen_epoch_ = t_->epoch;
  }
  ~WakeWatch() override {
    std::lock_guard lk(t_->mutex);
    auto it = t_->names_.find(name_);
    if (--it->second.watchers == 0) t_->names_.erase(it);
  }
  void wait_until(Clock::time_point until) override {
    std::unique_lock lk(t_->mutex);
    auto& n = t_->names_[name_];
    // A lost connection does not wake us early (that would spin); its reconnect does.
    t_->changed.wait_until(lk, until,
                           [&] { return t_->stop || n.generation != seen_generation_ || t_->epoch != seen_epoch_; });
    seen_generation_ = n.generation;
    seen_epoch_ = t_->epoch;
  }

 private:
  std::shared_ptr<WakeTable> t_;
  std::string name_;
  std::uint64_t seen_generation_ = 0, seen_epoch_ = 0;
};

void WakeTable::bump(const std::string& name) {
  std::lock_guard lk(mutex);
  auto it = names_.find(name);
  if (it == names_.end()) return;
  ++it->second.generation;
  changed.notify_all();
}

std::unique_ptr<ReleaseWatch> WakeTable::watch_locked(std::shared_ptr<WakeTable> table, std::string name) {
  return std::make_unique<WakeWatch>(std::move(table), std::move(name));
}

}  // namespace dblock::detail
