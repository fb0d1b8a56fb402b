// SQLite: what makes a committed grant survive a crash or power loss. dblock sets WAL and
// synchronous=FULL on every connection it opens (SqliteConnection); this reads back what the
// connection has, which is what a file system or build that refuses WAL leaves.
#include "backends/sqlite/sqlite_dialect.hpp"
#include "sql/settings.hpp"

namespace dblock::detail::sqldb {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

SettingCheck journal_mode_check(const std::optional<std::string>& mode) {
  if (!mode) return {"journal_mode", "", Verdict::unknown, "could not be read"};
  if (*mode == "off" || *mode == "memory")
    return {"journal_mode", *mode, Verdict::breaks_exclusion,
            "a crash in the middle of a transaction can corrupt the database: the lock table with it"};
  if (*mode == "wal") return {"journal_mode", *mode, Verdict::ok, "writers commit to the write-ahead log"};
  return {"journal_mode", *mode, Verdict::ok,
          "a rollback journal (WAL was not available): commits are durable with synchronous=FULL, but readers wait "
          "for writers"};
}

SettingCheck synchronous_check(const std::optional<std::string>& level, const std::optional<std::string>& mode) {
  if (!level) return {"synchronous", "", Verdict::unknown, "could not be read"};
  static const char* names[] = {"OFF", "NORMAL", "FULL", "EXTRA"};
  int n = level->size() == 1 && (*level)[0] >= '0' && (*level)[0] <= '3' ? (*level)[0] - '0' : -1;
  std::string value = n >= 0 ? names[n] : *level;
  if (n == 0)
    return {"synchronous", value, Verdict::breaks_exclusion,
            "nothing is flushed: an OS crash or power loss can corrupt the database or lose acknowledged grants"};
  if (n == 1 && mode && *mode == "wal")
    return {"synchronous", value, Verdict::weakens_exclusion,
            "an OS crash or power loss can lose the last grants acknowledged: their holders run on while the lock "
            "is free again, and their fences can be handed out again"};
  if (n == 1)
    return {"synchronous", value, Verdict::weakens_exclusion,
            "with a rollback journal, a power loss at the wrong moment can corrupt the database"};
  if (n >= 2) return {"synchronous", value, Verdict::ok, "every commit is flushed to disk before it is acknowledged"};
  return {"synchronous", value, Verdict::unknown, "an unexpected value"};
}

}  // namespace

std::vector<SettingCheck> sqlite_settings(Connection& s) {
  auto mode = read_setting(s, "PRAGMA journal_mode");
  if (mode) mode = lower(*mode);
  auto level = read_setting(s, "PRAGMA synchronous");
  return {synchronous_check(level, mode), journal_mode_check(mode)};
}

}  // namespace dblock::detail::sqldb
