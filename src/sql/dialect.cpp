#include "sql/dialect.hpp"

namespace dblock::detail::sql {

std::string render(std::string_view text, const TableName& table, std::string_view now_ms) {
  std::string out;
  out.reserve(text.size() + 64);
  for (std::size_t i = 0; i < text.size();) {
    auto replace = [&](std::string_view key, std::string_view value) {
      if (text.substr(i, key.size()) != key) return false;
      out += value;
      i += key.size();
      return true;
    };
    if (replace("${table}", table.qualified()) || replace("${table_name}", table.table) ||
        replace("${now_ms}", now_ms))
      continue;
    out += text[i++];
  }
  return out;
}

std::string with_markers(std::string_view text, std::size_t n, char marker) {
  std::string list;
  for (std::size_t i = 1; i <= n; ++i) {
    if (i > 1) list += ", ";
    list += marker;
    list += std::to_string(i);
  }
  std::string out(text);
  constexpr std::string_view key = "${names}";
  if (auto at = out.find(key); at != std::string::npos) out.replace(at, key.size(), list);
  return out;
}

Dialect Dialect::rendered(const TableName& t) const {
  Dialect d = *this;
  for (auto* s : {&d.holder, &d.renew, &d.release_hold, &d.insert_acquire, &d.insert_release,
                  &d.optimistic_read, &d.optimistic_take, &d.optimistic_reenter,
                  &d.optimistic_release, &d.list, &d.sweep, &d.force_release, &d.migration_lock, &d.history_create,
                  &d.session_wait, &d.ping, &d.for_update_create, &d.for_update_try,
                  &d.for_update_wait, &d.advisory_try, &d.advisory_wait, &d.advisory_unlock,
                  &d.advisory_wait_bounded, &d.fence_next, &d.sweep_pick, &d.sweep_delete, &d.migration_unlock,
                  &d.history_select, &d.history_insert, &d.drop_schema})
    *s = render(*s, t, now_ms);
  return d;
}

}  // namespace dblock::detail::sql
