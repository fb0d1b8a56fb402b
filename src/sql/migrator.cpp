#include "sql/migrator.hpp"

#include <algorithm>
#include <chrono>
#include <map>

namespace dblock::detail::sqldb {
namespace {

// "1.2" -> {1, 2}, for numeric ordering as Flyway does.
std::vector<long long> version_key(const std::string& v) {
  std::vector<long long> key;
  std::size_t i = 0;
  while (i < v.size()) {
    auto j = v.find('.', i);
    key.push_back(std::stoll(v.substr(i, j - i)));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return key;
}

// The version of a script named as Flyway names them, V<version>__<description>.sql with
// <version> groups of 1 to 9 digits separated by '.' or '_'; "" for any other name.
// (Written out: std::regex made this the slowest file of the library to compile.)
std::string script_version(const std::string& script) {
  const std::string ext = ".sql";
  auto sep = script.find("__");
  if (script.empty() || script[0] != 'V' || sep == std::string::npos) return "";
  if (script.size() < sep + 2 + 1 + ext.size() || script.compare(script.size() - ext.size(), ext.size(), ext) != 0)
    return "";  // no description, or not .sql
  std::size_t digits = 0;  // in the current group
  for (std::size_t i = 1; i < sep; ++i) {
    char c = script[i];
    if (c >= '0' && c <= '9') {
      if (++digits > 9) return "";
    } else if ((c == '.' || c == '_') && digits > 0) {
      digits = 0;
    } else {
      return "";
    }
  }
  if (digits == 0) return "";  // no version, or it ends with a separator
  return script.substr(1, sep - 1);
}

}  // namespace

std::vector<Migration> migrations_for(const std::string& dialect, const std::vector<MigrationFile>& files) {
  std::vector<Migration> out;
  for (const auto& f : files) {
    if (f.dialect != dialect) continue;
    Migration m;
    m.version = script_version(f.script);
    if (m.version.empty())
      throw InternalError("migration '" + f.script + "' is not named V<version>__<description>.sql");
    auto sep = f.script.find("__");
    auto ext = f.script.size() - 4;
    std::replace(m.version.begin(), m.version.end(), '_', '.');
    m.description = f.script.substr(sep + 2, ext - sep - 2);
    std::replace(m.description.begin(), m.description.end(), '_', ' ');
    m.script = f.script;
    m.text = f.text;
    m.checksum = flyway_checksum(f.text);
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(),
            [](const Migration& a, const Migration& b) { return version_key(a.version) < version_key(b.version); });
  return out;
}

std::vector<std::string> migrate(Connection& s, const Dialect& d, const Dialect& raw, const TableName& table,
                                 const std::vector<Migration>& migrations, const std::string& installed_by) {
  // A lock that outlives the transaction (MySQL's GET_LOCK) is released on every way out.
  struct Unlock {
    Connection& s;
    const std::string& sql;
    ~Unlock() {
      if (sql.empty() || !s.usable()) return;
      try {
        s.run(sql);
      } catch (...) {  // the connection is going away: the server frees the lock with it
      }
    }
  } unlock{s, d[Statement::migration_unlock]};
  Transaction tx(s);  // DDL rolls back with it where the database can
  if (d.offers(Statement::migration_lock)) {  // SQLite: BEGIN IMMEDIATE already serialises
    auto r = s.run(d[Statement::migration_lock]);
    if (!r.rows.empty() && !r.rows[0].empty() && std::holds_alternative<std::int64_t>(r.rows[0][0]) &&
        std::get<std::int64_t>(r.rows[0][0]) == 0)
      throw TimeoutError("another `dblock migrate` of table " + table.qualified() + " is still running");
  }
  s.run(d[Statement::history_create]);
  std::map<std::string, std::int64_t> applied;
  std::int64_t rank = 0;
  for (const auto& row : s.run(d[Statement::history_select]).rows) {
    auto version = as_text(row[0]);
    auto script = as_text(row[1]);
    if (as_int(row[3]) == 0)
      throw SchemaError("migration " + script + " failed earlier on table " + table.qualified() +
                        ": repair it by hand and delete its row from " + table.qualified() + "_schema_history");
    applied[version] = as_int(row[2]);
    // Flyway numbers a new row MAX(installed_rank) + 1: a row deleted by hand (to re-run a
    // script) leaves a hole, and counting rows would hand out a rank already taken.
    rank = std::max(rank, as_int(row[4]));
  }
  for (const auto& m : migrations) {
    auto it = applied.find(m.version);
    if (it != applied.end() && static_cast<std::int32_t>(it->second) != m.checksum)
      throw SchemaError("migration " + m.script + " changed after it was applied to " + table.qualified() +
                        " (checksum " + std::to_string(it->second) + " recorded, " + std::to_string(m.checksum) +
                        " now): refusing to migrate");
  }
  std::vector<std::string> done;
  for (const auto& m : migrations) {
    if (applied.count(m.version)) continue;
    auto start = std::chrono::steady_clock::now();
    s.run_script(render(m.text, table, raw.now_ms));
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    s.run(d[Statement::history_insert], {++rank, m.version, m.description, m.script, std::int64_t{m.checksum}, installed_by,
                             std::int64_t{ms.count()}});
    done.push_back(m.script);
  }
  tx.commit();
  return done;
}

}  // namespace dblock::detail::sqldb
