#include "backends/etcd/etcd_keys.hpp"

#include "dblock/errors.hpp"

namespace dblock::detail::etcd {

namespace {

bool hex_digits(std::string_view s, std::size_t min, std::size_t max) {
  if (s.size() < min || s.size() > max) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string hex16(std::uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 0xF];
  return s;
}

}  // namespace

std::string key_root(std::string_view url_path) {
  if (url_path.empty())
    throw UsageError("bad etcd URL: a key prefix is required (etcd://host:port/prefix)");
  if (url_path.back() == '/') throw UsageError("bad etcd URL: the key prefix ends with '/'");
  if (url_path.front() == '/' || url_path.find("//") != std::string_view::npos)
    throw UsageError("bad etcd URL: the key prefix has an empty path component ('//')");
  return "/" + std::string(url_path);
}

void check_name(std::string_view name) {
  if (name.find('/') != std::string_view::npos)
    throw UsageError("an etcd lock name cannot contain '/' (its keys would fall under another name's prefix)");
}

std::string lock_prefix(const std::string& root, std::string_view name) {
  check_name(name);
  return root + "/" + std::string(name) + "/";
}

std::string lease_hex(std::int64_t id) {
  static const char* digits = "0123456789abcdef";
  auto v = static_cast<std::uint64_t>(id);
  if (v == 0) return "0";
  std::string s;
  for (; v; v >>= 4) s.insert(s.begin(), digits[v & 0xF]);
  return s;
}

std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = prefix.back();
    if (static_cast<unsigned char>(last) < 0xff) {
      last = static_cast<char>(static_cast<unsigned char>(last) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

std::optional<std::string> lock_name_of(const std::string& root, std::string_view key) {
  if (key.size() <= root.size() + 1 || key.compare(0, root.size(), root) != 0 || key[root.size()] != '/')
    return std::nullopt;
  key.remove_prefix(root.size() + 1);
  auto slash = key.find('/');
  if (slash == 0 || slash == std::string_view::npos) return std::nullopt;
  auto lease = key.substr(slash + 1);
  if (lease.empty() || lease.size() > 16) return std::nullopt;
  for (char c : lease)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  return std::string(key.substr(0, slash));
}

}  // namespace dblock::detail::etcd

namespace dblock::detail::etcd {

std::string shaped_suffix(std::int64_t lease, KeyShape shape, std::uint64_t tag) {
  std::string kind = shape.kind == KeyShape::reader ? "r" : "s" + std::to_string(shape.permits);
  return lease_hex(lease) + "-" + kind + "-" + hex16(tag);
}

KeyShape key_shape(std::string_view key) {
  auto slash = key.rfind('/');
  if (slash != std::string_view::npos) key.remove_prefix(slash + 1);
  auto dash = key.find('-');
  if (dash == std::string_view::npos || !hex_digits(key.substr(0, dash), 1, 16)) return {};
  auto rest = key.substr(dash + 1);
  auto dash2 = rest.find('-');
  if (dash2 == std::string_view::npos || !hex_digits(rest.substr(dash2 + 1), 16, 16)) return {};
  auto kind = rest.substr(0, dash2);
  if (kind == "r") return {KeyShape::reader, 0};
  // s<N>: N from 2 to 99999, no leading zero (one spelling per N).
  if (kind.size() < 2 || kind.size() > 6 || kind[0] != 's' || kind[1] == '0') return {};
  std::uint32_t n = 0;
  for (char c : kind.substr(1)) {
    if (c < '0' || c > '9') return {};
    n = n * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (n < 2) return {};
  return {KeyShape::permit, n};
}

std::optional<std::pair<std::string, KeyShape>> parse_lock_key(const std::string& root, std::string_view key) {
  if (auto name = lock_name_of(root, key)) return std::make_pair(std::move(*name), KeyShape{});
  auto shape = key_shape(key);
  if (shape.kind == KeyShape::writer) return std::nullopt;
  // <root>/<name>/<suffix>: the same rules as a plain key's, with a shaped suffix.
  if (key.size() <= root.size() + 1 || key.compare(0, root.size(), root) != 0 || key[root.size()] != '/')
    return std::nullopt;
  key.remove_prefix(root.size() + 1);
  auto slash = key.find('/');
  if (slash == 0 || slash == std::string_view::npos || key.find('/', slash + 1) != std::string_view::npos)
    return std::nullopt;
  return std::make_pair(std::string(key.substr(0, slash)), shape);
}

std::vector<std::size_t> holders(const std::vector<KeyShape>& keys) {
  std::vector<std::size_t> out;
  if (keys.empty()) return out;
  const auto first = keys[0];
  if (first.kind == KeyShape::writer) return {0};
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (first.kind == KeyShape::reader && !(keys[i] == first)) break;
    if (first.kind == KeyShape::permit && i >= first.permits) break;
    if (keys[i] == first) out.push_back(i);
  }
  return out;
}

}  // namespace dblock::detail::etcd
