// MySQL/MariaDB's statement texts (mysql_dialect.cpp) and its settings check (mysql_settings.cpp).
#pragma once

#include <vector>

#include "dblock/settings.hpp"
#include "sql/dialect.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sqldb {

// The texts for MySQL 8 and MariaDB alike (where the two spell a statement differently, a
// procedure of the migration picks the spelling on the server itself).
const Dialect& mysql_dialect();
std::vector<SettingCheck> mysql_settings(Connection& s);
// `call` bounded in its wait for a lock on the name's row by the parameter `wait` (in ms, as
// InnoDB's whole seconds, at least one; Dialect::grant_waits_bounded), the session's
// innodb_lock_wait_timeout put back after it.
std::string mysql_row_wait(const std::string& call, const std::string& wait);

}  // namespace dblock::detail::sqldb
