#include "torture/occupancy.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace dblock::torture {

namespace {

constexpr int slots = 64;  // more than processes x threads of any run

struct Slot {
  std::int64_t pid = 0;  // 0: free
  std::int64_t exclusive = 0;
  std::int64_t deadline_ns = 0;  // steady clock
};

struct State {
  OccupancyCounts counts;
  std::int64_t killed[8] = {};  // the latest processes the chaos killed (a ring)
  std::int64_t killed_next = 0;
  Slot slot[slots];
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A process that is gone or a zombie (killed, not reaped yet) holds nothing.
bool alive(std::int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

State load(int fd) {
  State s;
  if (::pread(fd, &s, sizeof s, 0) != static_cast<ssize_t>(sizeof s)) s = State{};
  return s;
}

void store(int fd, const State& s, const std::string& path) {
  if (::pwrite(fd, &s, sizeof s, 0) != static_cast<ssize_t>(sizeof s))
    throw std::runtime_error("cannot write the occupancy file " + path);
}

}  // namespace

int Occupancy::enter(bool exclusive, std::uint32_t permits, std::chrono::steady_clock::time_point deadline,
                     bool slow) {
  return file_.locked([&] {
    auto s = load(file_.fd());
    const auto now = now_ns();
    std::int64_t writers = 0, others = 0;
    int free = -1;
    for (int i = 0; i < slots; ++i) {
      auto& h = s.slot[i];
      if (h.pid != 0 && (!alive(h.pid) || std::count(std::begin(s.killed), std::end(s.killed), h.pid) > 0))
        h = Slot{};
      if (h.pid == 0) {
        if (free < 0) free = i;
        continue;
      }
      if (h.deadline_ns <= now) continue;  // may be granted again: not counted
      ++others;
      writers += h.exclusive;
    }
    if (free < 0) throw std::runtime_error("the occupancy file has no free slot");
    // Paused between its last look at the lease and here (SIGSTOP), the entering holder may
    // be past its own deadline: then it holds nothing, as the others see it too.
    const auto own_deadline =
        std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    const bool broken =
        own_deadline > now && (exclusive ? others > 0 : permits > 1 ? others >= permits : writers > 0);
    ++s.counts.entries;
    if (broken) ++s.counts.over;
    s.counts.max_inside = std::max(s.counts.max_inside, others + 1);
    if (slow) s.counts.holder_pid = ::getpid();
    s.slot[free] = Slot{::getpid(), exclusive ? 1 : 0, own_deadline};
    store(file_.fd(), s, file_.path());
    return free;
  });
}

void Occupancy::killing(std::int64_t pid) {
  file_.locked([&] {
    auto s = load(file_.fd());
    s.killed[s.killed_next++ % 8] = pid;
    store(file_.fd(), s, file_.path());
    return 0;
  });
}

void Occupancy::leave(int slot) {
  file_.locked([&] {
    auto s = load(file_.fd());
    if (s.counts.holder_pid == ::getpid()) s.counts.holder_pid = 0;
    s.slot[slot] = Slot{};
    store(file_.fd(), s, file_.path());
    return 0;
  });
}

OccupancyCounts Occupancy::read() {
  return file_.locked([&] { return load(file_.fd()).counts; });
}

OccupancyCounts Occupancy::peek() {
  OccupancyCounts c;
  if (::pread(file_.fd(), &c, sizeof c, 0) != static_cast<ssize_t>(sizeof c)) return OccupancyCounts{};
  return c;
}

}  // namespace dblock::torture
