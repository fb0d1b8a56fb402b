// Keeping the server's password out of sight: the URL read from a private file, and usage
// errors with anything that looks like a password masked.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "cli/cli.hpp"

namespace dblock::cli {

std::string Common::server_url() const {
  if (url_file.empty()) return url;
  const std::string where = "--url-file " + url_file;
  int fd = ::open(url_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError(where + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw UsageError(where + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw UsageError(where + ": not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw UsageError(where + ": others may read or write it (mode " + mode + "): chmod 600 " + url_file);
  }
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw UsageError(where + ": " + std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > 65536) throw UsageError(where + ": longer than 64 KiB, not a URL");
  }
  text = text.substr(0, text.find('\n'));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.erase(0, 1);
  if (text.empty()) throw UsageError(where + ": the first line is empty");
  return text;
}

namespace {

bool ends_value(char c) { return std::isspace(static_cast<unsigned char>(c)) || c == '&' || c == '/'; }

}  // namespace

// One pass each, no regular expression: the text is whatever the user typed, of any length.
std::string redact_secrets(const std::string& text) {
  // user:password@ after "://": the password runs from the first ':' to the last '@' of the
  // authority (which ends at a space or '/').
  std::string out;
  std::size_t from = 0;
  for (auto scheme = text.find("://"); scheme != std::string::npos; scheme = text.find("://", from)) {
    const auto start = scheme + 3;
    auto end = start;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) && text[end] != '/') ++end;
    const auto at = end > start ? text.rfind('@', end - 1) : std::string::npos;
    const auto colon = text.find(':', start);
    if (at != std::string::npos && at >= start && colon < at) {
      out.append(text, from, colon + 1 - from).append("****");
      from = at;
    } else {
      out.append(text, from, end - from);
      from = end;
    }
  }
  out.append(text, from, std::string::npos);
  // name=value after '?' or '&' whose name holds "password" (password, sslpassword, ...).
  std::string masked;
  for (std::size_t i = 0; i < out.size();) {
    masked += out[i];
    if (out[i++] != '?' && out[i - 1] != '&') continue;
    auto eq = i;
    while (eq < out.size() && out[eq] != '=' && !ends_value(out[eq]) && out[eq] != '?') ++eq;
    if (eq >= out.size() || out[eq] != '=') continue;
    std::string name = out.substr(i, eq - i);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name.find("password") == std::string::npos) continue;
    masked.append(out, i, eq + 1 - i).append("****");
    i = eq + 1;
    while (i < out.size() && !std::isspace(static_cast<unsigned char>(out[i])) && out[i] != '&') ++i;
  }
  return masked;
}

}  // namespace dblock::cli
