// What every hand-off measurement of the bench shares (dblock's own in support/run.cpp, the bare
// floors, etcd's bare recipe): the grants counted under one mutex, the check that fences
// increase, the samples from a release to the next grant, and the wait for them, which
// fails a run that stopped moving instead of hanging the bench.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dblock_bench {

struct HandoffTally {
  using Clock = std::chrono::steady_clock;

  explicit HandoffTally(std::string label) : label(std::move(label)) {}
  virtual ~HandoffTally() = default;
  HandoffTally(const HandoffTally&) = delete;
  HandoffTally& operator=(const HandoffTally&) = delete;

  const std::string label;     // "postgresql/bare-notify-handoff": progress lines and errors
  std::mutex m;                // guards everything below
  std::condition_variable cv;  // a grant, or the stop
  bool stop = false;
  std::exception_ptr error;  // the first failure
  std::size_t grants = 0;    // grants so far, untimed ones included
  std::size_t handoffs = 0;  // grants that followed a release (all but the first)
  std::uint64_t last_fence = 0;
  Clock::time_point released_at;  // the holder's stamp, taken just before it released
  std::vector<double> samples;    // microseconds from a release to the next grant

  // Under m: a grant of `fence`, known to its holder at `got`. Throws CorrectnessViolation
  // when the fence is not above the last one. Times the hand-off once `warmup` hand-offs
  // went by, stops the run at n samples, wakes the threads waiting on cv, and answers
  // whether the hand-off was timed.
  bool granted(std::uint64_t fence, Clock::time_point got, std::size_t warmup, std::size_t n);
  // Takes m: keeps the first error and stops the run.
  void fail(std::exception_ptr e);
  // Under m: stops the run and wakes every thread that waits for it.
  void stop_locked();
  // Waits until the run stops, with a progress line on stderr every quarter of n samples;
  // stops it with an error when no grant came for a minute. Then joins `threads` and
  // rethrows the first error.
  void await(std::vector<std::thread>& threads, std::size_t n);

 protected:
  // Under m, at the stop: wake what else the threads wait on (their own condition variables).
  virtual void on_stop() {}
};

}  // namespace dblock_bench
