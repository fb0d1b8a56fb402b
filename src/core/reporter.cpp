#include "core/reporter.hpp"

#include <string>

namespace dblock {

std::string_view to_string(EventKind kind) noexcept {
  switch (kind) {
    case EventKind::acquired: return "acquired";
    case EventKind::busy: return "busy";
    case EventKind::released: return "released";
    case EventKind::renewed: return "renewed";
    case EventKind::lost: return "lost";
    case EventKind::swept: return "swept";
  }
  return "unknown";
}

namespace detail {

namespace {
std::chrono::microseconds us(Clock::duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d); }
}  // namespace

// The event is copied with its name (a view into the caller's string); the hook runs on the
// event thread, which drops what it throws.
void Reporter::emit(const Event& e) noexcept {
  if (!hook_) return;
  try {
    events_.post([hook = hook_, e = Event(e), name = std::string(e.name)]() mutable {
      e.name = name;
      (*hook)(e);
    });
  } catch (...) {  // out of memory: the event goes untold rather than fail the lock operation
  }
}

void Reporter::acquired(std::string_view name, std::uint64_t fence, int holds, Clock::duration waited) noexcept {
  ++(holds == 1 ? acquired_ : reentered_);
  waited_us_ += us(waited).count();
  Event e{EventKind::acquired, name};
  e.fence = fence;
  e.holds = static_cast<std::uint32_t>(holds);
  e.waited = us(waited);
  emit(e);
}

void Reporter::busy(std::string_view name, Clock::duration waited) noexcept {
  ++busy_;
  waited_us_ += us(waited).count();
  Event e{EventKind::busy, name};
  e.waited = us(waited);
  emit(e);
}

void Reporter::released(std::string_view name, std::uint64_t fence, int holds, Clock::duration held) noexcept {
  if (holds == 0) ++released_;
  Event e{EventKind::released, name};
  e.fence = fence;
  e.holds = static_cast<std::uint32_t>(holds);
  if (holds == 0) e.held = us(held);
  emit(e);
}

void Reporter::renewed(std::string_view name, std::uint64_t fence) noexcept {
  ++renewed_;
  Event e{EventKind::renewed, name};
  e.fence = fence;
  emit(e);
}

void Reporter::lost(std::string_view name, std::uint64_t fence, Clock::duration held) noexcept {
  ++lost_;
  Event e{EventKind::lost, name};
  e.fence = fence;
  e.held = us(held);
  emit(e);
}

void Reporter::swept(std::size_t count) noexcept {
  swept_ += count;
  Event e{EventKind::swept, {}};
  e.count = count;
  emit(e);
}

ClientStats Reporter::stats() const noexcept {
  ClientStats s;
  s.acquired = acquired_;
  s.reentered = reentered_;
  s.busy = busy_;
  s.released = released_;
  s.renewed = renewed_;
  s.lost = lost_;
  s.swept = swept_;
  s.waited = std::chrono::microseconds{waited_us_.load()};
  return s;
}

}  // namespace detail
}  // namespace dblock
