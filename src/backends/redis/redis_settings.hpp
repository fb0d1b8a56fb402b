// The Redis settings the locks rely on (Client::check_settings, `dblock doctor`): whether a
// lock key survives a restart (appendonly, appendfsync, save) and whether it can be evicted
// (maxmemory-policy), read with CONFIG GET.
#pragma once

#include <string>
#include <vector>

#include "backends/redis/redis_connection.hpp"
#include "dblock/settings.hpp"

namespace dblock::detail::redis {

// `prefix` goes before each setting's name (Redlock: "host:port "). CONFIG may be disabled
// (managed Redis, a renamed command, an ACL): then every line is `unknown`, not an error.
// A connection failure throws.
std::vector<SettingCheck> read_settings(Connection& c, const std::string& prefix = "");

// The same lines, `unknown`, for a node that could not be reached (Redlock).
std::vector<SettingCheck> unreachable_settings(const std::string& prefix, const std::string& why);

}  // namespace dblock::detail::redis
