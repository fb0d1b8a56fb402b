#include "bench_awake.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sys/syscall.h>

namespace dblock_bench {

KeepAwake::KeepAwake(bool on) {
  if (!on) return;
  std::atomic<int> policy_set{-1};
  spinner_ = std::thread([this, &policy_set] {
    // SCHED_IDLE: it runs only where nothing else wants the vCPU, so it takes no time from
    // the clients, workers and servers it keeps company; where refused, nice 19 comes close.
    sched_param none{};
    const bool idle = pthread_setschedparam(pthread_self(), SCHED_IDLE, &none) == 0;
    if (!idle) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
    policy_set = idle ? 1 : 0;
    while (!stop_.load(std::memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  });
  while (policy_set.load() < 0) std::this_thread::yield();
  idle_policy_ = policy_set.load() == 1;
}

KeepAwake::~KeepAwake() {
  stop_ = true;
  if (spinner_.joinable()) spinner_.join();
}

std::string KeepAwake::note() const {
  if (!spinner_.joinable())
    return "vCPUs: not kept awake (an idle vCPU sleeps between replies; --keep-awake keeps one busy)";
  return std::string("vCPUs: one kept awake by a thread spinning at ") +
         (idle_policy_ ? "SCHED_IDLE" : "nice 19 (SCHED_IDLE refused)") + " for the whole run (--keep-awake)";
}

}  // namespace dblock_bench
