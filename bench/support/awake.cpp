#include "bench/support/awake.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sys/syscall.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace dblock_bench {

namespace {

namespace fs = std::filesystem;

// "0-1,3" (a /proc/irq/N/*_list file) as a set of CPU numbers.
std::set<int> parse_cpu_list(const std::string& text) {
  std::set<int> cpus;
  std::stringstream in(text);
  for (std::string range; std::getline(in, range, ',');) {
    int first = 0, last = 0;
    char dash = 0;
    std::stringstream r(range);
    if (!(r >> first)) continue;
    last = (r >> dash >> last) ? last : first;
    for (int c = first; c <= last; ++c) cpus.insert(c);
  }
  return cpus;
}

// The CPUs that take the interrupts of the block devices behind a bus (virtio, NVMe, SATA:
// their PCI function's MSI vectors), as the kernel delivers them now.
std::set<int> disk_interrupt_cpus() {
  std::set<int> cpus;
  std::error_code ec;
  for (const auto& block : fs::directory_iterator("/sys/block", ec)) {
    auto device = fs::canonical(block.path() / "device", ec);
    if (ec || device.string().rfind("/sys/devices/pci", 0) != 0) continue;  // loop, zram: no device
    for (auto dir = device; dir.has_relative_path() && dir != "/sys/devices"; dir = dir.parent_path()) {
      if (!fs::is_directory(dir / "msi_irqs", ec)) continue;
      for (const auto& irq : fs::directory_iterator(dir / "msi_irqs", ec)) {
        const auto proc = "/proc/irq/" + irq.path().filename().string();
        std::ifstream list(proc + "/effective_affinity_list");
        if (!list) list.open(proc + "/smp_affinity_list");
        std::string text;
        std::getline(list, text);
        for (int c : parse_cpu_list(text)) cpus.insert(c);
      }
      break;
    }
  }
  return cpus;
}

}  // namespace

KeepAwake::KeepAwake(bool on) {
  if (!on) return;
  // Where the spinner may run: this process's CPUs without the disks' interrupts.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  bool pinned = false;
  const auto busy = disk_interrupt_cpus();
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    cpu_set_t quiet;
    CPU_ZERO(&quiet);
    std::string names;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed) && !busy.count(c)) {
        CPU_SET(c, &quiet);
        names += (names.empty() ? "" : ",") + std::to_string(c);
      }
    if (!busy.empty() && CPU_COUNT(&quiet) > 0 && CPU_COUNT(&quiet) < CPU_COUNT(&allowed)) {
      allowed = quiet;
      pinned = true;
      placement_ = " on vCPU " + names + " (away from the disks' interrupts)";
    }
  }
  if (!pinned)
    placement_ = busy.empty() ? " on any vCPU (the disks' interrupts not found)"
                              : " on any vCPU (none free of the disks' interrupts)";
  std::atomic<int> policy_set{-1};
  spinner_ = std::thread([this, &policy_set, pinned, allowed] {
    if (pinned) pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
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
         (idle_policy_ ? "SCHED_IDLE" : "nice 19 (SCHED_IDLE refused)") + placement_ +
         " for the whole run (--keep-awake)";
}

}  // namespace dblock_bench
