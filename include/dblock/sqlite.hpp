/// @file
/// SQLite through the service's own SQLiteCpp connection: dblock::sqlite::LockTable (needs
/// SQLiteCpp's headers).
#pragma once

#include <SQLiteCpp/Database.h>

#include "dblock/lock_table.hpp"

namespace dblock {

extern template class DBLOCK_EXPORT LockTable<SQLite::Database>;

/// SQLite only.
namespace sqlite {
/// LockTable on a `SQLite::Database` inside a transaction the caller began, best with
/// `BEGIN IMMEDIATE`. SQLite has one writer at a time, so the lock is that write transaction
/// itself: `lock_in` only draws the fence, once no lease holds the name (a lease in the way
/// cannot be waited for: the holder could not release, so `try_lock_in` answers busy at once
/// and `lock_in` throws BusyError). The same fence check for other languages, in a write
/// transaction: `INSERT INTO <table>_check (name, fence) VALUES (...)`, which aborts with
/// "dblock: ..." when the fence is stale.
using LockTable = dblock::LockTable<SQLite::Database>;
}  // namespace sqlite

}  // namespace dblock
