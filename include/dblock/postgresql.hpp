/// @file
/// PostgreSQL only (installed when dblock is built with it; needs libpqxx's headers):
/// locks held by your own transaction, and fences the database checks inside it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <pqxx/transaction_base>

#include "dblock/export.hpp"
#include "dblock/lease.hpp"

namespace dblock {
namespace detail::sqldb {
class InTransaction;
}

/// PostgreSQL through the service's own libpqxx connection.
namespace postgresql {

/// The lock table (migrated by `dblock migrate`, V2 or later) as seen from a transaction of
/// the service's own: dblock opens no connection for these calls. Cheap to copy; thread-safe
/// (the transactions are the caller's, one thread each, as libpqxx wants).
class DBLOCK_EXPORT LockTable {
 public:
  /// The table as ClientOptions::table names it. Throws UsageError on a bad identifier.
  explicit LockTable(const std::string& table = "dblock_locks");

  /// Takes the lock `name` for the rest of `tx`: the database frees it when `tx` commits or
  /// rolls back, or its connection drops. Waits while any holder has it: another
  /// transaction, or a Client's lock of any strategy on this table. Returns the fence, from
  /// the same sequence as every grant on the table. Throws UsageError for a bad name or a
  /// failed transaction, SchemaError when the table lacks migration V2.
  std::uint64_t lock_in(pqxx::transaction_base& tx, const std::string& name) const;
  /// The same, waiting at most `wait` (0: one attempt); nullopt when busy. A busy attempt
  /// leaves `tx` usable.
  std::optional<std::uint64_t> try_lock_in(pqxx::transaction_base& tx, const std::string& name,
                                           std::chrono::milliseconds wait = std::chrono::milliseconds{0}) const;

  /// Asserts in `tx` that the lease with `fence` (insert or optimistic strategy, on this
  /// table) is the current, unexpired holder of `name`, and keeps it so until `tx` ends: no
  /// takeover, release or sweep commits before `tx` does, so "lock, then write" is atomic
  /// even for a holder paused past its TTL. Otherwise throws LockLostError and `tx` must not
  /// commit (PostgreSQL has already failed it). Commit `tx` before releasing the lease: the
  /// release waits for it. The same check for other languages: `SELECT <table>_check(name,
  /// fence)`, which raises SQLSTATE DL001.
  void check_in(pqxx::transaction_base& tx, const std::string& name, std::uint64_t fence) const;
  /// check_in with the lease's name and fence.
  void check_in(pqxx::transaction_base& tx, const Lease& lease) const;

 private:
  std::shared_ptr<const detail::sqldb::InTransaction> table_;
};

}  // namespace postgresql
}  // namespace dblock
