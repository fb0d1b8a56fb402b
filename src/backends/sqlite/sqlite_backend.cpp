// The embedded default: SQLite through the generic SqlBackend. It offers the lease
// strategies only: SQLite has no row locks or named locks, and holding its one database
// write lock for a whole critical section would stall every other lock in the file.
#include "backends/sqlite/sqlite_backend.hpp"

#include <filesystem>

#include "backends/sqlite/sqlite_dialect.hpp"
#include "backends/sqlite/sqlite_connection.hpp"
#include "backends/sqlite/wake_file.hpp"
#include "sql/sql_backend.hpp"

namespace dblock::detail {

std::unique_ptr<Backend> open_sqlite(const Url& url, const ClientOptions& options) {
  std::string path = url.path;
  bool auto_migrate = options.auto_migrate.value_or(true);
  if (auto q = path.find('?'); q != std::string::npos) {
    auto query = path.substr(q + 1);
    path.resize(q);
    if (query == "auto_migrate=false" || query == "auto_migrate=0") auto_migrate = false;
    else if (query == "auto_migrate=true" || query == "auto_migrate=1") auto_migrate = true;
    else throw UsageError("bad SQLite URL '" + url.original + "': the only parameter is auto_migrate=true|false");
  }
  if (path.empty()) throw UsageError("bad SQLite URL '" + url.original + "': no database file path");
  namespace fs = std::filesystem;
  std::error_code ec;
  auto dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec))
    throw UsageError("bad SQLite URL '" + url.original + "': directory '" + dir.string() + "' does not exist");
  if (fs::is_directory(path, ec))
    throw UsageError("bad SQLite URL '" + url.original + "': '" + path + "' is a directory");

  auto timeout = options.statement_timeout;
  auto table = parse_table_name(options.table);
  auto backend = std::make_unique<sqldb::SqlBackend>(
      sqldb::sqlite_dialect(), table, [path, timeout] { return std::make_unique<sqldb::SqliteConnection>(path, timeout); },
      options, sqldb::WakeFile::open(path + "-" + table.qualified() + ".wake", path));
  backend->start(auto_migrate);
  return backend;
}

}  // namespace dblock::detail
