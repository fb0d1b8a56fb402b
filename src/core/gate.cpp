#include "core/gate.hpp"

#include <algorithm>

#include "dblock/errors.hpp"

namespace dblock::detail {

bool Gate::room_for(const Place& p) const {
  if (holders_.empty()) return true;
  if (p.mode != mode_) return false;
  return p.mode == Mode::shared || holders_.size() < p.capacity;
}

bool Gate::reenter_locked(const std::string& owner, Mode mode) {
  auto it = holders_.find(owner);
  if (it == holders_.end()) return false;
  if (mode != mode_)
    throw UsageError(std::string("this thread holds the lock ") + std::string(to_string(mode_)) +
                     ": it cannot also take it " + std::string(to_string(mode)) + " (give it back first)");
  ++it->second;
  return true;
}

std::vector<Gate::Turn> Gate::admit_locked() {
  std::vector<Turn> turns;
  while (!queue_.empty() && queue_.front().turn && room_for(queue_.front())) {
    auto& p = queue_.front();
    holders_[p.owner] = 1;
    mode_ = p.mode;
    turns.push_back(std::move(p.turn));
    queue_.pop_front();
  }
  cv_.notify_all();  // a blocking waiter may be first now, or may join (a reader, a permit)
  return turns;
}

void Gate::run(std::vector<Turn> turns) noexcept {
  for (auto& t : turns) t();
}

bool Gate::enter(const std::string& owner, std::optional<Clock::time_point> deadline, Mode mode,
                 std::uint32_t capacity) {
  std::unique_lock lk(mutex_);
  if (reenter_locked(owner, mode)) return true;
  const auto ticket = next_ticket_++;
  queue_.push_back(Place{ticket, mode, capacity, owner, {}});
  auto my_turn = [&] { return queue_.front().ticket == ticket && room_for(queue_.front()); };
  bool ok = deadline ? cv_.wait_until(lk, *deadline, my_turn) : (cv_.wait(lk, my_turn), true);
  if (ok) {
    queue_.pop_front();
    holders_[owner] = 1;
    mode_ = mode;
  } else {
    queue_.erase(std::find_if(queue_.begin(), queue_.end(), [&](const Place& p) { return p.ticket == ticket; }));
  }
  auto turns = admit_locked();  // the next in line may be free to go now
  lk.unlock();
  run(std::move(turns));
  return ok;
}

std::uint64_t Gate::enter_or_queue(const std::string& owner, Mode mode, std::uint32_t capacity, Turn turn) {
  std::lock_guard lk(mutex_);
  if (reenter_locked(owner, mode)) return 0;
  Place p{next_ticket_++, mode, capacity, owner, std::move(turn)};
  if (queue_.empty() && room_for(p)) {
    holders_[owner] = 1;
    mode_ = mode;
    return 0;
  }
  queue_.push_back(std::move(p));
  return queue_.back().ticket;
}

bool Gate::withdraw(std::uint64_t ticket) {
  std::unique_lock lk(mutex_);
  auto it = std::find_if(queue_.begin(), queue_.end(), [&](const Place& p) { return p.ticket == ticket; });
  if (it == queue_.end()) return false;
  queue_.erase(it);
  auto turns = admit_locked();
  lk.unlock();
  run(std::move(turns));
  return true;
}

void Gate::leave(const std::string& owner) {
  std::unique_lock lk(mutex_);
  auto it = holders_.find(owner);
  if (it == holders_.end() || --it->second > 0) return;
  holders_.erase(it);
  auto turns = admit_locked();
  lk.unlock();
  run(std::move(turns));
}

std::shared_ptr<Gate> GateTable::ref(const std::string& name) {
  std::lock_guard lk(mutex_);
  auto& slot = gates_[name];
  if (!slot) slot = std::make_shared<Gate>();
  ++slot->refs_;
  return slot;
}

void GateTable::unref(const std::string& name, const std::shared_ptr<Gate>& gate) {
  std::lock_guard lk(mutex_);
  if (--gate->refs_ == 0) gates_.erase(name);
}

std::shared_ptr<Gate> GateTable::enter(const std::string& name, const std::string& owner,
                                       std::optional<Clock::time_point> deadline, Mode mode, std::uint32_t capacity) {
  auto gate = ref(name);
  try {
    if (gate->enter(owner, deadline, mode, capacity)) return gate;
  } catch (...) {
    unref(name, gate);
    throw;
  }
  unref(name, gate);
  return nullptr;
}

std::uint64_t GateTable::enter_or_queue(const std::string& name, const std::shared_ptr<Gate>& gate,
                                       const std::string& owner, Mode mode, std::uint32_t capacity, Gate::Turn turn) {
  try {
    return gate->enter_or_queue(owner, mode, capacity, std::move(turn));
  } catch (...) {
    unref(name, gate);
    throw;
  }
}

bool GateTable::withdraw(const std::string& name, const std::shared_ptr<Gate>& gate, std::uint64_t ticket) {
  if (!gate->withdraw(ticket)) return false;
  unref(name, gate);
  return true;
}

void GateTable::leave(const std::string& name, const std::shared_ptr<Gate>& gate, const std::string& owner) {
  gate->leave(owner);
  unref(name, gate);
}

std::size_t GateTable::size() {
  std::lock_guard lk(mutex_);
  return gates_.size();
}

}  // namespace dblock::detail
