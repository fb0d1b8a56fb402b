#include "torture/resource.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace dblock::torture {

ResourceState Resource::load() {
  char buf[256] = {};
  ssize_t n = ::pread(file_.fd(), buf, sizeof buf - 1, 0);
  ResourceState s;
  if (n <= 0) return s;
  unsigned long long fence = 0;
  unsigned long long granted = 0;
  long long counter = 0, accepted = 0, stale = 0, violations = 0, holder = 0, late = 0, late_max = 0;
  long long regressions = 0;
  if (std::sscanf(buf, "%llu %lld %lld %lld %lld %lld %lld %lld %llu %lld", &fence, &counter, &accepted, &stale,
                  &violations, &holder, &late, &late_max, &granted, &regressions) == 10) {
    s.granted_max = granted;
    s.regressions = regressions;
    s.late_losses = late;
    s.late_loss_max_ms = late_max;
    s.holder_pid = holder;
    s.fence = fence;
    s.counter = counter;
    s.accepted = accepted;
    s.stale = stale;
    s.violations = violations;
  }
  return s;
}

// One pwrite of a fixed-width record: a reader never sees a torn or shorter one.
void Resource::store(const ResourceState& s) {
  char buf[240];
  int n = std::snprintf(buf, sizeof buf,
                        "%20llu %20lld %20lld %20lld %20lld %20lld %20lld %20lld %20llu %20lld\n",
                        static_cast<unsigned long long>(s.fence), static_cast<long long>(s.counter),
                        static_cast<long long>(s.accepted), static_cast<long long>(s.stale),
                        static_cast<long long>(s.violations), static_cast<long long>(s.holder_pid),
                        static_cast<long long>(s.late_losses), static_cast<long long>(s.late_loss_max_ms),
                        static_cast<unsigned long long>(s.granted_max), static_cast<long long>(s.regressions));
  if (::pwrite(file_.fd(), buf, n, 0) != n) throw std::runtime_error("cannot write the resource " + file_.path());
}

ResourceState Resource::read() {
  return locked([&] { return load(); });
}

ResourceState Resource::peek() { return load(); }

// A section or write refused because an equal or higher fence was seen: stale when the
// holder knows it lost its lease, else a violation (which excuse() may later reclassify).
void Resource::reject(ResourceState& s, const std::function<bool()>& lease_lost, bool* superseded) {
  if (lease_lost()) {
    ++s.stale;
  } else {
    ++s.violations;
    if (superseded) *superseded = true;
  }
  store(s);
}

bool Resource::enter(std::uint64_t fence, const std::function<bool()>& lease_lost, bool slow, bool* superseded) {
  return locked([&] {
    auto s = load();
    if (fence > s.fence) {
      // Seen now, not only when it writes: the section's read is fenced too, so a holder
      // superseded after its read cannot write back what the next holder already read.
      s.fence = fence;
      s.holder_pid = slow ? ::getpid() : 0;
      store(s);
      return true;
    }
    reject(s, lease_lost, superseded);
    return false;
  });
}

std::int64_t Resource::read_counter() {
  return locked([&] { return load().counter; });
}

bool Resource::write_counter(std::uint64_t fence, std::int64_t counter, const std::function<bool()>& lease_lost,
                             bool* superseded) {
  return locked([&] {
    auto s = load();
    if (fence < s.fence) {
      reject(s, lease_lost, superseded);
      return false;
    }
    s.fence = fence;
    s.counter = counter;
    ++s.accepted;
    s.holder_pid = 0;
    store(s);
    return true;
  });
}

std::uint64_t Resource::granted_max() {
  return locked([&] { return load().granted_max; });
}

void Resource::granted(std::uint64_t fence, std::uint64_t max_before) {
  locked([&] {
    auto s = load();
    if (fence <= max_before) ++s.regressions;
    s.granted_max = std::max(s.granted_max, fence);
    store(s);
    return 0;
  });
}

void Resource::excuse(std::int64_t waited_ms) {
  locked([&] {
    auto s = load();
    --s.violations;
    ++s.late_losses;
    s.late_loss_max_ms = std::max(s.late_loss_max_ms, waited_ms);
    store(s);
    return 0;
  });
}

}  // namespace dblock::torture
