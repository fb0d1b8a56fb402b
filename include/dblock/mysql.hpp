/// @file
/// MySQL and MariaDB through the service's own Connector/C++ connection (installed when dblock
/// is built with MySQL; needs Connector/C++ 1.1's headers): dblock::mysql::LockTable.
#pragma once

#include <cppconn/connection.h>

#include "dblock/lock_table.hpp"

namespace dblock {

extern template class DBLOCK_EXPORT LockTable<::sql::Connection>;

/// MySQL and MariaDB only.
namespace mysql {
/// LockTable on a `sql::Connection` with a transaction open on it: `setAutoCommit(false)`, or
/// a `START TRANSACTION` (which MariaDB can be asked about; on MySQL 8 turn autocommit off).
/// `lock_in` is one CALL of the `<table>_lock_in` procedure, which locks the name's row and,
/// on MariaDB, draws the fence from the table's sequence in the same transaction. MySQL 8 has
/// no sequence: there make the LockTable from the Client on the same database, and the fence
/// is drawn on one of the client's connections, as the for-update strategy does. Another transaction or a for-update lock is waited for by the
/// server, in whole seconds. A lease in the way is seen without locking anything and answered
/// busy at once (under REPEATABLE READ the transaction's snapshot would not see it go):
/// `try_lock_in` returns nullopt, `lock_in` throws BusyError. Should a lease have been
/// granted since the transaction's snapshot (it read before `lock_in`), both throw
/// BusyError, as the row is locked by then: roll back and try again. An advisory
/// (GET_LOCK) holder is waited out, but does not see this lock. The same fence check for
/// other languages: `CALL <table>_check(name, fence)` (SQLSTATE DL001).
using LockTable = dblock::LockTable<::sql::Connection>;
}  // namespace mysql

}  // namespace dblock
