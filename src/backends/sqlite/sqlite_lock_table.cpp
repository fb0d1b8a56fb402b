// dblock::sqlite::LockTable: the caller's SQLiteCpp connection, in the transaction the caller
// began, as a Connection (SqliteConnection borrowing it), under the locks written once in
// sql/in_transaction.cpp.
#include <sqlite3.h>

#include "backends/sqlite/sqlite_connection.hpp"
#include "backends/sqlite/sqlite_dialect.hpp"
#include "dblock/sqlite.hpp"
#include "sql/lock_table_impl.hpp"

namespace dblock {
namespace detail::sqldb {

template <>
struct CallerTransaction<SQLite::Database> {
  static const Dialect& dialect() { return sqlite_dialect(); }
  static std::unique_ptr<Connection> adapt(SQLite::Database& db, const LockTableOptions&) {
    // Outside a transaction each statement commits on its own: a lock would end with it.
    if (sqlite3_get_autocommit(db.getHandle()))
      throw UsageError("sqlite: a lock in the caller's transaction needs an open transaction (BEGIN IMMEDIATE)");
    return std::make_unique<SqliteConnection>(db);
  }
};

}  // namespace detail::sqldb

// Exported by the extern declaration in the public header (an attribute here is ignored).
template class LockTable<SQLite::Database>;

}  // namespace dblock
