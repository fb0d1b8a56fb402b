// PostgreSQL's statement texts (pg_dialect.cpp) and its settings check (pg_settings.cpp).
#pragma once

#include <vector>

#include "dblock/settings.hpp"
#include "sql/dialect.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sqldb {

const Dialect& postgresql_dialect();
std::vector<SettingCheck> postgresql_settings(Connection& s);

}  // namespace dblock::detail::sqldb
