#include "backends/etcd/etcd_keys.hpp"

#include "dblock/errors.hpp"

namespace dblock::detail::etcd {

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
