// The protected resource of the torture run: a small file that every worker process updates
// under the lock, the way a real service writes to storage behind a fenced lock.
//
// It holds ten numbers. `counter` is updated non-atomically (read, pause, write back): two
// holders at once lose an increment. Everything else is updated atomically under flock(2), as
// a storage server would check a fence:
//   fence      the highest fence seen, at the start of a section (enter) or in a write; a
//              write with a lower fence is rejected (stale). Registering it at the start is
//              what makes the read of the read-modify-write fenced: a holder superseded
//              after its read must not write back a value the next holder has read already
//   accepted   fenced writes accepted, so lost increments = accepted - counter
//   stale      writes rejected because their fence was lower (a holder that lost its lease)
//   violations entries or writes by a holder whose lease was still valid while an equal or
//              higher fence had already written: two live holders at once, or a fence that
//              did not increase (the client declares a loss no later than the server expires
//              it, so a valid lease means nobody else may have been granted the lock)
//   late_losses such entries or writes by a session-lock holder (for-update, advisory) that
//              then saw its loss reported within the promised window (excuse()): the server
//              frees a session lock the instant it drops the connection (a restart, a
//              killed backend), and the holder learns it at its next renewal ping (no
//              later than its local deadline); the fence rejected its write meanwhile.
//              Kept apart, not hidden.
//   late_loss_max_ms the longest such holder waited for its loss to be reported
//   granted_max the highest fence a worker has registered right after its acquire returned
//   regressions grants whose fence was not above granted_max as read before their acquire was
//              sent: a grant answered before another was asked for got the higher or equal
//              fence, which no failover may cause (a violation above may be two live holders
//              with increasing fences; this is the fences themselves going backwards)
// A worker killed mid-update leaves the file consistent: each step is one locked rewrite.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "torture/shared_file.hpp"

namespace dblock::torture {

struct ResourceState {
  std::uint64_t fence = 0;
  std::int64_t counter = 0;
  std::int64_t accepted = 0;
  std::int64_t stale = 0;
  std::int64_t violations = 0;
  std::int64_t holder_pid = 0;  // a process in a slow critical section, else 0 (the chaos picks it)
  std::int64_t late_losses = 0;
  std::int64_t late_loss_max_ms = 0;
  std::uint64_t granted_max = 0;
  std::int64_t regressions = 0;
};

class Resource {
 public:
  explicit Resource(std::string path) : file_(std::move(path), "the resource") {}
  Resource(const Resource&) = delete;
  Resource& operator=(const Resource&) = delete;

  ResourceState read();
  // Without the lock, for the chaos parent: a worker SIGSTOPped inside `locked` keeps the
  // flock, and the parent must not wait for it. Records are one pwrite of fixed width, which a
  // read sees whole.
  ResourceState peek();
  // The start of a critical section with fence `fence`: true to go on (the fence is then
  // the highest seen); false when an equal or higher fence was already seen (counted as
  // stale when `lease_lost`, else as a violation).
  // `slow`: this section will take a while; it is published as the holder for the chaos.
  // `lease_lost` is asked under the resource's lock: a holder may wait for that lock (behind a
  // SIGSTOPped one) long enough to lose its lease meanwhile.
  // *superseded (optional) is set when this call counted a violation.
  bool enter(std::uint64_t fence, const std::function<bool()>& lease_lost, bool slow, bool* superseded = nullptr);
  // The counter as this holder sees it (the first half of the racy read-modify-write).
  std::int64_t read_counter();
  // The second half: writes `counter` if no higher fence wrote meanwhile. A rejected write is
  // stale when `lease_lost`, else a violation. Returns whether it was accepted.
  bool write_counter(std::uint64_t fence, std::int64_t counter, const std::function<bool()>& lease_lost,
                     bool* superseded = nullptr);
  // Read before an acquire is sent, then given with the fence it granted: counts a regression
  // when that fence is not above every fence registered before the acquire was sent.
  std::uint64_t granted_max();
  void granted(std::uint64_t fence, std::uint64_t max_before);
  // Turns one violation this holder counted into a late loss report, `waited_ms` after it.
  void excuse(std::int64_t waited_ms);

 private:
  template <class F>
  auto locked(F&& f) {
    return file_.locked(std::forward<F>(f));
  }
  ResourceState load();
  void store(const ResourceState& s);
  void reject(ResourceState& s, const std::function<bool()>& lease_lost, bool* superseded);
  SharedFile file_;
};

}  // namespace dblock::torture
