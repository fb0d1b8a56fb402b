// The settings check of each SQL database (Client::check_settings, `dblock doctor`), run on
// one of dblock's own sessions, so that what is read is what dblock's statements run with.
// A setting that cannot be read (no privilege, another server version) is `unknown`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dblock/settings.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sql {

// One value read with `sql`, the first column of the first row; nullopt when the statement
// fails or returns nothing (the caller reports `unknown`). Connection failures still throw.
std::optional<std::string> read_setting(Connection& s, const std::string& sql);

}  // namespace dblock::detail::sql
