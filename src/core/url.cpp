#include "core/url.hpp"

#include <algorithm>
#include <cctype>

#include "dblock/errors.hpp"

namespace dblock::detail {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s, std::string_view what) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    int hi = i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
    int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      throw UsageError("malformed URL: bad percent escape in the " + std::string(what));
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

HostPort parse_host_port(std::string_view s) {
  HostPort hp;
  std::string_view host = s, port;
  if (!s.empty() && s.front() == '[') {  // [ipv6]:port
    auto close = s.find(']');
    if (close == std::string_view::npos) throw UsageError("malformed URL: unclosed '[' in host");
    host = s.substr(1, close - 1);
    auto rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') throw UsageError("malformed URL: unexpected text after ']'");
      port = rest.substr(1);
    }
  } else if (auto colon = s.rfind(':'); colon != std::string_view::npos) {
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  if (host.empty()) throw UsageError("malformed URL: empty host");
  if (host.find(':') != std::string_view::npos && s.front() != '[')
    throw UsageError("malformed URL: an IPv6 address must be in brackets, e.g. [::1]:6379");
  if (s.back() == ':') throw UsageError("malformed URL: empty port");
  for (char c : host)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '/' || c == '@')
      throw UsageError("malformed URL: bad character in host");
  hp.host = std::string(host);
  if (!port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw UsageError("malformed URL: port must be a number from 1 to 65535");
    hp.port = std::stoi(std::string(port));
    if (hp.port < 1 || hp.port > 65535) throw UsageError("malformed URL: port must be a number from 1 to 65535");
  }
  return hp;
}

}  // namespace

namespace {

// `text` with the value of every query parameter whose name holds "password" (password,
// sslpassword, ...; any case, percent-encoded or not) replaced by ****.
std::string redact_query(const std::string& text) {
  auto q = text.find('?');
  if (q == std::string::npos) return text;
  std::string out = text.substr(0, q + 1);
  for (auto pos = q + 1;;) {
    auto amp = text.find('&', pos);
    std::string_view pair = std::string_view(text).substr(pos, amp == std::string::npos ? amp : amp - pos);
    auto eq = pair.find('=');
    std::string name;
    try {
      name = lower(percent_decode(pair.substr(0, eq), "parameter"));
    } catch (const UsageError&) {  // a malformed escape: judged as written
      name = lower(pair.substr(0, eq));
    }
    if (eq != std::string_view::npos && name.find("password") != std::string::npos)
      out.append(pair.substr(0, eq + 1)).append("****");
    else
      out.append(pair);
    if (amp == std::string::npos) return out;
    out += '&';
    pos = amp + 1;
  }
}

}  // namespace

std::string Url::redacted() const {
  if (password.empty()) return redact_query(original);
  // Replace whatever stands between the first ':' after "//" and the last '@' of the authority.
  auto start = original.find("//");
  if (start == std::string::npos) return redact_query(original);
  auto auth_end = original.find_first_of("/?", start + 2);
  auto at = original.rfind('@', auth_end == std::string::npos ? std::string::npos : auth_end);
  auto colon = original.find(':', start + 2);
  if (at == std::string::npos || colon == std::string::npos || colon > at) return scheme + "://****";
  return redact_query(original.substr(0, colon + 1) + "****" + original.substr(at));
}

Url parse_url(std::string_view text) {
  Url url;
  url.original = std::string(text);
  if (text.empty()) throw UsageError("malformed URL: empty");
  auto colon = text.find(':');
  if (colon == std::string_view::npos)  // no ':', so no password to hide
    throw UsageError("malformed URL '" + redact_query(std::string(text)) + "': expected scheme:..., e.g. sqlite:dblock.db");
  // Not echoed: "://user:password@host" (the scheme left out) would show the password.
  if (colon == 0) throw UsageError("malformed URL: no scheme before ':', expected scheme:..., e.g. sqlite:dblock.db");
  url.scheme = lower(text.substr(0, colon));
  for (char c : url.scheme)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.')
      throw UsageError("malformed URL: bad scheme");
  auto rest = text.substr(colon + 1);

  if (url.scheme == "sqlite") {
    // sqlite:PATH (relative or absolute, taken literally) or sqlite:///abs/path.
    if (rest.substr(0, 2) == "//") {
      if (rest.substr(0, 3) != "///")
        throw UsageError("malformed URL: a SQLite URL has no host; use sqlite:PATH or sqlite:///abs/path");
      rest = rest.substr(2);
    }
    if (rest.empty()) throw UsageError("malformed URL '" + url.original + "': no database file path");
    url.path = std::string(rest);
    return url;
  }

  if (rest.substr(0, 2) != "//")
    // Not parsed yet, so it cannot be redacted: say what is wrong without echoing it.
    throw UsageError("malformed URL: expected " + url.scheme + "://[user[:password]@]host[:port]/...");
  rest = rest.substr(2);
  auto query_at = rest.find('?');
  std::string_view query = query_at == std::string_view::npos ? std::string_view{} : rest.substr(query_at + 1);
  rest = rest.substr(0, query_at);
  auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) url.path = percent_decode(rest.substr(slash + 1), "path");
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    auto userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    auto pc = userinfo.find(':');
    url.user = percent_decode(userinfo.substr(0, pc), "user name");
    if (pc != std::string_view::npos) url.password = percent_decode(userinfo.substr(pc + 1), "password");
  }
  if (authority.empty()) throw UsageError("malformed URL '" + url.redacted() + "': no host");
  while (!authority.empty()) {
    auto comma = authority.find(',');
    url.hosts.push_back(parse_host_port(authority.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
    if (authority.empty()) throw UsageError("malformed URL '" + url.redacted() + "': empty host after ','");
  }
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (eq == 0 || pair.empty()) throw UsageError("malformed URL: bad query parameter");
    url.query[percent_decode(pair.substr(0, eq), "query")] =
        eq == std::string_view::npos ? std::string{} : percent_decode(pair.substr(eq + 1), "query");
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return url;
}

}  // namespace dblock::detail
