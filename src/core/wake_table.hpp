// Per-name wake-ups shared by a notification thread (PostgreSQL LISTEN, Redis SUBSCRIBE) and
// the waiters of one client. A generation per watched name counts the releases seen; a
// waiter sleeps until its name's generation moves. The epoch moves whenever the thread may
// have missed releases (a reconnect, a subscription lost or gained): that wakes everyone.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "core/driver.hpp"

namespace dblock::detail {

struct WakeTable {
  std::mutex mutex;
  std::condition_variable changed;
  std::uint64_t epoch = 0;
  bool stop = false;

  // A release of `name` was announced: wake its waiters (a name nobody waits for is ignored).
  void bump(const std::string& name);
  // Every waiter retries (call with `mutex` held).
  void bump_epoch_locked() {
    ++epoch;
    changed.notify_all();
  }
  // A watch on `name` (call with `mutex` held); it keeps the table alive.
  static std::unique_ptr<ReleaseWatch> watch_locked(std::shared_ptr<WakeTable> table, std::string name);

 private:
  friend class WakeWatch;
  struct Name {
    std::uint64_t generation = 0;
    int watchers = 0;
  };
  std::map<std::string, Name> names_;  // only names someone waits for
};

}  // namespace dblock::detail
