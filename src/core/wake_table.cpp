#include "core/wake_table.hpp"

#include <algorithm>
#include <utility>

namespace dblock::detail {

class WakeWatch final : public ReleaseWatch {
 public:
  WakeWatch(std::shared_ptr<WakeTable> t, std::string name, std::string owner)
      : t_(std::move(t)), name_(std::move(name)), owner_(std::move(owner)) {
    auto& n = t_->names_[name_];  // the caller holds the mutex
    n.queue.push_back(this);
    seen_generation_ = n.generation;
    seen_epoch_ = t_->epoch;
  }
  ~WakeWatch() override {
    std::lock_guard lk(t_->mutex);
    auto it = t_->names_.find(name_);
    auto& q = it->second.queue;
    bool first = !q.empty() && q.front() == this;
    q.erase(std::find(q.begin(), q.end(), this));
    if (q.empty()) t_->names_.erase(it);
    // The next in line inherits any release we were woken for and did not end up holding
    // (a timeout, an error): it retries once if the generation moved since it last looked.
    else if (first) q.front()->notify_locked();
  }
  void wait_until(Clock::time_point until) override {
    std::unique_lock lk(t_->mutex);
    // A lost connection does not wake us early (that would spin); its reconnect does.
    cv_.wait_until(lk, until, [&] { return ready_locked(); });
    seen_locked();
  }
  void interrupt() noexcept override {
    std::lock_guard lk(t_->mutex);
    interrupted_ = true;
    notify_locked();
  }
  bool arm(std::function<void()> wake) override {
    std::lock_guard lk(t_->mutex);
    wake_ = std::move(wake);
    notify_locked();  // what came since the last look wakes it at once
    return true;
  }
  void disarm() noexcept override {
    std::lock_guard lk(t_->mutex);
    wake_ = nullptr;
  }

 private:
  friend struct WakeTable;
  bool ready_locked() {
    return t_->stop || interrupted_ || t_->epoch != seen_epoch_ || handed_ != seen_handed_ ||
           (t_->names_[name_].generation != seen_generation_ && t_->names_[name_].queue.front() == this);
  }
  void seen_locked() {
    seen_generation_ = t_->names_[name_].generation;
    seen_epoch_ = t_->epoch;
    seen_handed_ = handed_;
  }
  // Something this watch may wait for happened (call with the table's mutex held): the
  // blocked wait_until re-checks, and an armed wake runs if the watch is now due.
  void notify_locked() {
    cv_.notify_one();
    if (wake_ && ready_locked()) {
      seen_locked();
      std::exchange(wake_, nullptr)();
    }
  }
  std::shared_ptr<WakeTable> t_;
  std::string name_, owner_;
  std::condition_variable cv_;
  std::function<void()> wake_;  // armed: run once when due
  std::uint64_t seen_generation_ = 0, seen_epoch_ = 0;
  bool interrupted_ = false;
  std::uint64_t handed_ = 0, seen_handed_ = 0;  // releases that named us next
  std::optional<Handover> handover_;             // the last of them that granted us the name
};

void WakeTable::bump(const std::string& name, const std::string& next) {
  std::lock_guard lk(mutex);
  auto it = names_.find(name);
  if (it == names_.end()) return;
  if (!next.empty()) {  // the queue's next: its waiter alone (in another process: nobody here)
    for (auto* w : it->second.queue)
      if (w->owner_ == next) {
        ++w->handed_;
        w->notify_locked();
      }
    return;
  }
  ++it->second.generation;
  it->second.queue.front()->notify_locked();
}

void WakeTable::hand_over(const std::string& name, const std::string& next, Handover grant) {
  std::lock_guard lk(mutex);
  auto it = names_.find(name);
  if (it == names_.end()) return;
  for (auto* w : it->second.queue)
    if (w->owner_ == next) {
      w->handover_ = grant;
      ++w->handed_;
      w->notify_locked();
    }
}

std::optional<Handover> WakeTable::take_handover(const std::string& name, const std::string& owner) {
  std::lock_guard lk(mutex);
  auto it = names_.find(name);
  if (it == names_.end()) return std::nullopt;
  for (auto* w : it->second.queue)
    if (w->owner_ == owner && w->handover_) return std::exchange(w->handover_, std::nullopt);
  return std::nullopt;
}

void WakeTable::bump_epoch_locked() {
  ++epoch;
  changed.notify_all();
  wake_all_locked();
}

void WakeTable::wake_all_locked() {
  for (auto& [name, n] : names_)
    for (auto* w : n.queue) w->notify_locked();
}

std::unique_ptr<ReleaseWatch> WakeTable::watch_locked(std::shared_ptr<WakeTable> table, std::string name,
                                                      std::string owner) {
  return std::make_unique<WakeWatch>(std::move(table), std::move(name), std::move(owner));
}

}  // namespace dblock::detail
