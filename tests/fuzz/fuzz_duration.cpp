// parse_duration and format_duration (dblock/duration.hpp) on hostile input. Properties:
//  - bad input throws UsageError and nothing else;
//  - exactly the texts <digits><ms|s|m|h> up to the documented cap are accepted, with the
//    value a 128-bit reference computation gives;
//  - format(d) parses back to d, for parsed durations and for any count in range; format's
//    output is canonical (format(parse(format(d))) == format(d));
//  - a negative count formats to something parse_duration refuses.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "dblock/duration.hpp"
#include "fuzz_check.hpp"

using dblock::format_duration;
using dblock::parse_duration;
using fuzz::accepts;
using std::chrono::milliseconds;

namespace {

// The documented cap: ~292 years of milliseconds, INT64_MAX / 10^6.
// Wide enough for any saturated value times any unit.
__extension__ typedef __int128 wide;

constexpr std::int64_t max_ms = std::numeric_limits<std::int64_t>::max() / 1'000'000;

// -1 when `text` is not <digits><unit>, -2 when it is but exceeds the cap, else milliseconds.
std::int64_t reference(const std::string& text) {
  std::size_t digits = 0;
  wide value = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    value = value * 10 + (text[digits] - '0');
    if (value > max_ms) value = max_ms + 1;  // saturate: already too large
    ++digits;
  }
  auto unit = text.substr(digits);
  wide scale = unit == "ms" ? 1 : unit == "s" ? 1000 : unit == "m" ? 60'000 : unit == "h" ? 3'600'000 : 0;
  if (digits == 0 || scale == 0) return -1;
  return value * scale > max_ms ? -2 : static_cast<std::int64_t>(value * scale);
}

void check_round_trip(milliseconds d) {
  auto text = format_duration(d);
  milliseconds back{};
  FUZZ_CHECK(accepts([&] { back = parse_duration(text); }));
  FUZZ_CHECK(back == d);
  FUZZ_CHECK(format_duration(back) == text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  milliseconds d{};
  bool ok = accepts([&] { d = parse_duration(text); });
  auto expected = reference(text);
  FUZZ_CHECK(ok == (expected >= 0));
  if (ok) {
    FUZZ_CHECK(d.count() == expected);
    check_round_trip(d);
  }

  // The first 8 bytes as a count of milliseconds, any value at all.
  if (size >= 8) {
    std::int64_t count;
    std::memcpy(&count, data, sizeof count);
    auto formatted = format_duration(milliseconds(count));
    if (count >= 0 && count <= max_ms) check_round_trip(milliseconds(count));
    else if (count < 0) FUZZ_CHECK(!accepts([&] { parse_duration(formatted); }));
    // Reduced into range, so that the round trip sees large values too.
    if (count != std::numeric_limits<std::int64_t>::min())
      check_round_trip(milliseconds((count < 0 ? -count : count) % (max_ms + 1)));
  }
  return 0;
}
