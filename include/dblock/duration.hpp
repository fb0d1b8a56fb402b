/// @file
/// Durations as the dblock command takes them: a non-negative integer and a unit, ms, s, m
/// or h ("500ms", "30s", "5m", "1h"), for programs that read lock settings from their own
/// configuration the same way.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "dblock/export.hpp"

namespace dblock {

/// Throws UsageError for "", "10" (no unit), "-5s", "1.5s", "abc", or values that overflow.
DBLOCK_EXPORT std::chrono::milliseconds parse_duration(std::string_view text);
DBLOCK_EXPORT std::string format_duration(std::chrono::milliseconds d);  ///< "1500ms", "2s", "5m", "1h"

}  // namespace dblock
