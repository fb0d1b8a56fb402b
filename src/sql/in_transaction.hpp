// Locks held by the caller's own transaction and fences checked inside it, written once over
// the dialects that offer lock_in and check_in. The caller's transaction comes in as a
// Connection adapter of its driver's transaction type (include/dblock/postgresql.hpp, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/driver.hpp"
#include "core/validate.hpp"
#include "sql/connection.hpp"
#include "sql/dialect.hpp"

namespace dblock::detail::sqldb {

// The lock table as seen from a caller's transaction: its dialect rendered for the table.
class InTransaction {
 public:
  // Throws UsageError for a bad table name, and when the dialect has no such locks.
  InTransaction(const Dialect& dialect, std::string_view table);

  // Held until the transaction ends; waits until `deadline` (forever when unset). The
  // fence, or nullopt when the deadline passed. Busy attempts leave the transaction usable.
  std::optional<std::uint64_t> lock(Connection& tx, const std::string& name,
                                    std::optional<Clock::time_point> deadline) const;
  // Throws LockLostError unless `fence` is the current holder's lease on `name`, which then
  // stays so until the transaction ends.
  void check(Connection& tx, const std::string& name, std::uint64_t fence) const;

 private:
  TableName table_;
  Dialect d_;
};

}  // namespace dblock::detail::sqldb
