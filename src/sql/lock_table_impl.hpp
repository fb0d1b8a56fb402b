// dblock::LockTable<Transaction>'s members, written once: each database's .cpp specializes
// CallerTransaction for its driver's type (the Connection adapter over the caller's
// transaction, and the dialect) and instantiates LockTable with it.
#pragma once

#include <memory>

#include "dblock/lock_table.hpp"
#include "sql/in_transaction.hpp"

namespace dblock {
namespace detail::sqldb {

// static const Dialect& dialect();
// static std::unique_ptr<Connection> adapt(Transaction&);  // UsageError if it is no open transaction
template <class Transaction>
struct CallerTransaction;

}  // namespace detail::sqldb

template <class Tx>
LockTable<Tx>::LockTable(const std::string& table)
    : table_(std::make_shared<detail::sqldb::InTransaction>(detail::sqldb::CallerTransaction<Tx>::dialect(), table)) {}

template <class Tx>
std::uint64_t LockTable<Tx>::lock_in(Tx& tx, const std::string& name) const {
  auto c = detail::sqldb::CallerTransaction<Tx>::adapt(tx);
  return *table_->lock(*c, name, std::nullopt);
}

template <class Tx>
std::optional<std::uint64_t> LockTable<Tx>::try_lock_in(Tx& tx, const std::string& name,
                                                        std::chrono::milliseconds wait) const {
  auto c = detail::sqldb::CallerTransaction<Tx>::adapt(tx);
  return table_->lock(*c, name, detail::Clock::now() + std::max(wait, std::chrono::milliseconds{0}));
}

template <class Tx>
void LockTable<Tx>::check_in(Tx& tx, const std::string& name, std::uint64_t fence) const {
  auto c = detail::sqldb::CallerTransaction<Tx>::adapt(tx);
  table_->check(*c, name, fence);
}

template <class Tx>
void LockTable<Tx>::check_in(Tx& tx, const Lease& lease) const {
  if (!lease.held()) throw UsageError("check_in of a lease that was released (or moved from)");
  check_in(tx, lease.name(), lease.fence());
}

}  // namespace dblock
