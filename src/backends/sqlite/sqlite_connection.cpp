#include "backends/sqlite/sqlite_connection.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <sqlite3.h>

#include <algorithm>
#include <thread>

namespace dblock::detail::sqldb {

// SQLite waits in its busy handler for up to the busy timeout, but a few paths return
// SQLITE_BUSY at once without calling it (opening a WAL database while another connection's
// last close checkpoints and removes the WAL; the WAL-index header being rebuilt). Outside an
// explicit transaction nothing was done yet, so such an early BUSY is retried here until the
// same timeout; one that comes after the timeout is real.
template <class F>
auto SqliteConnection::busy_retried(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  for (auto pause = std::chrono::milliseconds{1};; pause = std::min(pause * 2, std::chrono::milliseconds{20})) {
    try {
      return f();
    } catch (const SQLite::Exception& e) {
      int code = e.getErrorCode();
      bool early = std::chrono::steady_clock::now() - start + pause < busy_timeout_;
      bool in_transaction = db_ && !sqlite3_get_autocommit(db_->getHandle());
      if ((code != SQLITE_BUSY && code != SQLITE_LOCKED) || in_transaction || !early) throw;
      std::this_thread::sleep_for(pause);
    }
  }
}

// Every SQLite error becomes a dblock error here, and nowhere else.
void SqliteConnection::fail(const std::exception& e) {
  auto* se = dynamic_cast<const SQLite::Exception*>(&e);
  std::string msg = e.what();
  int code = se ? se->getErrorCode() : SQLITE_ERROR;
  switch (code) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw TimeoutError("sqlite: database '" + path_ + "' stayed locked past the statement timeout (" +
                         sqlite3_errstr(se->getExtendedErrorCode()) + ", code " +
                         std::to_string(se->getExtendedErrorCode()) + ")");
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
  // Raised by the ${table}_check trigger: a stale fence.
  if (msg.rfind("dblock: ", 0) == 0) throw LockLostError("sqlite: " + msg.substr(8));
  if (msg.find("no such table") != std::string::npos)
    throw SchemaError("sqlite: the lock table is missing in '" + path_ + "' (" + msg + "): run `dblock migrate`");
  if (msg.find("no such column") != std::string::npos)  // a table whose history lacks a later migration
    throw SchemaError("sqlite: the lock table in '" + path_ + "' is not up to date (" + msg + "): run `dblock migrate`");
  throw InternalError("sqlite: " + msg);
}

SqliteConnection::SqliteConnection(const std::string& path, std::chrono::milliseconds busy_timeout)
    : path_(path), busy_timeout_(busy_timeout) {
  try {
    owned_ = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE,
                                                static_cast<int>(busy_timeout.count()));
    db_ = owned_.get();
    sqlite3_busy_handler(db_->getHandle(), &SqliteConnection::busy_wait, this);
    // WAL lets readers run beside the one writer; synchronous=FULL makes every commit
    // durable, so a fence handed out is never handed out again after a power loss.
    busy_retried([&] { return db_->exec("PRAGMA journal_mode=WAL"); });
    wal_ = db_->execAndGet("PRAGMA journal_mode").getString() == "wal";
    db_->exec("PRAGMA synchronous=FULL");
  } catch (const std::exception& e) {
    fail(e);
  }
}

// NORMAL in WAL mode: a commit is not flushed, the checkpoints still are, so a power cut
// loses the last such commits and never the database; in a rollback journal it could do
// worse, so there nothing changes. A caller's own connection is left as the caller set it.
// A connection that cannot flush again is closed rather than lent on (Connection::flush_commits).
void SqliteConnection::flush_commits(bool on) {
  if (!owned_ || !wal_ || on == flushing_) return;
  try {
    db_->exec(on ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
    flushing_ = on;
  } catch (const std::exception& e) {
    if (on) usable_ = false;
    fail(e);
  }
}

SqliteConnection::SqliteConnection(SQLite::Database& borrowed)
    : path_(borrowed.getFilename()), busy_timeout_(0), db_(&borrowed) {}

// SQLite's own busy handler (sqlite3_busy_timeout) retries after 1, 2, 5, 10, 15, 20, 25, 25,
// 25, 50, 50, 100 ms: a writer that found the lock taken soon polls in steps longer than a
// whole short transaction of another writer, and misses the gaps between them (a sweep's
// batches, other acquirers' cycles). This one polls every 0.1 ms doubling to 0.5 ms, up to
// the same timeout. A longer step lets the one waiter whose turn it is (fair waiting) sleep
// through the gaps between the writes of the others around it (a releaser asking again,
// tickets written): with 2 ms it missed them often enough to stall hand-offs 7-15 ms
// (docs/ARCHITECTURE.md, "SQLite" and "Measured and rejected").
std::chrono::microseconds busy_pause(int count) noexcept {
  return std::min(std::chrono::microseconds(100) * (1 << std::min(count, 3)), std::chrono::microseconds(500));
}

int SqliteConnection::busy_wait(void* self, int count) noexcept {
  auto* s = static_cast<SqliteConnection*>(self);
  auto now = std::chrono::steady_clock::now();
  if (count == 0) s->busy_since_ = now;
  if (now - s->busy_since_ >= s->busy_timeout_) return 0;
  std::this_thread::sleep_for(busy_pause(count));
  return 1;
}

SqliteConnection::~SqliteConnection() = default;

SQLite::Statement& SqliteConnection::prepared(const std::string& sql) {
  if (auto a = by_address_.find(sql.data()); a != by_address_.end() && *a->second.first == sql)
    return *a->second.second;
  auto& [text, slot] = *cache_.try_emplace(sql).first;
  if (!slot) slot = std::make_unique<SQLite::Statement>(*db_, sql);
  if (by_address_.size() >= 64) by_address_.clear();
  by_address_[sql.data()] = {&text, slot.get()};
  return *slot;
}

Result SqliteConnection::run(const std::string& sql, const std::vector<Value>& params) {
  SQLite::Statement* st = nullptr;
  try {
    st = &prepared(sql);
    return busy_retried([&] { return step(*st, params); });
  } catch (const std::exception& e) {
    fail(e);
  }
}

// Binds, runs to the end and resets (a statement left open would pin a read snapshot), also
// when it fails, so that it can be run again.
Result SqliteConnection::step(SQLite::Statement& statement, const std::vector<Value>& params) {
  auto* st = &statement;
  try {
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
    st->reset();
    return r;
  } catch (...) {
    try {
      st->reset();
    } catch (...) {
    }
    throw;
  }
}

void SqliteConnection::run_script(const std::string& sql) {
  try {
    db_->exec(sql);
  } catch (const std::exception& e) {
    fail(e);
  }
}

void SqliteConnection::begin() {
  if (!owned_) throw InternalError("a caller's transaction is not dblock's to begin or end");
  try {
    busy_retried([&] { return db_->exec("BEGIN IMMEDIATE"); });
  } catch (const std::exception& e) {
    fail(e);
  }
}
void SqliteConnection::commit() {
  if (!owned_) throw InternalError("a caller's transaction is not dblock's to begin or end");
  run_script("COMMIT");
}
void SqliteConnection::rollback() noexcept {
  if (!owned_) return;
  try {
    db_->exec("ROLLBACK");
  } catch (...) {  // nothing to roll back (already ended): fine
  }
}

}  // namespace dblock::detail::sqldb
