// Keeping the server's password out of sight: the URL read from a private file, and usage
// errors with anything that looks like a password masked.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <regex>

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

std::string redact_secrets(const std::string& text) {
  // user:password@ after "://" (the password runs to the last '@' before a space or '/'),
  // then name=value pairs whose name holds "password" (password, sslpassword, ...).
  static const std::regex userinfo(R"((://[^\s/:@]*:)[^\s/]*@)");
  static const std::regex param(R"(([?&][^\s=&]*password[^\s=&]*=)[^\s&]*)", std::regex::icase);
  return std::regex_replace(std::regex_replace(text, userinfo, "$1****@"), param, "$1****");
}

}  // namespace dblock::cli
