#include "sql/settings.hpp"

namespace dblock::detail::sqldb {

std::optional<std::string> read_setting(Connection& s, const std::string& sql) {
  try {
    auto r = s.run(sql);
    if (r.rows.empty() || r.rows.front().empty()) return std::nullopt;
    return as_text(r.rows.front().front());
  } catch (const Error&) {
    if (!s.usable()) throw;  // the server went away: that is the command's error, not a verdict
    return std::nullopt;
  }
}

SettingCheck isolation_verdict(const std::string& name, const std::optional<std::string>& configured,
                               const std::optional<std::string>& running, const std::string& read_committed,
                               const std::string& otherwise) {
  if (!configured || !running) return {name, configured.value_or(""), Verdict::unknown, "could not be read"};
  if (*running != read_committed)
    return {name, *configured, Verdict::unknown,
            "dblock's connection runs " + *running + ", not " + read_committed + ": " + otherwise};
  if (*configured == read_committed)
    return {name, *configured, Verdict::ok,
            "dblock's statements run " + read_committed + ", as it also sets itself"};
  return {name, *configured, Verdict::ok,
          "not used by dblock: it sets " + read_committed + " on its own connections (this one runs " + *running +
              ")"};
}

}  // namespace dblock::detail::sqldb
