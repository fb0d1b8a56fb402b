// WaitEngine: the threads that asynchronous acquires (Lock::async_acquire) wait on, shared by
// every Client of the process.
//
// - Attempts: an asynchronous acquire waits in its name's Gate as a queued callback, holding
//   no thread. Only once at the head of its line does it run the attempt loop every acquire
//   runs (ClientCore::attempt), which blocks on the backend's release watch, so the loop
//   takes a worker thread: one per name waited for on the server at the moment, not one per
//   waiter. Idle workers are kept for a while and then end.
// - Deadlines: one timer thread takes a queued acquire out of its line when its wait ends.
//
// Process-wide and never destroyed: a job may outlive the Client that queued it (it holds the
// Client's core), and a worker must never be the thread that joins itself.
#pragma once

#include <functional>

#include "core/driver.hpp"

namespace dblock::detail {

class WaitEngine {
 public:
  static WaitEngine& get();
  // Runs `job` on a worker: an idle one, or a new one. Never waits behind another job.
  void run(std::function<void()> job);
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
  struct Timer;
  Workers* workers_ = nullptr;
  Timer* timer_ = nullptr;
};

}  // namespace dblock::detail
