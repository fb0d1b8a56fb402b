#include "bench/scenarios/handoff_tally.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "bench/scenarios/contended.hpp"  // CorrectnessViolation
#include "bench/support/util.hpp"

namespace dblock_bench {

bool HandoffTally::granted(std::uint64_t fence, Clock::time_point got, std::size_t warmup, std::size_t n) {
  if (fence <= last_fence)
    throw CorrectnessViolation(fmt::format("CORRECTNESS VIOLATION in {}: fence {} granted after fence {}: "
                                           "fences must increase",
                                           label, fence, last_fence));
  last_fence = fence;
  bool timed = false;
  if (grants > 0 && ++handoffs > warmup) {
    samples.push_back(std::chrono::duration<double, std::micro>(got - released_at).count());
    timed = true;
    if (samples.size() >= n) stop_locked();
  }
  ++grants;
  cv.notify_all();
  return timed;
}

void HandoffTally::fail(std::exception_ptr e) {
  std::lock_guard lk(m);
  if (!error) error = e;
  stop_locked();
}

void HandoffTally::stop_locked() {
  stop = true;
  cv.notify_all();
  on_stop();
}

void HandoffTally::await(std::vector<std::thread>& threads, std::size_t n) {
  {
    std::unique_lock lk(m);
    std::size_t seen = 0, reported = 0;
    auto progress_at = Clock::now();
    while (!stop) {
      cv.wait_for(lk, std::chrono::seconds(1));
      const auto now = Clock::now();
      if (grants != seen) {
        seen = grants, progress_at = now;
      } else if (now - progress_at > std::chrono::minutes(1)) {
        if (!error)
          error = std::make_exception_ptr(
              std::runtime_error(fmt::format("{}: no hand-off for a minute after {}", label, seen)));
        stop_locked();
        break;
      }
      if (samples.size() >= reported + std::max<std::size_t>(1, n / 4) && samples.size() < n) {
        reported = samples.size();
        fmt::print(stderr, "dblock-bench: {}: {}/{} hand-offs, p50 {:.1f} us\n", label, reported, n,
                   summarize(samples).p50_us);
      }
    }
    stop_locked();
  }
  for (auto& t : threads) t.join();
  threads.clear();
  if (error) std::rethrow_exception(error);
}

}  // namespace dblock_bench
