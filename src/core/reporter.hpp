// Reporter: counts what a Client does (Client::stats) and tells the service's on_event hook,
// on the Client's event thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "core/driver.hpp"
#include "core/event_thread.hpp"
#include "dblock/events.hpp"

namespace dblock::detail {

class Reporter {
 public:
  // Nothing is posted to `events` without a hook: the counters alone cost no thread.
  Reporter(EventCallback hook, EventThread& events)
      : hook_(hook ? std::make_shared<const EventCallback>(std::move(hook)) : nullptr), events_(events) {}

  void acquired(std::string_view name, std::uint64_t fence, int holds, Clock::duration waited) noexcept;
  void busy(std::string_view name, Clock::duration waited) noexcept;
  void released(std::string_view name, std::uint64_t fence, int holds, Clock::duration held) noexcept;
  void renewed(std::string_view name, std::uint64_t fence) noexcept;
  void lost(std::string_view name, std::uint64_t fence, Clock::duration held) noexcept;
  void swept(std::size_t count) noexcept;

  ClientStats stats() const noexcept;

  // A service's callback (on_lost) run on the event thread after the events posted so far.
  EventThread::Ticket post(std::function<void()> callback) { return events_.post(std::move(callback)); }
  void wait(EventThread::Ticket ticket) const noexcept { events_.wait(ticket); }

 private:
  void emit(const Event& e) noexcept;

  // Shared with the posted calls, which may run after the Client is gone (EventThread's
  // destructor on its own thread).
  const std::shared_ptr<const EventCallback> hook_;
  EventThread& events_;
  std::atomic<std::uint64_t> acquired_{0}, reentered_{0}, busy_{0}, released_{0}, renewed_{0}, lost_{0}, swept_{0};
  std::atomic<std::int64_t> waited_us_{0};
};

}  // namespace dblock::detail
