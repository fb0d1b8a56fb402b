#include "dblock/duration.hpp"

#include <cstdint>
#include <limits>

#include "dblock/errors.hpp"

namespace dblock {

std::chrono::milliseconds parse_duration(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return UsageError("bad duration '" + std::string(text) + "': " + why +
                      " (use an integer with ms, s, m or h, e.g. 500ms or 30s)");
  };
  if (text.empty()) throw bad("empty");
  if (text.front() == '-') throw bad("negative");
  std::size_t digits = 0;
  std::uint64_t value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    if (value > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) throw bad("too large");
    value = value * 10 + static_cast<std::uint64_t>(text[digits] - '0');
    ++digits;
  }
  if (digits == 0) throw bad("no number");
  auto unit = text.substr(digits);
  std::uint64_t scale;
  if (unit == "ms") scale = 1;
  else if (unit == "s") scale = 1000;
  else if (unit == "m") scale = 60'000;
  else if (unit == "h") scale = 3'600'000;
  else if (unit.empty()) throw bad("missing unit");
  else throw bad("unknown unit '" + std::string(unit) + "'");
  // Cap at ~292 years' worth of milliseconds in a signed 64-bit count, far below overflow of
  // the steady clock's nanoseconds too.
  const std::uint64_t max_ms = std::numeric_limits<std::int64_t>::max() / 1'000'000;
  if (value > max_ms / scale) throw bad("too large");
  return std::chrono::milliseconds(static_cast<std::int64_t>(value * scale));
}

std::string format_duration(std::chrono::milliseconds d) {
  auto ms = d.count();
  if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms != 0 && ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace dblock
