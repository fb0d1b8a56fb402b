#include "core/transport_check.hpp"

namespace dblock::detail {

namespace {

bool loopback(const std::string& host) {
  if (host.empty() || host[0] == '/') return true;  // the client's default (a local socket), or a socket's path
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace

bool on_this_machine(const Url& url) {
  if (url.query.count("socket")) return true;  // MySQL's Unix socket
  // libpq's host parameter overrides the URL's hosts (a list, or a socket directory).
  if (auto it = url.query.find("host"); it != url.query.end()) {
    std::size_t from = 0;
    for (;;) {
      auto comma = it->second.find(',', from);
      if (!loopback(it->second.substr(from, comma - from))) return false;
      if (comma == std::string::npos) return true;
      from = comma + 1;
    }
  }
  for (const auto& h : url.hosts)
    if (!loopback(h.host)) return false;
  return true;
}

SettingCheck transport_check(const Url& url, const Transport& t) {
  SettingCheck c;
  c.setting = "transport";
  const bool local = on_this_machine(url);
  if (t.tls.empty()) {
    c.value = "plaintext";
  } else {
    c.value = t.tls + (t.name_verified    ? ", server verified (chain and name)"
                       : t.chain_verified ? ", server's chain verified (not its name)"
                                          : ", server not verified");
  }
  if (local && !t.chain_verified) {
    c.verdict = Verdict::ok;
    c.meaning = "the server is on this machine: nothing crosses a network";
  } else if (t.tls.empty()) {
    c.verdict = Verdict::exposed;
    c.meaning = "locks, fences and credentials cross the network readable and forgeable: turn TLS on (docs/SECURITY.md)";
  } else if (!t.chain_verified) {
    c.verdict = Verdict::exposed;
    c.meaning = "encrypted, but to whoever answers: a man in the middle reads and forges it; give a CA to verify the "
                "server (docs/SECURITY.md)";
  } else {
    c.verdict = Verdict::ok;
    c.meaning = t.name_verified ? "encrypted, to the server its certificate names"
                                : "encrypted, to a server whose certificate chains to the given CA";
  }
  return c;
}

}  // namespace dblock::detail
