// Shared by the fuzz targets: a property check that traps (so libFuzzer and fuzz_driver.cpp
// both save the input), and a runner that tells the documented error from a leaked one.
#pragma once

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <typeinfo>

#include "dblock/errors.hpp"

#define FUZZ_CHECK(cond) ((cond) ? (void)0 : ::fuzz::violated(#cond, __FILE__, __LINE__))

namespace fuzz {

[[noreturn]] inline void violated(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz: property violated at %s:%d: %s\n", file, line, what);
  __builtin_trap();
}

// Runs f(): true when it returns, false when it throws UsageError, the documented error for
// bad input (its message goes to *message). Any other exception (std::out_of_range from a
// std::stoi, another dblock error kind) is a bug: reported and trapped.
template <class F>
bool accepts(F&& f, std::string* message = nullptr) {
  try {
    f();
    return true;
  } catch (const dblock::UsageError& e) {
    if (message) *message = e.what();
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: undocumented exception %s: %s\n", typeid(e).name(), e.what());
  } catch (...) {
    std::fprintf(stderr, "fuzz: undocumented exception of unknown type\n");
  }
  __builtin_trap();
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A password no input spells by chance, put in place of the input's own: no output may show it.
// It has no ':' or '@', so it cannot straddle the password's edges.
inline const std::string canary = "C4n4ryS3cr3t";

// Where the password is by the grammar scheme://user:password@host...: after the first
// "//" (which must follow "scheme:"), in the authority (up to the first '/' or '?'), between
// the first ':' and the last '@'. Returns false when the text has no password part.
struct Authority {
  std::size_t begin, end, at, password_begin;
};
inline bool locate_password(const std::string& t, Authority& a) {
  auto slashes = t.find("//");
  if (slashes == std::string::npos || slashes == 0 || t[slashes - 1] != ':') return false;
  if (t.find(':') != slashes - 1) return false;  // that ':' ends the scheme
  a.begin = slashes + 2;
  a.end = std::min(t.find_first_of("/?", a.begin), t.size());
  auto at = t.rfind('@', a.end - 1);
  if (at == std::string::npos || at < a.begin) return false;
  auto colon = t.find(':', a.begin);
  if (colon == std::string::npos || colon > at) return false;
  a.at = at;
  a.password_begin = colon + 1;
  return true;
}

// Unicode's well-formed UTF-8 (Table 3-7), written independently of validate.cpp's decoder
// so that the two check each other.
inline bool reference_utf8(const std::string& s) {
  std::size_t i = 0;
  auto in = [&](std::size_t k, unsigned lo, unsigned hi) {
    if (i + k >= s.size()) return false;
    auto c = static_cast<unsigned char>(s[i + k]);
    return c >= lo && c <= hi;
  };
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c <= 0x7F) i += 1;
    else if (c >= 0xC2 && c <= 0xDF && in(1, 0x80, 0xBF)) i += 2;
    else if (c == 0xE0 && in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF)) i += 3;
    else if (((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) && in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF)) i += 3;
    else if (c == 0xED && in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF)) i += 3;
    else if (c == 0xF0 && in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF)) i += 4;
    else if (c >= 0xF1 && c <= 0xF3 && in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF)) i += 4;
    else if (c == 0xF4 && in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF)) i += 4;
    else return false;
  }
  return true;
}

}  // namespace fuzz
