// Reporter: counts what a Client does (Client::stats) and tells the service's on_event hook.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "core/driver.hpp"
#include "dblock/events.hpp"

namespace dblock::detail {

class Reporter {
 public:
  explicit Reporter(EventCallback hook) : hook_(std::move(hook)) {}

  void acquired(std::string_view name, std::uint64_t fence, int holds, Clock::duration waited) noexcept;
  void busy(std::string_view name, Clock::duration waited) noexcept;
  void released(std::string_view name, std::uint64_t fence, int holds, Clock::duration held) noexcept;
  void renewed(std::string_view name, std::uint64_t fence) noexcept;
  void lost(std::string_view name, std::uint64_t fence, Clock::duration held) noexcept;
  void swept(std::size_t count) noexcept;

  ClientStats stats() const noexcept;

 private:
  void emit(const Event& e) noexcept;

  const EventCallback hook_;
  std::atomic<std::uint64_t> acquired_{0}, reentered_{0}, busy_{0}, released_{0}, renewed_{0}, lost_{0}, swept_{0};
  std::atomic<std::int64_t> waited_us_{0};
};

}  // namespace dblock::detail
