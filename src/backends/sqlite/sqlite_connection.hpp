// The SQLite Connection over SQLiteCpp: one connection, WAL journal, a busy timeout equal to
// the statement timeout, prepared statements cached per connection.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

#include "sql/connection.hpp"

namespace SQLite {
class Database;
class Statement;
}  // namespace SQLite

namespace dblock::detail::sqldb {

// How long a writer that found the database locked sleeps before its count-th retry (from 0):
// SqliteConnection's busy handler, and the benchmark's hand-off floor, which polls alike.
std::chrono::microseconds busy_pause(int count) noexcept;

class SqliteConnection final : public Connection {
 public:
  SqliteConnection(const std::string& path, std::chrono::milliseconds busy_timeout);
  // A caller's own connection, in the transaction the caller began and will end (locks in the
  // caller's transaction: dblock/sqlite.hpp). Its settings are left as they are.
  explicit SqliteConnection(SQLite::Database& borrowed);
  ~SqliteConnection() override;
  Result run(const std::string& sql, const std::vector<Value>& params) override;
  void run_script(const std::string& sql) override;
  void begin() override;
  void commit() override;
  void rollback() noexcept override;
  bool usable() const noexcept override { return usable_; }
  void flush_commits(bool on) override;

 private:
  SQLite::Statement& prepared(const std::string& sql);
  Result step(SQLite::Statement& st, const std::vector<Value>& params);
  template <class F>
  auto busy_retried(F&& f);
  [[noreturn]] void fail(const std::exception& e);
  static int busy_wait(void* self, int count) noexcept;
  std::string path_;
  std::chrono::steady_clock::time_point busy_since_;
  std::chrono::milliseconds busy_timeout_;
  std::unique_ptr<SQLite::Database> owned_;
  SQLite::Database* db_ = nullptr;
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> cache_;
  // The same statements by the address of the text last asked for: the dialect's texts live
  // as long as the Client, so most lookups find their text by address and only compare it,
  // where hashing a 600-byte text twice a cycle cost 2 % of an uncontended one. Bounded:
  // cleared when full (a text made for one call has an address of its own each time).
  std::unordered_map<const char*, std::pair<const std::string*, SQLite::Statement*>> by_address_;
  bool usable_ = true;
  bool wal_ = false;       // journal_mode is WAL (so synchronous NORMAL loses only recent commits)
  bool flushing_ = true;   // synchronous is FULL
};

}  // namespace dblock::detail::sqldb
