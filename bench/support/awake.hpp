// --keep-awake: a thread that spins at SCHED_IDLE for the whole run, so that one vCPU never
// halts. On a VM an idle vCPU goes to sleep, and waking it for each reply adds tens of
// microseconds to every round trip (it doubled PostgreSQL's here): figures taken with it and
// without differ by that, and the report says which they are. It keeps off the vCPUs that take
// the disks' interrupts: spinning there, every flush's completion waited for the next timer
// tick (4 ms a commit on PostgreSQL and MariaDB, the whole run).
#pragma once

#include <atomic>
#include <string>
#include <thread>

namespace dblock_bench {

class KeepAwake {
 public:
  explicit KeepAwake(bool on);
  ~KeepAwake();
  KeepAwake(const KeepAwake&) = delete;
  KeepAwake& operator=(const KeepAwake&) = delete;
  // The report's line on it: whether a vCPU was kept awake, and how.
  std::string note() const;

 private:
  std::atomic<bool> stop_{false};
  std::thread spinner_;
  bool idle_policy_ = false;  // SCHED_IDLE was granted (else it spins at nice 19)
  std::string placement_;     // where it spins, for note()
};

}  // namespace dblock_bench
