// Connection: the thin interface the SQL strategies are written against. A backend adapter
// (SQLiteCpp, libpqxx, mysqlcppconn) implements it and maps its driver's errors to
// dblock's error types in one place.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/transport.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::sqldb {

using Value = std::variant<std::nullptr_t, std::int64_t, std::string>;
using Row = std::vector<Value>;

// A statement waited for a lock past the bound it was given: PostgreSQL's lock_timeout or
// NOWAIT (SQLSTATE 55P03), InnoDB's innodb_lock_wait_timeout (1205) or NOWAIT (3572); or it
// was InnoDB's deadlock victim each time it was sent (1213). A TimeoutError to every caller
// but the lease grants, which answer busy (lease_drivers.hpp).
struct LockWaitTimeout : TimeoutError {
  using TimeoutError::TimeoutError;
};

struct Result {
  std::vector<Row> rows;      // the last result set's
  std::int64_t affected = 0;  // rows changed by an INSERT/UPDATE/DELETE
  // A text of several statements (MySQL): every result set's rows, in order, the last one
  // also in `rows`.
  std::vector<std::vector<Row>> sets;
};

class Connection {
 public:
  virtual ~Connection() = default;
  // One statement with positional parameters in the dialect's marker syntax.
  virtual Result run(const std::string& sql, const std::vector<Value>& params = {}) = 0;
  // Several statements without parameters (migration scripts).
  virtual void run_script(const std::string& sql) = 0;
  // A write transaction that serialises with other writers (SQLite: BEGIN IMMEDIATE).
  virtual void begin() = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  // False after a connection-level failure: the pool discards the session.
  virtual bool usable() const noexcept = 0;
  // A cheap check, without a round trip, that an idle connection was not closed by the
  // server meanwhile (a restart); the pool calls it before handing out an idle session.
  virtual bool still_connected() noexcept { return usable(); }
  // The statements up to the end of the current transaction may wait in the server up to
  // `wait` for a lock (the session strategies' bounded waits), on top of the statement
  // timeout. A session with a client-side bound on each round trip (PostgreSQL) widens it.
  virtual void allow_wait(std::chrono::milliseconds) {}
  // How another thread ends the statement this connection waits in now (a session lock's
  // wait, cancelled: WaitCancel): it asks the server, and the waiting statement then fails.
  // Made by the connection's own thread before the wait; null where the server cannot be
  // asked (through a transaction pooler, which would pass the request to another session).
  virtual std::function<void()> canceller() { return nullptr; }
  // The connection's socket, for noticing at once that the server closed it (a session lock
  // is lost with it); -1 where it cannot be known. Asked once a session lock holds the
  // connection, by the thread that holds it (MySQL asks the server: one round trip, once).
  virtual int socket() noexcept { return -1; }
  // A session lock is about to live in this connection, held with this TTL: asks the server
  // to close the connection once its client has been unreachable for the TTL plus a little
  // (never less: the client declares the loss at the TTL after its last renewal), so that a
  // network cut frees the lock about when a lease would be freed, not when the server's
  // TCP gives up on the peer (two hours and more by default). A client that is merely slow or
  // stopped keeps it: its kernel still answers. No-op where the server has no such setting
  // per connection (MySQL/MariaDB: docs/RELIABILITY.md, "Network faults").
  virtual void drop_when_unreachable(std::chrono::milliseconds /*ttl*/) {}
  // Whether the commits that follow wait for the disk. Off only around writes whose loss in
  // a power cut costs nothing (the fair queue's tickets: PostgreSQL keeps them in an
  // UNLOGGED table), where the database can say so per connection without risking its
  // integrity (SQLite in WAL mode: synchronous NORMAL); elsewhere a no-op. A connection
  // that fails to turn flushing back on is left unusable (the pool closes it): no later
  // commit on it, a grant's, may go unflushed.
  virtual void flush_commits(bool /*on*/) {}
  // False for a connection shared with another user (PostgreSQL's, lent by the release
  // listener): a session lock must not live in it, as closing it would not free the lock.
  virtual bool may_pin() const noexcept { return true; }
  // Whether the server keeps a statement's plan between calls on this connection (false
  // through a transaction pooler, where every text is planned at every call): the
  // uncontended path's statements pay only where it does (LeaseDriver::upsert).
  virtual bool keeps_plans() const noexcept { return true; }
  // How this connection reaches its server (`dblock doctor`); none for an embedded database.
  virtual std::optional<Transport> transport() { return std::nullopt; }
};

// Commits wait for no flush from its construction until end(), which turns flushing back on
// and throws when it cannot (Connection::flush_commits). Unended (a statement under it
// threw), the destructor does it and swallows a failure, which left the connection unusable:
// a destructor must not throw, least of all while another exception unwinds the stack.
class UnflushedCommits {
 public:
  explicit UnflushedCommits(Connection& s) : s_(s) { s_.flush_commits(false); }
  void end() {
    ended_ = true;
    s_.flush_commits(true);
  }
  ~UnflushedCommits() {
    if (ended_) return;
    try {
      s_.flush_commits(true);
    } catch (...) {
    }
  }
  UnflushedCommits(const UnflushedCommits&) = delete;
  UnflushedCommits& operator=(const UnflushedCommits&) = delete;

 private:
  Connection& s_;
  bool ended_ = false;
};

inline std::int64_t as_int(const Value& v) {
  if (auto p = std::get_if<std::int64_t>(&v)) return *p;
  if (std::holds_alternative<std::nullptr_t>(v)) return 0;
  throw InternalError("unexpected text where the lock table holds a number");
}
inline std::string as_text(const Value& v) {
  if (auto p = std::get_if<std::string>(&v)) return *p;
  if (auto p = std::get_if<std::int64_t>(&v)) return std::to_string(*p);
  return {};
}

// Rolls back unless committed; never throws from its destructor (SQLiteCpp's style).
class Transaction {
 public:
  explicit Transaction(Connection& s) : s_(s) { s_.begin(); }
  ~Transaction() {
    if (!done_) s_.rollback();
  }
  void commit() {
    s_.commit();
    done_ = true;
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

 private:
  Connection& s_;
  bool done_ = false;
};

}  // namespace dblock::detail::sqldb
