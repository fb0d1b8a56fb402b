// Who is inside the critical section of a shaped lock in a torture run (a read/write lock's
// readers and writers, a semaphore's holders), across the worker processes: fixed slots in a
// file, updated under flock(2), so that the rule of the shape is checked at every entry.
//
// A holder counts while it may still hold: its process alive and its lease's local deadline
// (Lease::remaining() at entry, on the host's monotonic clock, which all processes share)
// ahead. The client declares a loss no later than the server expires the lease, so no one
// may be granted the lock before that deadline; a holder paused past it (SIGSTOP) or killed
// is out, and the fence is what protects against it (the exclusive runs check that).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "torture/shared_file.hpp"

namespace dblock::torture {

struct OccupancyCounts {
  std::int64_t entries = 0;     // sections entered
  std::int64_t over = 0;        // entries that found the shape's rule broken (must be 0)
  std::int64_t max_inside = 0;  // the most live holders at once, the entering one included
  std::int64_t holder_pid = 0;  // a process in a slow section, else 0 (the chaos picks it)
};

class Occupancy {
 public:
  explicit Occupancy(std::string path) : file_(std::move(path), "the occupancy file") {}

  // Enters as a writer (exclusive), a reader (not exclusive, permits 1) or one of a
  // semaphore's `permits` holders, holding until `deadline`. Counts `over` when the live
  // holders found break the rule: a writer alone; a reader with no writer; at most `permits`
  // holders. `slow`: published as the holder for the chaos. Returns the slot for leave().
  int enter(bool exclusive, std::uint32_t permits, std::chrono::steady_clock::time_point deadline, bool slow);
  void leave(int slot);
  // The chaos is about to SIGKILL `pid`: from now on it is out. A dying process's session
  // locks are freed by the server as its sockets close, before /proc shows it as a zombie.
  void killing(std::int64_t pid);
  OccupancyCounts read();
  // Without the lock, for the chaos parent (a SIGSTOPped worker may keep the flock): the
  // counts lead the file, and each is one aligned 8-byte word.
  OccupancyCounts peek();

 private:
  SharedFile file_;
};

}  // namespace dblock::torture
