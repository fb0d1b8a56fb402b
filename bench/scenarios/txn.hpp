// The txn scenario: a service's own transaction that updates one row, bare, with lock_in
// first, and with check_in of a lease held across transactions first (LockTable,
// include/dblock/lock_table.hpp), on the service's own connection.
#pragma once

#include <string>
#include <vector>

#include "bench/support/util.hpp"

namespace dblock_bench {

// url: the server's; table: a lock table of the run's own, migrated.
std::vector<Row> run_txn_postgresql(const std::string& url, const std::string& table, const Options& opt);
std::vector<Row> run_txn_mysql(const std::string& url, const std::string& table, const Options& opt);
// path: the SQLite file of the run, its dblock_locks migrated.
std::vector<Row> run_txn_sqlite(const std::string& path, const Options& opt);

}  // namespace dblock_bench
