#include "backends/zookeeper/zk_paths.hpp"

#include <algorithm>

#include "dblock/errors.hpp"

namespace dblock::detail::zk {

namespace {

// Decodes the next code point of well-formed UTF-8 (the core validated names already; a root
// with bad UTF-8 is refused here). Overlong forms, surrogates and code points past U+10FFFF
// are refused too: they are not UTF-8, yet an overlong "\xE0\x80\xAF" (a '/') decodes to a
// character allowed in paths, and a root path would go to ZooKeeper as bytes that are not
// UTF-8 (found by tests/fuzz/fuzz_name).
bool next_code_point(std::string_view s, std::size_t& i, char32_t& cp) {
  auto b = static_cast<unsigned char>(s[i]);
  int extra = b < 0x80 ? 0 : (b >> 5) == 0x6 ? 1 : (b >> 4) == 0xE ? 2 : (b >> 3) == 0x1E ? 3 : -1;
  if (extra < 0 || (extra > 0 && i + extra >= s.size())) return false;
  cp = extra == 0 ? b : b & (0x3F >> extra);
  for (int k = 1; k <= extra; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) return false;
    cp = (cp << 6) | (c & 0x3F);
  }
  static constexpr char32_t smallest[] = {0, 0x80, 0x800, 0x10000};  // by number of extra bytes
  if (cp < smallest[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  i += extra + 1;
  return true;
}

// The characters ZooKeeper's PathUtils.validatePath refuses.
bool refused_by_zookeeper(char32_t c) {
  return c == 0 || (c >= 0x01 && c <= 0x1F) || (c >= 0x7F && c <= 0x9F) || (c >= 0xD800 && c <= 0xF8FF) ||
         (c >= 0xFFF0 && c <= 0xFFFF);
}

void check_component(std::string_view c, const std::string& what) {
  if (c.empty()) throw UsageError(what + " has an empty path component");
  if (c == "." || c == "..") throw UsageError(what + " has a '" + std::string(c) + "' path component");
  for (std::size_t i = 0; i < c.size();) {
    char32_t cp = 0;
    if (!next_code_point(c, i, cp)) throw UsageError(what + " is not valid UTF-8");
    if (refused_by_zookeeper(cp)) throw UsageError(what + " has a character ZooKeeper refuses in paths");
  }
}

}  // namespace

std::string root_path(std::string_view url_path) {
  const std::string what = "bad zookeeper URL: the root path";
  if (url_path.empty())
    throw UsageError("bad zookeeper URL: a root path is required (zookeeper://host:port/root)");
  if (url_path.back() == '/') throw UsageError(what + " ends with '/'");
  std::size_t start = 0;
  for (;;) {
    auto end = url_path.find('/', start);
    check_component(url_path.substr(start, end == std::string_view::npos ? end : end - start), what);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return "/" + std::string(url_path);
}

std::string node_name(std::string_view name) {
  const std::string what = "bad lock name for zookeeper: the name";
  if (name.find('/') != std::string_view::npos)
    throw UsageError(what + " has a '/' (a name is one node, as in Kazoo's paths)");
  if (name.empty() || name == "." || name == "..")
    throw UsageError(what + " is empty, '.' or '..', which ZooKeeper refuses as a node");
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (std::size_t i = 0; i < name.size();) {
    auto start = i;
    char32_t cp = 0;
    if (!next_code_point(name, i, cp)) throw UsageError(what + " is not valid UTF-8");
    if (refused_by_zookeeper(cp)) throw UsageError(what + " has a character ZooKeeper refuses in paths");
    if (cp == '%' || cp >= 0x10000) {
      for (auto k = start; k < i; ++k) {
        auto b = static_cast<unsigned char>(name[k]);
        out += '%';
        out += hex[b >> 4];
        out += hex[b & 0xF];
      }
    } else {
      out.append(name.substr(start, i - start));
    }
  }
  return out;
}

std::string lock_name(std::string_view node) {
  auto digit = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; };
  std::string out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (node[i] == '%' && i + 2 < node.size() && digit(node[i + 1]) >= 0 && digit(node[i + 2]) >= 0) {
      out += static_cast<char>(digit(node[i + 1]) * 16 + digit(node[i + 2]));
      i += 2;
    } else {
      out += node[i];
    }
  }
  return out;
}

std::optional<Contender> parse_contender(const std::string& child) {
  // <anything><marker><-?10 digits>, as Kazoo's contender regex.
  for (std::string_view marker : {lock_marker, read_marker}) {
    auto at = child.rfind(marker);
    if (at == std::string::npos) continue;
    std::string_view seq(child);
    seq.remove_prefix(at + marker.size());
    bool negative = !seq.empty() && seq.front() == '-';
    if (negative) seq.remove_prefix(1);
    if (seq.size() != 10 || !std::all_of(seq.begin(), seq.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::int64_t n = std::stoll(std::string(seq));
    return Contender{child, negative ? -n : n, marker == read_marker};
  }
  return std::nullopt;
}

std::vector<Contender> contenders(const std::vector<std::string>& children) {
  std::vector<Contender> v;
  for (const auto& c : children)
    if (auto k = parse_contender(c)) v.push_back(*k);
  std::sort(v.begin(), v.end(), [](const Contender& a, const Contender& b) { return a.sequence < b.sequence; });
  return v;
}

bool is_lease(const std::string& child) {
  return child.size() == 32 &&
         std::all_of(child.begin(), child.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::size_t blocker(const std::vector<Contender>& list, std::size_t me) {
  if (me == 0 || me >= list.size()) return npos;
  if (!list[me].shared) return me - 1;
  for (std::size_t i = me; i-- > 0;)
    if (!list[i].shared) return i;
  return npos;
}

std::vector<Contender> holders(const std::vector<Contender>& list) {
  std::vector<Contender> out;
  for (const auto& c : list) {
    if (!c.shared) {
      if (out.empty()) out.push_back(c);
      break;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace dblock::detail::zk
