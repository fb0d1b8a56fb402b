// Lock names and table identifiers on hostile input: validate_name and is_valid_utf8
// (src/core/validate.hpp), parse_table_name, the advisory lock key (src/sql/session_drivers.hpp)
// and ZooKeeper's node names and paths (src/backends/zookeeper/zk_paths.hpp). Properties:
//  - bad input throws UsageError and nothing else;
//  - a valid name is 1..255 bytes of well-formed UTF-8 without NUL (checked against an
//    independent decoder), and is_valid_utf8 agrees with that decoder on every input;
//  - a valid name's ZooKeeper node is one well-formed BMP-only path component that maps back
//    to the name (lock_name(node_name(n)) == n, so distinct names never share a node);
//  - a table name that parses is exactly identifier or schema.identifier;
//  - the advisory key is FNV-1a 64 over "<table>:<name>", as documented (stable forever).
#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/zookeeper/zk_paths.hpp"
#include "core/validate.hpp"
#include "fuzz_check.hpp"
#include "sql/session_drivers.hpp"

using namespace dblock::detail;
using fuzz::accepts;
using fuzz::reference_utf8;

namespace {

void check_name(const std::string& name) {
  FUZZ_CHECK(is_valid_utf8(name) == reference_utf8(name));
  bool valid = accepts([&] { validate_name(name); });
  bool expected = !name.empty() && name.size() <= max_name_bytes && name.find('\0') == std::string::npos &&
                  reference_utf8(name);
  FUZZ_CHECK(valid == expected);

  // node_name takes validated names (the core checks them first); on anything else it may
  // only throw UsageError.
  std::string node;
  if (accepts([&] { node = zk::node_name(name); }) && valid) {
    FUZZ_CHECK(!node.empty() && node != "." && node != "..");
    FUZZ_CHECK(node.find('/') == std::string::npos && node.find('\0') == std::string::npos);
    FUZZ_CHECK(reference_utf8(node));
    for (unsigned char c : node) FUZZ_CHECK(c < 0xF0);  // no 4-byte sequence: BMP only
    FUZZ_CHECK(zk::lock_name(node) == name);
  }
}

bool is_identifier(const std::string& s) {
  if (s.empty() || s.size() > max_identifier_chars || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

void check_table(const std::string& text) {
  TableName t;
  bool ok = accepts([&] { t = parse_table_name(text); });
  auto dot = text.find('.');
  bool expected = dot == std::string::npos ? is_identifier(text)
                                           : is_identifier(text.substr(0, dot)) && is_identifier(text.substr(dot + 1));
  FUZZ_CHECK(ok == expected);
  if (ok) FUZZ_CHECK(t.qualified() == text);
}

void check_advisory_key(const std::string& table, const std::string& name) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : table + ":" + name) h = (h ^ c) * 1099511628211ull;
  FUZZ_CHECK(sqldb::advisory_key(table, name) == static_cast<std::int64_t>(h));
}

void check_zookeeper_paths(const std::string& text) {
  std::string root;
  if (accepts([&] { root = zk::root_path(text); })) {
    FUZZ_CHECK(root == "/" + text);
    FUZZ_CHECK(root.find("//") == std::string::npos && root.back() != '/');
    FUZZ_CHECK(reference_utf8(root));
  }
  if (auto c = zk::parse_contender(text)) {
    FUZZ_CHECK(c->node == text);
    FUZZ_CHECK(c->sequence > -10'000'000'000 && c->sequence < 10'000'000'000);
  }
  (void)zk::lock_name(text);  // any child of the root, even one dblock did not create
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  check_name(text);
  check_table(text);
  check_zookeeper_paths(text);
  // A table and a name from one input: split at the first ':' (a table never has one).
  auto colon = text.find(':');
  if (colon != std::string::npos) check_advisory_key(text.substr(0, colon), text.substr(colon + 1));
  else check_advisory_key("dblock_locks", text);
  return 0;
}
