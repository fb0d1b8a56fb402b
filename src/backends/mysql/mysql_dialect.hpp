// MySQL/MariaDB's statement texts (mysql_dialect.cpp) and its settings check (mysql_settings.cpp).
#pragma once

#include <vector>

#include "dblock/settings.hpp"
#include "sql/dialect.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sqldb {

const Dialect& mysql_dialect();
std::vector<SettingCheck> mysql_settings(Connection& s);

}  // namespace dblock::detail::sqldb
