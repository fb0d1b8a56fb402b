// Locks held by the caller's own transaction and fences checked inside it, written once over
// the dialects that offer lock_in and check_in. The caller's transaction comes in as a
// Connection adapter of its driver's transaction type (include/dblock/postgresql.hpp, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/driver.hpp"
#include "core/validate.hpp"
#include "sql/connection.hpp"
#include "sql/dialect.hpp"

namespace dblock::detail::sqldb {

// A Connection over a transaction the caller owns (its driver's adapter derives from this):
// it runs statements in it, and never begins or ends one.
class CallerConnection : public Connection {
 public:
  void run_script(const std::string&) override { refuse(); }
  void begin() override { refuse(); }
  void commit() override { refuse(); }
  void rollback() noexcept override {}
  bool usable() const noexcept override { return true; }

 private:
  [[noreturn]] static void refuse() { throw InternalError("a caller's transaction is not dblock's to run or end"); }
};

// The lock table as seen from a caller's transaction: its dialect rendered for the table.
class InTransaction {
 public:
  // Throws UsageError for a bad table name, and when the dialect has no such locks. `draw`
  // gives the fences where the dialect draws them apart (Dialect::in_transaction_fence_apart):
  // a Client's; without it, lock() refuses there.
  InTransaction(const Dialect& dialect, std::string_view table, std::function<std::uint64_t()> draw = nullptr);

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
  std::function<std::uint64_t()> draw_;
};

}  // namespace dblock::detail::sqldb
