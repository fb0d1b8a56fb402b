// Gates: the acquires of one process that want the same name queue here, first come first
// served, so the process sends one contender to the backend per holder it can have, instead
// of one per waiter. Who may be inside together depends on the mode asked for: exclusive
// holders up to `capacity` (1: a mutex; N: a semaphore's permits), or any number of shared
// holders (a read/write lock's readers), never both. Strict FIFO also makes the local side
// writer-preferring: a reader that arrives behind a waiting writer waits behind it.
// Holders are owners (a thread's, for the blocking calls; an asynchronous acquire's own). An
// owner inside may re-enter in the same mode (re-entrant holds); the other mode is a
// UsageError (no upgrade or downgrade). Its place is given back, from any thread, when every
// hold of the owner is.
// A blocking acquire waits in line on its own thread; an asynchronous one leaves a callback in
// the line instead, which the thread that makes room for it runs: the line is the same.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/driver.hpp"

namespace dblock::detail {

class Gate {
 public:
  using Turn = std::function<void()>;  // must be quick and not throw: it runs in a release

  // Waits in line until `deadline` (forever when unset): false when it passed first.
  bool enter(const std::string& owner, std::optional<Clock::time_point> deadline, Mode mode,
             std::uint32_t capacity);
  // Does not wait: 0 when `owner` entered now; otherwise the ticket of its place in the line,
  // and `turn` runs once it has entered, on the thread that made room for it.
  std::uint64_t enter_or_queue(const std::string& owner, Mode mode, std::uint32_t capacity, Turn turn);
  // Takes a queued place out of the line: false when its turn came first.
  bool withdraw(std::uint64_t ticket);
  void leave(const std::string& owner);

 private:
  friend class GateTable;
  struct Place {
    std::uint64_t ticket;
    Mode mode;
    std::uint32_t capacity;
    std::string owner;
    Turn turn;  // empty: a blocking enter, waiting on cv_
  };
  bool room_for(const Place& p) const;  // call with mutex_ held
  bool reenter_locked(const std::string& owner, Mode mode);
  // Lets in the queued callbacks whose turn it is, and wakes the blocking waiters; the turns
  // returned run once the mutex is let go.
  std::vector<Turn> admit_locked();
  static void run(std::vector<Turn> turns) noexcept;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, int> holders_;  // each holder owner's depth
  Mode mode_ = Mode::exclusive;         // of the holders, while there are any
  std::deque<Place> queue_;
  std::uint64_t next_ticket_ = 1;
  int refs_ = 0;  // guarded by GateTable::mutex_
};

class GateTable {
 public:
  // Null when the deadline passed before this owner's turn.
  std::shared_ptr<Gate> enter(const std::string& name, const std::string& owner,
                              std::optional<Clock::time_point> deadline, Mode mode = Mode::exclusive,
                              std::uint32_t capacity = 1);
  // For enter_or_queue: the name's gate, taken before the turn that may need it can run.
  std::shared_ptr<Gate> ref(const std::string& name);
  // Gate::enter_or_queue on `gate` (from ref), which the caller then leaves or withdraws from;
  // what it throws gives the reference back.
  std::uint64_t enter_or_queue(const std::string& name, const std::shared_ptr<Gate>& gate, const std::string& owner,
                               Mode mode, std::uint32_t capacity, Gate::Turn turn);
  bool withdraw(const std::string& name, const std::shared_ptr<Gate>& gate, std::uint64_t ticket);
  void leave(const std::string& name, const std::shared_ptr<Gate>& gate, const std::string& owner);
  std::size_t size();  // for tests: gates in use

 private:
  void unref(const std::string& name, const std::shared_ptr<Gate>& gate);
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Gate>> gates_;
};

}  // namespace dblock::detail
