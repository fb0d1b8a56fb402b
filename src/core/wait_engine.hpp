// WaitEngine: the threads that asynchronous acquires (Lock::async_acquire) wait on, shared by
// every Client of the process.
//
// - Steps: an asynchronous acquire waits in its name's Gate as a queued callback, holding no
//   thread. Once at the head of its line, it makes the attempts every acquire makes
//   (Attempts), one step at a time on a fixed pool of steppers: one attempt is one round
//   trip, and between two the acquire holds no thread, armed on its release watch and a timer.
// - Workers: where the driver waits inside the server (LockDriver::waits_in_server: session
//   locks, MySQL's turn keys, ZooKeeper, etcd) the attempts block, so they take a worker
//   thread of their own: one per name waited for there, not one per waiter (each also holds
//   a connection or a session). Idle workers are kept for a while and then end.
//   The steppers also poll the descriptors of armed watches that have no thread of their
//   own to call back from (SQLite's inotify), so a release wakes a stepper directly.
// - Timer: one thread takes a queued acquire out of its line when its wait ends, and wakes a
//   stepped one when its pause is over.
//
// Process-wide and never destroyed: a job may outlive the Client that queued it (it holds the
// Client's core), and a worker must never be the thread that joins itself.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/driver.hpp"

namespace dblock::detail {

class WaitEngine {
 public:
  static WaitEngine& get();
  static constexpr int steppers = 3;  // the threads that run steps (wait_engine.cpp says why three)
  // Runs `job` on a worker: an idle one, or a new one. Never waits behind another job.
  void run(std::function<void()> job);
  // Runs `job` on a stepper, in turn with every other step: it must not block for longer
  // than a round trip to a server.
  void post(std::function<void()> job);
  // Runs `ready` once, on a stepper, when one of `fds` is readable (an armed release watch's
  // descriptors); returns the id that forgets it, 0 when they cannot be polled (`ready` then
  // never runs). `ready` runs under the lock that forget_readable takes, so once that
  // returns it is neither running nor will run; it must be quick, and not arm or forget.
  std::uint64_t when_readable(const std::vector<int>& fds, std::function<void()> ready);
  void forget_readable(std::uint64_t id) noexcept;
  // Called from a job that will return without blocking again (an acquire about to post its
  // end): its worker counts as idle from now, so that the job its end starts (the next turn
  // of the name) waits a moment for it instead of starting one more worker.
  void finishing();
  // Runs `job` on the timer thread at `when` (it must be quick: the timer serves every Client).
  void at(Clock::time_point when, std::function<void()> job);
  // For tests: the workers alive now.
  int workers();

 private:
  WaitEngine() = default;
  struct Workers;
  struct Steppers;
  struct Timer;
  Workers* workers_ = nullptr;
  Steppers* steppers_ = nullptr;
  Timer* timer_ = nullptr;
};

}  // namespace dblock::detail
