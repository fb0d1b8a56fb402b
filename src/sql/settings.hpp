// The settings check of each SQL database (Client::check_settings, `dblock doctor`), run on
// one of dblock's own sessions, so that what is read is what dblock's statements run with.
// A setting that cannot be read (no privilege, another server version) is `unknown`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dblock/settings.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sqldb {

// One value read with `sql`, the first column of the first row; nullopt when the statement
// fails or returns nothing (the caller reports `unknown`). Connection failures still throw.
std::optional<std::string> read_setting(Connection& s, const std::string& sql);

// The isolation line of the server databases: dblock pins read committed on its own
// connections, so the configured default (`configured`) is reported and what this
// connection runs (`running`) is judged. `read_committed` is the server's spelling of it;
// `otherwise` says what another level would do to dblock's statements.
SettingCheck isolation_verdict(const std::string& name, const std::optional<std::string>& configured,
                               const std::optional<std::string>& running, const std::string& read_committed,
                               const std::string& otherwise);

}  // namespace dblock::detail::sqldb
