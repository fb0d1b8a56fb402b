/// @file
/// PostgreSQL through the service's own libpqxx transaction (installed when dblock is built
/// with PostgreSQL; needs libpqxx's headers): dblock::postgresql::LockTable.
#pragma once

#include <pqxx/transaction_base>

#include "dblock/lock_table.hpp"

namespace dblock {

extern template class DBLOCK_EXPORT LockTable<pqxx::transaction_base>;

/// PostgreSQL only.
namespace postgresql {
/// LockTable on a `pqxx::work` (any transaction but `pqxx::nontransaction`). Each call is
/// one round trip to the `<table>_lock_in` function; `lock_in` waits in the server for another
/// transaction or a session lock, and polls a lease's expiry. The same fence check for other
/// languages: `SELECT <table>_check(name, fence)` (raises SQLSTATE DL001).
using LockTable = dblock::LockTable<pqxx::transaction_base>;
}  // namespace postgresql

}  // namespace dblock
