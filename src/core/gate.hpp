// Gates: threads of one process that want the same name queue here, first come first
// served, so the process sends one contender to the backend per holder it can have, instead
// of one per thread. Who may be inside together depends on the mode asked for: exclusive
// holders up to `capacity` (1: a mutex; N: a semaphore's permits), or any number of shared
// holders (a read/write lock's readers), never both. Strict FIFO also makes the local side
// writer-preferring: a reader that arrives behind a waiting writer waits behind it.
// A thread inside may re-enter in the same mode (re-entrant holds); the other mode is a
// UsageError (no upgrade or downgrade). A holder's place is given back, from any thread, when
// every hold of its thread is (leave names the thread that entered).
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
  bool enter(std::optional<Clock::time_point> deadline, Mode mode, std::uint32_t capacity);
  void leave(std::thread::id holder);

 private:
  friend class GateTable;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::thread::id, int> holders_;  // each holder thread's depth
  Mode mode_ = Mode::exclusive;             // of the holders, while there are any
  std::deque<std::uint64_t> queue_;
  std::uint64_t next_ticket_ = 0;
  int refs_ = 0;  // guarded by GateTable::mutex_
};

class GateTable {
 public:
  // Null when the deadline passed before this thread's turn.
  std::shared_ptr<Gate> enter(const std::string& name, std::optional<Clock::time_point> deadline,
                              Mode mode = Mode::exclusive, std::uint32_t capacity = 1);
  void leave(const std::string& name, const std::shared_ptr<Gate>& gate,
             std::thread::id holder = std::this_thread::get_id());
  std::size_t size();  // for tests: gates in use

 private:
  void unref(const std::string& name, const std::shared_ptr<Gate>& gate);
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Gate>> gates_;
};

}  // namespace dblock::detail
