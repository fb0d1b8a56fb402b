// validate_name (lock names) and parse_table_name (SQL identifiers), src/core/validate.hpp.
#include <catch2/catch.hpp>

#include <string>

#include "core/validate.hpp"
#include "dblock/errors.hpp"

using dblock::UsageError;
using dblock::detail::is_valid_utf8;
using dblock::detail::parse_table_name;
using dblock::detail::validate_name;

TEST_CASE("validate_name: an empty name is rejected", "[validate]") {
  CHECK_THROWS_AS(validate_name(""), UsageError);
}

TEST_CASE("validate_name: 255 bytes are accepted, 256 rejected", "[validate]") {
  CHECK_NOTHROW(validate_name(std::string(255, 'a')));
  CHECK_THROWS_AS(validate_name(std::string(256, 'a')), UsageError);
  CHECK_THROWS_AS(validate_name(std::string(10'000, 'a')), UsageError);
  CHECK_NOTHROW(validate_name("a"));
}

TEST_CASE("validate_name: the limit counts bytes, not characters", "[validate]") {
  // 85 three-byte characters are 255 bytes; 86 are 258 bytes (86 characters).
  std::string euro = "\xE2\x82\xAC";
  std::string name;
  for (int i = 0; i < 85; ++i) name += euro;
  REQUIRE(name.size() == 255);
  CHECK_NOTHROW(validate_name(name));
  CHECK_THROWS_AS(validate_name(name + euro), UsageError);
}

TEST_CASE("validate_name: a NUL byte anywhere is rejected", "[validate]") {
  CHECK_THROWS_AS(validate_name(std::string("a\0b", 3)), UsageError);
  CHECK_THROWS_AS(validate_name(std::string("\0", 1)), UsageError);
  CHECK_THROWS_AS(validate_name(std::string("abc\0", 4)), UsageError);
}

TEST_CASE("validate_name: invalid UTF-8 is rejected", "[validate]") {
  struct Case {
    const char* what;
    std::string bytes;
  };
  for (const auto& c : {
           Case{"lone continuation byte 0x80", "a\x80" "b"},
           Case{"overlong NUL C0 80", "\xC0\x80"},
           Case{"overlong '/' C0 AF", "\xC0\xAF"},
           Case{"overlong 3-byte E0 80 80", "\xE0\x80\x80"},
           Case{"overlong 4-byte F0 80 80 80", "\xF0\x80\x80\x80"},
           Case{"surrogate ED A0 80 (U+D800)", "\xED\xA0\x80"},
           Case{"surrogate ED BF BF (U+DFFF)", "\xED\xBF\xBF"},
           Case{"F4 90 80 80, past U+10FFFF", "\xF4\x90\x80\x80"},
           Case{"F5 lead byte", "\xF5\x80\x80\x80"},
           Case{"FF byte", "x\xFF"},
           Case{"truncated E2 82", "\xE2\x82"},
           Case{"truncated E2 82 then ASCII", "\xE2\x82z"},
           Case{"truncated 4-byte F0 9F 98", "\xF0\x9F\x98"},
       }) {
    INFO(c.what);
    CHECK_FALSE(is_valid_utf8(c.bytes));
    CHECK_THROWS_AS(validate_name(c.bytes), UsageError);
  }
}

TEST_CASE("validate_name: emoji, CJK, boundary code points and SQL metacharacters are accepted", "[validate]") {
  for (const std::string name : {
           std::string("\xF0\x9F\x94\x92"),                    // U+1F512 lock emoji
           std::string("lock-\xF0\x9F\x98\x80-\xF0\x9F\x9A\x80"),  // emoji inside ASCII
           std::string("\xE6\xBC\xA2\xE5\xAD\x97"),            // CJK
           std::string("\xED\x9F\xBF"),                        // U+D7FF, just below the surrogates
           std::string("\xEE\x80\x80"),                        // U+E000, just above them
           std::string("\xF4\x8F\xBF\xBF"),                    // U+10FFFF, the last code point
           std::string("\xC2\x80"),                            // U+0080, smallest 2-byte
           std::string("%_\\'\""),
           std::string("a'; DROP TABLE dblock_locks; --"),
           std::string(" spaces and\ttabs "),
       }) {
    INFO(name);
    CHECK(is_valid_utf8(name));
    CHECK_NOTHROW(validate_name(name));
  }
}

TEST_CASE("parse_table_name: a plain identifier has no schema", "[validate]") {
  auto t = parse_table_name("dblock_locks");
  CHECK(t.schema.empty());
  CHECK(t.table == "dblock_locks");
  CHECK(t.qualified() == "dblock_locks");

  CHECK(parse_table_name("_x9").table == "_x9");
  CHECK(parse_table_name("Locks").table == "Locks");
}

TEST_CASE("parse_table_name: schema.identifier splits at the dot", "[validate]") {
  auto t = parse_table_name("s.t");
  CHECK(t.schema == "s");
  CHECK(t.table == "t");
  CHECK(t.qualified() == "s.t");
}

TEST_CASE("parse_table_name: 40 characters are accepted, 41 rejected", "[validate]") {
  std::string forty(40, 'a');
  CHECK(parse_table_name(forty).table == forty);
  CHECK(parse_table_name(forty + "." + forty).schema == forty);
  CHECK_THROWS_AS(parse_table_name(std::string(41, 'a')), UsageError);
  CHECK_THROWS_AS(parse_table_name(std::string(41, 'a') + ".t"), UsageError);
  CHECK_THROWS_AS(parse_table_name("s." + std::string(41, 'a')), UsageError);
}

TEST_CASE("parse_table_name: injection, bad characters and malformed qualification are rejected", "[validate]") {
  for (const char* text : {"x;DROP TABLE y", "1abc", "a.b.c", "", ".", "a.", ".a", "a-b", "a b", "a\"b", "`a`",
                           "a;", "s.1t", "t$", "tab\xC3\xA9", "\"quoted\""}) {
    INFO('"' << text << '"');
    CHECK_THROWS_AS(parse_table_name(text), UsageError);
  }
}
