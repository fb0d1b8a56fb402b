// Gates: threads of one process that want the same name queue here, first come first
// served, so the process sends one contender to the backend instead of one per thread.
// The thread that passes the gate may re-enter it (re-entrant holds); the gate opens for
// the next thread when every hold of the current one is given back, from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/driver.hpp"

namespace dblock::detail {

class Gate {
 public:
  bool enter(std::optional<Clock::time_point> deadline);
  void leave();

 private:
  friend class GateTable;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::thread::id owner_;
  int depth_ = 0;
  std::deque<std::uint64_t> queue_;
  std::uint64_t next_ticket_ = 0;
  int refs_ = 0;  // guarded by GateTable::mutex_
};

class GateTable {
 public:
  // Null when the deadline passed before this thread's turn.
  std::shared_ptr<Gate> enter(const std::string& name, std::optional<Clock::time_point> deadline);
  void leave(const std::string& name, const std::shared_ptr<Gate>& gate);
  std::size_t size();  // for tests: gates in use

 private:
  void unref(const std::string& name, const std::shared_ptr<Gate>& gate);
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Gate>> gates_;
};

}  // namespace dblock::detail
