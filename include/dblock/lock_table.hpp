/// @file
/// LockTable: locks held by the service's own database transaction, and fences the database
/// checks inside it. Used through one database's header: dblock/postgresql.hpp or
/// dblock/sqlite.hpp, which name the transaction type of that database's driver.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "dblock/export.hpp"
#include "dblock/lease.hpp"

namespace dblock {
class Client;
namespace detail::sqldb {
class InTransaction;
}

/// How a LockTable sends its statements on the caller's connection.
struct LockTableOptions {
  /// PostgreSQL: prepare each statement once on the caller's connection (named `dblock_` and
  /// a hash of its text, known to libpqxx's `connection::prepare`) and send `EXECUTE` with
  /// the parameters after, so the server parses and plans it once per connection instead of
  /// at every call. Off by default because the names stay on the caller's connection: behind
  /// a pooler in transaction mode (PgBouncer) the next transaction may run on a server
  /// connection that lacks them. SQLite (whose statements are prepared anyway) and
  /// MySQL/MariaDB ignore it.
  bool prepared_statements = false;
};

/// The lock table (as `dblock migrate` made it) seen from a transaction
/// of the service's own, on its own connection: dblock opens no connection for these calls.
/// Cheap to copy and thread-safe; each transaction is used by one thread at a time, as its
/// driver wants.
template <class Transaction>
class LockTable {
 public:
  /// The table as ClientOptions::table names it. Throws UsageError on a bad identifier.
  /// Not enough for lock_in on MySQL 8, which draws its fence on a Client's connection
  /// (MariaDB draws it in `tx`).
  explicit LockTable(const std::string& table = "dblock_locks", const LockTableOptions& options = {});
  /// The table of `client` (its ClientOptions::table), on the same database. On MySQL 8,
  /// lock_in draws its fence on one of the client's connections once the lock is held (InnoDB
  /// cannot raise the table's fence counter inside `tx` without every grant on the table
  /// waiting for `tx`; MariaDB draws from a sequence in `tx`). Throws UsageError when the
  /// client is on another kind of database.
  explicit LockTable(const std::shared_ptr<Client>& client, const LockTableOptions& options = {});

  /// Takes the lock `name` for the rest of `tx`: the database frees it when `tx` commits or
  /// rolls back, or its connection drops. Waits while anyone holds the name: another
  /// transaction, or a Client's lock of any strategy on this table. Returns the fence, drawn
  /// like every grant's on the table. Throws BusyError where a lease holds the name and the
  /// database cannot wait for it inside `tx` (SQLite, MySQL: see their headers), UsageError
  /// for a bad name or a transaction that is not open or has failed, SchemaError when the
  /// table is not migrated.
  std::uint64_t lock_in(Transaction& tx, const std::string& name) const;
  /// The same, waiting at most `wait` (0: one attempt); nullopt when busy. A busy attempt
  /// leaves `tx` usable.
  std::optional<std::uint64_t> try_lock_in(Transaction& tx, const std::string& name,
                                           std::chrono::milliseconds wait = std::chrono::milliseconds{0}) const;

  /// Asserts in `tx` that the lease with `fence` (insert or optimistic strategy, on this
  /// table) is the current, unexpired holder of `name`, and keeps it so until `tx` ends: no
  /// takeover, release or sweep commits before `tx` does, so "lock, then write" is atomic
  /// even for a holder paused past its TTL. Otherwise throws LockLostError, and `tx` must not
  /// commit. Commit `tx` before releasing the lease: the release waits for it.
  void check_in(Transaction& tx, const std::string& name, std::uint64_t fence) const;
  /// check_in with the lease's name and fence; UsageError if it was released.
  void check_in(Transaction& tx, const Lease& lease) const;

 private:
  std::shared_ptr<const detail::sqldb::InTransaction> table_;
  LockTableOptions options_;
};

}  // namespace dblock
