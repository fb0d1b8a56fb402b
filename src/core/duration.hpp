// Durations as the CLI takes them: a non-negative integer and a unit, ms, s, m or h.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace dblock::detail {

// Throws UsageError for "", "10" (no unit), "-5s", "1.5s", "abc", or values that overflow.
std::chrono::milliseconds parse_duration(std::string_view text);
std::string format_duration(std::chrono::milliseconds d);  // "1500ms", "2s", "5m", "1h"

}  // namespace dblock::detail
