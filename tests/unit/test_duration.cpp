// parse_duration and format_duration (dblock/duration.hpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "dblock/duration.hpp"
#include "dblock/errors.hpp"

using dblock::UsageError;
using dblock::format_duration;
using dblock::parse_duration;
using std::chrono::milliseconds;

TEST_CASE("parse_duration: each unit (ms, s, m, h) scales to milliseconds", "[duration]") {
  CHECK(parse_duration("500ms") == milliseconds(500));
  CHECK(parse_duration("30s") == milliseconds(30'000));
  CHECK(parse_duration("5m") == milliseconds(300'000));
  CHECK(parse_duration("2h") == milliseconds(7'200'000));
  CHECK(parse_duration("1ms") == milliseconds(1));
  CHECK(parse_duration("007s") == milliseconds(7'000));
}

TEST_CASE("parse_duration: zero is allowed", "[duration]") {
  CHECK(parse_duration("0s") == milliseconds(0));
  CHECK(parse_duration("0ms") == milliseconds(0));
  CHECK(parse_duration("0h") == milliseconds(0));
}

TEST_CASE("parse_duration: malformed, negative, fractional, unitless or unknown-unit text is rejected",
          "[duration]") {
  for (const char* text : {"", "10", "-5s", "abc", "1.5s", "5d", "s", "ms", "+5s", " 5s", "5s ", "5 s", "5sec",
                           "5msx", "0x10s", "1e3ms"}) {
    INFO('"' << text << '"');
    CHECK_THROWS_AS(parse_duration(text), UsageError);
  }
}

TEST_CASE("parse_duration: values that overflow are rejected", "[duration]") {
  for (const char* text : {"99999999999999999999h", "99999999999999999999ms", "184467440737095516160ms",
                           "9999999999999999999h", "99999999999999999m", "9223372036854775807s",
                           "9223372036854775807ms"}) {
    INFO(text);
    CHECK_THROWS_AS(parse_duration(text), UsageError);
  }
}

TEST_CASE("parse_duration: the error message names the bad text", "[duration]") {
  try {
    parse_duration("5d");
    FAIL("no exception");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("5d") != std::string::npos);
  }
}

TEST_CASE("format_duration: picks the largest exact unit", "[duration]") {
  CHECK(format_duration(milliseconds(0)) == "0ms");
  CHECK(format_duration(milliseconds(1500)) == "1500ms");
  CHECK(format_duration(milliseconds(2000)) == "2s");
  CHECK(format_duration(milliseconds(90'000)) == "90s");
  CHECK(format_duration(milliseconds(300'000)) == "5m");
  CHECK(format_duration(milliseconds(3'600'000)) == "1h");
  CHECK(format_duration(milliseconds(5'400'000)) == "90m");
}

TEST_CASE("format_duration: parse_duration(format_duration(d)) == d", "[duration]") {
  for (long long ms : {0LL, 1LL, 999LL, 1000LL, 1001LL, 1500LL, 59'999LL, 60'000LL, 90'000LL, 3'599'999LL,
                       3'600'000LL, 5'400'000LL, 86'400'000LL, 604'800'000LL, 123'456'789LL,
                       9'000'000'000'000LL}) {
    milliseconds d(ms);
    INFO(ms << " -> " << format_duration(d));
    CHECK(parse_duration(format_duration(d)) == d);
  }
}

TEST_CASE("format_duration: format_duration(parse_duration(s)) == s for canonical text", "[duration]") {
  for (const char* text : {"500ms", "30s", "5m", "2h", "0ms", "1500ms", "90s", "25h"}) {
    INFO(text);
    CHECK(format_duration(parse_duration(text)) == text);
  }
}
