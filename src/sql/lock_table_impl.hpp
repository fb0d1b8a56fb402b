// dblock::LockTable<Transaction>'s members, written once: each database's .cpp specializes
// CallerTransaction for its driver's type (the Connection adapter over the caller's
// transaction, and the dialect) and instantiates LockTable with it.
#pragma once

#include <memory>

#include "core/client_core.hpp"
#include "dblock/client.hpp"
#include "dblock/lock_table.hpp"
#include "sql/in_transaction.hpp"

namespace dblock {
namespace detail::sqldb {

// static const Dialect& dialect();
// UsageError if it is no open transaction:
// static std::unique_ptr<Connection> adapt(Transaction&, const LockTableOptions&);
template <class Transaction>
struct CallerTransaction;

}  // namespace detail::sqldb

template <class Tx>
LockTable<Tx>::LockTable(const std::string& table, const LockTableOptions& options)
    : table_(std::make_shared<detail::sqldb::InTransaction>(detail::sqldb::CallerTransaction<Tx>::dialect(), table)),
      options_(options) {}

template <class Tx>
LockTable<Tx>::LockTable(const std::shared_ptr<Client>& client, const LockTableOptions& options)
    : options_(options) {
  if (!client) throw UsageError("LockTable: no client");
  const auto& dialect = detail::sqldb::CallerTransaction<Tx>::dialect();
  auto core = client->core_;
  if (core->backend->name() != dialect.name)
    throw UsageError("LockTable: the client is on " + std::string(core->backend->name()) + ", the transaction on " +
                     dialect.name);
  auto draw = [core] { return core->backend->draw_fence(); };  // keeps the client's connections open
  table_ = std::make_shared<detail::sqldb::InTransaction>(dialect, core->backend->table_name(), std::move(draw));
}

template <class Tx>
std::uint64_t LockTable<Tx>::lock_in(Tx& tx, const std::string& name) const {
  auto c = detail::sqldb::CallerTransaction<Tx>::adapt(tx, options_);
  return *table_->lock(*c, name, std::nullopt);
}

template <class Tx>
std::optional<std::uint64_t> LockTable<Tx>::try_lock_in(Tx& tx, const std::string& name,
                                                        std::chrono::milliseconds wait) const {
  auto c = detail::sqldb::CallerTransaction<Tx>::adapt(tx, options_);
  return table_->lock(*c, name, detail::Clock::now() + std::max(wait, std::chrono::milliseconds{0}));
}

template <class Tx>
void LockTable<Tx>::check_in(Tx& tx, const std::string& name, std::uint64_t fence) const {
  auto c = detail::sqldb::CallerTransaction<Tx>::adapt(tx, options_);
  table_->check(*c, name, fence);
}

template <class Tx>
void LockTable<Tx>::check_in(Tx& tx, const Lease& lease) const {
  if (!lease.held()) throw UsageError("check_in of a lease that was released (or moved from)");
  check_in(tx, lease.name(), lease.fence());
}

}  // namespace dblock
