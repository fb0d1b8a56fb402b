#include "sql/dialect.hpp"

#include <algorithm>

#include "dblock/errors.hpp"

namespace dblock::detail::sqldb {

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
    if (constexpr std::string_view until = "${until:"; text.substr(i, until.size()) == until) {
      const auto end = text.find('}', i);
      if (end == std::string_view::npos) throw InternalError("render: ${until: without its }");
      const std::string row(text.substr(i + until.size(), end - i - until.size()));
      // Standard SQL, the same in every dialect that has Client rows (their statements alone
      // use it): the row's own time, or its Client row's when that is later. A row naming
      // none (NULL, or '' where the column is fixed-width) costs no lookup.
      out += render("CASE WHEN " + row + ".client IS NULL OR " + row + ".client = '' THEN " + row +
                    ".valid_until ELSE COALESCE((SELECT "
                    "CASE WHEN c.valid_until > " + row + ".valid_until THEN c.valid_until ELSE " + row +
                    ".valid_until END FROM ${table}_clients AS c WHERE c.id = " + row + ".client), " + row +
                    ".valid_until) END",
                    table, now_ms);
      i = end + 1;
      continue;
    }
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

namespace {

// For check()'s message; the size check catches a statement added without its name.
constexpr std::array<std::string_view, static_cast<std::size_t>(Statement::count_)> statement_names{
    "holder",           "renew",           "renew_batch",      "client_create",    "client_renew",    "client_detach",
    "insert_acquire",   "insert_release",  "insert_acquire_unmarked", "insert_release_unmarked", "release_after",
    "optimistic_read",
    "optimistic_take",  "optimistic_release", "optimistic_take_unmarked", "optimistic_release_unmarked",
    "insert_handover", "optimistic_handover", "session_wait",
    "ping",             "for_update_create", "for_update_try", "for_update_wait",
    "for_update_try_shared", "for_update_wait_shared", "fence_next",       "fence_next_held",
    "advisory_try",     "advisory_wait",   "advisory_unlock",  "advisory_wait_bounded",
    "advisory_try_shared", "advisory_wait_shared", "advisory_unlock_shared", "advisory_wait_bounded_shared",
    "shared_acquire",   "shared_busy",     "shared_renew",     "shared_release",        "shared_release_after",
    "writer_mark",      "writer_unmark",   "sweep_holders",
    "queue_join",       "queue_leave",     "wait_mark",       "handed_free",     "queue_ahead",      "handed_check",     "sweep_queue",
    "lock_in",
    "check_in",         "list",
    "sweep",            "sweep_pick",      "sweep_delete",     "force_release",         "migration_lock",
    "migration_unlock", "history_create",  "history_select",   "history_insert",        "drop_schema"};

bool required(const Dialect& d, Statement s) {
  auto offers = [&](Strategy x) { return std::find(d.strategies.begin(), d.strategies.end(), x) != d.strategies.end(); };
  switch (s) {
    case Statement::advisory_wait_bounded:
    case Statement::advisory_try_shared:
    case Statement::advisory_wait_shared:
    case Statement::advisory_unlock_shared:
    case Statement::advisory_wait_bounded_shared:
    case Statement::for_update_try_shared:
    case Statement::for_update_wait_shared:
    case Statement::fence_next_held:
    case Statement::shared_acquire:
    case Statement::shared_busy:
    case Statement::insert_handover:
    case Statement::optimistic_handover:
    case Statement::queue_join:
    case Statement::queue_ahead:
    case Statement::insert_acquire_unmarked:
    case Statement::insert_release_unmarked:
    case Statement::optimistic_take_unmarked:
    case Statement::optimistic_release_unmarked:
    case Statement::wait_mark:
    case Statement::handed_check:
    case Statement::handed_free:
    case Statement::lock_in:
    case Statement::check_in:
    case Statement::migration_lock:
    case Statement::migration_unlock:
    case Statement::client_create:
    case Statement::client_renew:
    case Statement::client_detach:
      return false;
    case Statement::session_wait:
    case Statement::ping:
      return offers(Strategy::for_update) || offers(Strategy::advisory);
    case Statement::for_update_create:
    case Statement::for_update_try:
    case Statement::for_update_wait:
    case Statement::fence_next:
      return offers(Strategy::for_update);
    case Statement::advisory_try:
    case Statement::advisory_wait:
    case Statement::advisory_unlock:
      return offers(Strategy::advisory);
    case Statement::sweep:
      return !d.offers(Statement::sweep_pick);
    case Statement::sweep_pick:
    case Statement::sweep_delete:
      return !d.offers(Statement::sweep);
    case Statement::shared_renew:  // the rest of the shapes, once shared_acquire is given
    case Statement::shared_release:
    case Statement::shared_release_after:
    case Statement::writer_mark:
    case Statement::writer_unmark:
    case Statement::sweep_holders:
      return d.offers(Statement::shared_acquire);
    case Statement::queue_leave:
    case Statement::sweep_queue:
      return d.offers(Statement::queue_join);
    default:
      return true;
  }
}

}  // namespace

void Dialect::check() const {
  std::string missing;
  for (std::size_t i = 0; i < text.size(); ++i)
    if (text[i].empty() && required(*this, static_cast<Statement>(i)))
      missing += (missing.empty() ? "" : ", ") + std::string(statement_names[i]);
  if (!settings) missing += (missing.empty() ? "" : ", ") + std::string("settings (the reader)");
  if (!missing.empty()) throw InternalError("the " + name + " dialect lacks statements: " + missing);
}

Dialect Dialect::rendered(const TableName& t) const {
  Dialect d = *this;
  for (auto& s : d.text) s = render(s, t, now_ms);
  return d;
}

}  // namespace dblock::detail::sqldb
