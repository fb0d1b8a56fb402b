#include "core/validate.hpp"

#include "dblock/errors.hpp"

namespace dblock::detail {

bool is_valid_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return false;
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr std::uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

void validate_name(std::string_view name) {
  if (name.empty()) throw UsageError("bad lock name: empty");
  if (name.size() > max_name_bytes)
    throw UsageError("bad lock name: " + std::to_string(name.size()) + " bytes, the limit is " +
                     std::to_string(max_name_bytes));
  if (name.find('\0') != std::string_view::npos) throw UsageError("bad lock name: contains a NUL byte");
  if (!is_valid_utf8(name)) throw UsageError("bad lock name: not valid UTF-8");
}

namespace {
void check_identifier(std::string_view part, std::string_view whole) {
  auto bad = [&](const std::string& why) {
    return UsageError("bad table name '" + std::string(whole) + "': " + why +
                      " (use identifier or schema.identifier of letters, digits and _)");
  };
  if (part.empty()) throw bad("empty identifier");
  if (part.size() > max_identifier_chars)
    throw bad("identifier longer than " + std::to_string(max_identifier_chars) + " characters");
  auto c0 = part.front();
  if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_')) throw bad("must start with a letter or _");
  for (char c : part)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      throw bad("invalid character");
}
}  // namespace

TableName parse_table_name(std::string_view text) {
  TableName t;
  auto dot = text.find('.');
  if (dot == std::string_view::npos) {
    check_identifier(text, text);
    t.table = std::string(text);
  } else {
    check_identifier(text.substr(0, dot), text);
    check_identifier(text.substr(dot + 1), text);
    t.schema = std::string(text.substr(0, dot));
    t.table = std::string(text.substr(dot + 1));
  }
  return t;
}

}  // namespace dblock::detail
