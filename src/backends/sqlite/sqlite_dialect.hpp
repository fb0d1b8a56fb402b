// SQLite's statement texts (sqlite_dialect.cpp) and its settings check (sqlite_settings.cpp).
#pragma once

#include <vector>

#include "dblock/settings.hpp"
#include "sql/dialect.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sqldb {

const Dialect& sqlite_dialect();
std::vector<SettingCheck> sqlite_settings(Connection& s);

}  // namespace dblock::detail::sqldb
