// Validation of what users pass in: lock names and table identifiers.
#pragma once

#include <string>
#include <string_view>

namespace dblock::detail {

inline constexpr std::size_t max_name_bytes = 255;
inline constexpr std::size_t max_identifier_chars = 40;

// 1..255 bytes of valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF) and
// no NUL byte. Names are always bound as parameters, so any other byte is just data.
void validate_name(std::string_view name);
bool is_valid_utf8(std::string_view s) noexcept;

// A table given as identifier or schema.identifier. Identifiers are spliced into SQL text
// (they cannot be bound), so only [A-Za-z_][A-Za-z0-9_]* is accepted.
struct TableName {
  std::string schema;  // empty when unqualified
  std::string table;
  std::string qualified() const { return schema.empty() ? table : schema + "." + table; }
};
TableName parse_table_name(std::string_view text);

}  // namespace dblock::detail
