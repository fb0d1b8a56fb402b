// Backend URLs: scheme://[user[:password]@]host[:port][,host:port...][/path][?k=v&...],
// plus SQLite's own forms sqlite:PATH and sqlite:///abs/path.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dblock::detail {

struct HostPort {
  std::string host;
  int port = 0;  // 0: the backend's default
};

struct Url {
  std::string scheme;    // lower case
  std::string user;      // percent-decoded
  std::string password;  // percent-decoded; never printed
  std::vector<HostPort> hosts;
  std::string path;      // sqlite: the file path; others: decoded path without the leading '/'
  std::map<std::string, std::string> query;
  std::string original;  // as given

  // The URL with the password replaced by ****, safe for messages and logs.
  std::string redacted() const;
};

// Throws UsageError with a one-line reason (never echoing a password).
Url parse_url(std::string_view text);

}  // namespace dblock::detail
