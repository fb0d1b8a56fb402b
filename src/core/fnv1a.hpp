// FNV-1a 64: a hash that every build and process computes alike (std::hash need not), for
// names other processes must agree on: advisory keys, wake files, prepared statements.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace dblock::detail {

constexpr std::uint64_t fnv1a64_offset = 14695981039346656037ull;

// `h` continues a hash already begun (fnv1a64(b, fnv1a64(a)) hashes a then b).
inline std::uint64_t fnv1a64(std::string_view s, std::uint64_t h = fnv1a64_offset) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The hash as 16 lowercase hex digits.
inline std::string fnv1a64_hex(std::string_view s) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(s)));
  return hex;
}

}  // namespace dblock::detail
