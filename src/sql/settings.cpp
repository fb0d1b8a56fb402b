#include "sql/settings.hpp"

namespace dblock::detail::sql {

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

}  // namespace dblock::detail::sql
