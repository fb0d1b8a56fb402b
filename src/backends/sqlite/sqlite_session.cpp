#include "backends/sqlite/sqlite_session.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

namespace dblock::detail::sql {

// Every SQLite error becomes a dblock error here, and nowhere else.
void SqliteSession::fail(const std::exception& e) {
  auto* se = dynamic_cast<const SQLite::Exception*>(&e);
  std::string msg = e.what();
  int code = se ? se->getErrorCode() : SQLITE_ERROR;
  switch (code) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw TimeoutError("sqlite: database '" + path_ + "' stayed locked past the statement timeout");
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
    case SQLITE_IOERR:
    case SQLITE_FULL:
      usable_ = false;
      throw UnavailableError("sqlite: cannot use database '" + path_ + "': " + msg);
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      usable_ = false;
      throw UnavailableError("sqlite: '" + path_ + "' is not a usable database: " + msg);
    default:
      break;
  }
  if (msg.find("no such table") != std::string::npos)
    throw SchemaError("sqlite: the lock table is missing in '" + path_ + "' (" + msg + "): run `dblock migrate`");
  throw InternalError("sqlite: " + msg);
}

SqliteSession::SqliteSession(const std::string& path, std::chrono::milliseconds busy_timeout) : path_(path) {
  try {
    db_ = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE,
                                             static_cast<int>(busy_timeout.count()));
    // WAL lets readers run beside the one writer; synchronous=FULL makes every commit
    // durable, so a fence handed out is never handed out again after a power loss.
    db_->exec("PRAGMA journal_mode=WAL");
    db_->exec("PRAGMA synchronous=FULL");
  } catch (const std::exception& e) {
    fail(e);
  }
}

SqliteSession::~SqliteSession() = default;

SQLite::Statement& SqliteSession::prepared(const std::string& sql) {
  auto& slot = cache_[sql];
  if (!slot) slot = std::make_unique<SQLite::Statement>(*db_, sql);
  return *slot;
}

Result SqliteSession::run(const std::string& sql, const std::vector<Value>& params) {
  SQLite::Statement* st = nullptr;
  try {
    st = &prepared(sql);
    for (std::size_t i = 0; i < params.size(); ++i) {
      int index = static_cast<int>(i + 1);
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::nullptr_t>) st->bind(index);
            else if constexpr (std::is_same_v<T, std::int64_t>) st->bind(index, static_cast<int64_t>(v));
            else st->bind(index, v);
          },
          params[i]);
    }
    Result r;
    while (st->executeStep()) {
      Row row;
      for (int c = 0; c < st->getColumnCount(); ++c) {
        auto col = st->getColumn(c);
        if (col.isNull()) row.emplace_back(nullptr);
        else if (col.isInteger()) row.emplace_back(static_cast<std::int64_t>(col.getInt64()));
        else row.emplace_back(col.getString());
      }
      r.rows.push_back(std::move(row));
    }
    r.affected = db_->getChanges();
    st->reset();  // a statement left open would pin a read snapshot
    return r;
  } catch (const std::exception& e) {
    if (st) try {
        st->reset();
      } catch (...) {
      }
    fail(e);
  }
}

void SqliteSession::run_script(const std::string& sql) {
  try {
    db_->exec(sql);
  } catch (const std::exception& e) {
    fail(e);
  }
}

void SqliteSession::begin() { run_script("BEGIN IMMEDIATE"); }
void SqliteSession::commit() { run_script("COMMIT"); }
void SqliteSession::rollback() noexcept {
  try {
    db_->exec("ROLLBACK");
  } catch (...) {  // nothing to roll back (already ended): fine
  }
}

}  // namespace dblock::detail::sql
