#include "core/gate.hpp"

#include <algorithm>

namespace dblock::detail {

bool Gate::enter(std::optional<Clock::time_point> deadline) {
  std::unique_lock lk(mutex_);
  auto me = std::this_thread::get_id();
  if (depth_ > 0 && owner_ == me) {
    ++depth_;
    return true;
  }
  auto ticket = next_ticket_++;
  queue_.push_back(ticket);
  auto my_turn = [&] { return depth_ == 0 && queue_.front() == ticket; };
  bool ok = deadline ? cv_.wait_until(lk, *deadline, my_turn) : (cv_.wait(lk, my_turn), true);
  if (!ok) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
    cv_.notify_all();  // the next in line may be free to go now
    return false;
  }
  queue_.pop_front();
  owner_ = me;
  depth_ = 1;
  return true;
}

void Gate::leave() {
  std::lock_guard lk(mutex_);
  if (depth_ > 0 && --depth_ == 0) {
    owner_ = {};
    cv_.notify_all();
  }
}

std::shared_ptr<Gate> GateTable::enter(const std::string& name, std::optional<Clock::time_point> deadline) {
  std::shared_ptr<Gate> gate;
  {
    std::lock_guard lk(mutex_);
    auto& slot = gates_[name];
    if (!slot) slot = std::make_shared<Gate>();
    gate = slot;
    ++gate->refs_;
  }
  if (gate->enter(deadline)) return gate;
  unref(name, gate);
  return nullptr;
}

void GateTable::leave(const std::string& name, const std::shared_ptr<Gate>& gate) {
  gate->leave();
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
