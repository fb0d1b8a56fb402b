// parse_url and Url::redacted (src/core/url.hpp) on hostile input, for every scheme.
// Properties:
//  - bad input throws UsageError and nothing else;
//  - a parsed URL keeps its invariants (lower-case scheme, hosts non-empty, ports 0..65535);
//  - it re-parses from its canonical form to the same fields;
//  - an etcd URL's key prefix (src/backends/etcd/etcd_keys.hpp) is refused with UsageError or
//    is "/" + the path, with no empty component and no trailing '/';
//  - a password never shows in redacted() nor in any error message: the input's password
//    (located by the grammar, independently of the parser) is replaced by a canary, which
//    must then appear nowhere, also when the URL is broken around it to provoke errors.
#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/etcd/etcd_keys.hpp"
#include "core/url.hpp"
#include "fuzz_check.hpp"

using dblock::detail::parse_url;
using dblock::detail::Url;
using fuzz::accepts;
using fuzz::Authority;
using fuzz::canary;
using fuzz::contains;
using fuzz::locate_password;

namespace {

const char* const schemes[] = {"sqlite", "postgresql", "postgres", "mysql", "mariadb", "redis", "redlock", "zookeeper",
                               "etcd", "etcd+https"};

std::string percent_encode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += "0123456789ABCDEF"[c >> 4];
      out += "0123456789ABCDEF"[c & 0xF];
    }
  }
  return out;
}

// The URL written back from its fields, everything percent-encoded that may be.
std::string canonical(const Url& u) {
  if (u.scheme == "sqlite") return (u.path.front() == '/' ? "sqlite://" : "sqlite:") + u.path;
  std::string s = u.scheme + "://";
  if (!u.user.empty() || !u.password.empty())
    s += percent_encode(u.user) + (u.password.empty() ? "" : ":" + percent_encode(u.password)) + "@";
  for (std::size_t i = 0; i < u.hosts.size(); ++i) {
    const auto& h = u.hosts[i];
    if (i) s += ",";
    bool brackets = h.host.find(':') != std::string::npos || h.host.front() == '[';
    s += brackets ? "[" + h.host + "]" : h.host;
    if (h.port) s += ":" + std::to_string(h.port);
  }
  if (!u.path.empty()) s += "/" + percent_encode(u.path);
  char sep = '?';
  for (const auto& [k, v] : u.query) {
    s += sep + percent_encode(k) + "=" + percent_encode(v);
    sep = '&';
  }
  return s;
}

bool same_fields(const Url& a, const Url& b) {
  if (a.hosts.size() != b.hosts.size()) return false;
  for (std::size_t i = 0; i < a.hosts.size(); ++i)
    if (a.hosts[i].host != b.hosts[i].host || a.hosts[i].port != b.hosts[i].port) return false;
  return a.scheme == b.scheme && a.user == b.user && a.password == b.password && a.path == b.path &&
         a.query == b.query;
}

void check_invariants(const Url& u) {
  FUZZ_CHECK(!u.scheme.empty());
  for (char c : u.scheme) FUZZ_CHECK(!(c >= 'A' && c <= 'Z'));
  if (u.scheme == "sqlite") {
    FUZZ_CHECK(!u.path.empty() && u.hosts.empty() && u.user.empty() && u.password.empty() && u.query.empty());
    return;
  }
  FUZZ_CHECK(!u.hosts.empty());
  for (const auto& h : u.hosts) {
    FUZZ_CHECK(!h.host.empty());
    FUZZ_CHECK(h.port >= 0 && h.port <= 65535);
    FUZZ_CHECK(h.host.find_first_of("/@, \t\n") == std::string::npos);
  }
  for (const auto& [k, v] : u.query) FUZZ_CHECK(!k.empty());
}

// The canary, in place of the input's password, must not leak whether the URL parses or not.
void check_password_hidden(const std::string& text) {
  // An input that spells the canary itself (libFuzzer learns it from the comparisons) would
  // show it in the path or query legitimately. The canary has no ':' or '@', so it cannot
  // straddle the password's edges.
  Authority a;
  if (contains(text, canary) || !locate_password(text, a)) return;
  std::string secret = text.substr(0, a.password_begin) + canary + text.substr(a.at);
  auto shift = canary.size() - (a.at - a.password_begin);
  Url u;
  std::string error;
  if (accepts([&] { u = parse_url(secret); }, &error)) {
    if (u.scheme != "sqlite") FUZZ_CHECK(u.password == canary);
    FUZZ_CHECK(!contains(u.redacted(), canary));
  } else {
    FUZZ_CHECK(!contains(error, canary));
  }
  // Broken around the password, to reach the error messages that quote the URL.
  auto at = a.at + shift, end = a.end + shift;
  for (const std::string& broken : {secret.substr(0, end) + "," + secret.substr(end),          // empty host after ','
                                    secret.substr(0, at + 1) + secret.substr(end),              // no host
                                    secret.substr(0, at + 1) + "h:99999" + secret.substr(end),  // bad port
                                    secret.substr(0, end) + "?=" + secret.substr(end)}) {       // bad query
    if (!accepts([&] { u = parse_url(broken); }, &error)) FUZZ_CHECK(!contains(error, canary));
    else FUZZ_CHECK(!contains(u.redacted(), canary));
  }
}

void check_etcd_prefix(const Url& u) {
  std::string root;
  if (!accepts([&] { root = dblock::detail::etcd::key_root(u.path); })) return;
  FUZZ_CHECK(root == "/" + u.path);
  FUZZ_CHECK(root.size() > 1 && root.back() != '/');
  FUZZ_CHECK(root.find("//") == std::string::npos);
}

void check_url(const std::string& text) {
  Url u;
  if (accepts([&] { u = parse_url(text); })) {
    check_invariants(u);
    if (u.scheme == "etcd") check_etcd_prefix(u);
    FUZZ_CHECK(u.original == text);
    Url again;
    auto form = canonical(u);
    FUZZ_CHECK(accepts([&] { again = parse_url(form); }));
    FUZZ_CHECK(same_fields(u, again));
    FUZZ_CHECK(canonical(again) == form);
    if (u.password.empty()) FUZZ_CHECK(u.redacted() == text);
  }
  check_password_hidden(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  check_url(text);
  // The same bytes after each scheme in turn (chosen by the first byte), so that every
  // scheme's branch sees every kind of body.
  if (size > 0) {
    auto scheme = schemes[data[0] % (sizeof schemes / sizeof *schemes)];
    check_url(std::string(scheme) + "://" + text.substr(1));
    check_url(std::string(scheme) + ":" + text.substr(1));
  }
  return 0;
}
