// Applies a dialect's migrations to one lock table, recording each in a Flyway-style history
// table with its checksum. Idempotent; refuses to go on when an applied script has changed.
#pragma once

#include <string>
#include <vector>

#include "core/validate.hpp"
#include "sql/dialect.hpp"
#include "sql/migration_files.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sqldb {

struct Migration {
  std::string version;      // "1", "1.1"
  std::string description;  // "create dblock locks"
  std::string script;
  std::string text;
  std::int32_t checksum;
};

// The dialect's migrations, sorted by version; throws InternalError on a misnamed file.
std::vector<Migration> migrations_for(const std::string& dialect, const std::vector<MigrationFile>& files);

// Returns the scripts applied now (empty: already up to date). `d` is the rendered dialect.
std::vector<std::string> migrate(Connection& s, const Dialect& d, const Dialect& raw, const TableName& table,
                                 const std::vector<Migration>& migrations, const std::string& installed_by);

}  // namespace dblock::detail::sqldb
