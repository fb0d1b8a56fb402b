#include "core/gate.hpp"

#include <algorithm>

#include "dblock/errors.hpp"

namespace dblock::detail {

bool Gate::enter(std::optional<Clock::time_point> deadline, Mode mode, std::uint32_t capacity) {
  std::unique_lock lk(mutex_);
  auto me = std::this_thread::get_id();
  if (auto it = holders_.find(me); it != holders_.end()) {
    if (mode != mode_)
      throw UsageError(std::string("this thread holds the lock ") + std::string(to_string(mode_)) +
                       ": it cannot also take it " + std::string(to_string(mode)) + " (give it back first)");
    ++it->second;
    return true;
  }
  auto ticket = next_ticket_++;
  queue_.push_back(ticket);
  auto my_turn = [&] {
    if (queue_.front() != ticket) return false;
    if (holders_.empty()) return true;
    if (mode != mode_) return false;
    return mode == Mode::shared || holders_.size() < capacity;
  };
  bool ok = deadline ? cv_.wait_until(lk, *deadline, my_turn) : (cv_.wait(lk, my_turn), true);
  if (!ok) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
    cv_.notify_all();  // the next in line may be free to go now
    return false;
  }
  queue_.pop_front();
  holders_[me] = 1;
  mode_ = mode;
  cv_.notify_all();  // the next in line may join (another reader, another permit)
  return true;
}

void Gate::leave(std::thread::id holder) {
  std::lock_guard lk(mutex_);
  auto it = holders_.find(holder);
  if (it == holders_.end()) return;
  if (--it->second == 0) {
    holders_.erase(it);
    cv_.notify_all();
  }
}

std::shared_ptr<Gate> GateTable::enter(const std::string& name, std::optional<Clock::time_point> deadline, Mode mode,
                                       std::uint32_t capacity) {
  std::shared_ptr<Gate> gate;
  {
    std::lock_guard lk(mutex_);
    auto& slot = gates_[name];
    if (!slot) slot = std::make_shared<Gate>();
    gate = slot;
    ++gate->refs_;
  }
  try {
    if (gate->enter(deadline, mode, capacity)) return gate;
  } catch (...) {
    unref(name, gate);
    throw;
  }
  unref(name, gate);
  return nullptr;
}

void GateTable::leave(const std::string& name, const std::shared_ptr<Gate>& gate, std::thread::id holder) {
  gate->leave(holder);
  unref(name, gate);
}
void GateTable::unref(const std::string& name, const std::shared_ptr<Gate>& gate) {
  std::lock_guard lk(mutex_);
  if (--gate->refs_ == 0) gates_.erase(name);
}

std::size_t GateTable::size() {
  std::lock_guard lk(mutex_);
  return gates_.size();
}

}  // namespace dblock::detail
