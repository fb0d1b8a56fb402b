#include "backends/redis/redis_settings.hpp"

#include <optional>

#include "dblock/errors.hpp"

namespace dblock::detail::redis {

namespace {

const char* const names[] = {"appendonly", "appendfsync", "maxmemory-policy"};

// CONFIG GET name: its value, or nullopt when CONFIG is refused or unknown.
std::optional<std::string> config_get(Connection& c, const std::string& name, std::string* why) {
  auto r = c.raw({"CONFIG", "GET", name});
  if (is_error(*r)) {
    if (why->empty()) why->assign(r->str, r->len);
    return std::nullopt;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 2) return std::nullopt;  // [name, value]
  const auto* v = r->element[1];
  if (!v->str) return std::nullopt;
  return std::string(v->str, v->len);
}

}  // namespace

std::vector<SettingCheck> unreachable_settings(const std::string& prefix, const std::string& why) {
  std::vector<SettingCheck> out;
  for (const char* n : names) out.push_back({prefix + n, "", Verdict::unknown, why});
  return out;
}

std::vector<SettingCheck> read_settings(Connection& c, const std::string& prefix) {
  std::string why;
  auto appendonly = config_get(c, "appendonly", &why);
  auto appendfsync = config_get(c, "appendfsync", &why);
  auto save = config_get(c, "save", &why);
  auto policy = config_get(c, "maxmemory-policy", &why);
  auto maxmemory = config_get(c, "maxmemory", &why);
  const std::string unread = "CONFIG GET was refused (" + why +
                             "): a managed or locked-down Redis; check this in its own settings";
  // A held lock is a key with a TTL; everything below is about whether that key outlives a
  // restart and memory pressure while its holder still runs.
  const std::string restart_note = ", unless it stays down longer than the longest lock TTL";
  std::vector<SettingCheck> out;

  if (!appendonly) out.push_back({prefix + "appendonly", "", Verdict::unknown, unread});
  else if (*appendonly == "yes")
    out.push_back({prefix + "appendonly", *appendonly, Verdict::ok,
                   "every grant is logged to the append-only file and replayed at a restart"});
  else if (save && !save->empty())
    out.push_back({prefix + "appendonly", *appendonly + " (save \"" + *save + "\")", Verdict::breaks_exclusion,
                   "a restart reloads the last snapshot, without the grants made since: another client can take a "
                   "lock its holder still runs under" + restart_note});
  else
    out.push_back({prefix + "appendonly", *appendonly, Verdict::breaks_exclusion,
                   "nothing is persisted: after a restart every held lock is free to another client while its holder "
                   "still runs" + restart_note});

  if (!appendfsync) out.push_back({prefix + "appendfsync", "", Verdict::unknown, unread});
  else if (!appendonly || *appendonly != "yes")
    out.push_back({prefix + "appendfsync", *appendfsync, Verdict::ok, "not in use while appendonly is no"});
  else if (*appendfsync == "always")
    out.push_back({prefix + "appendfsync", *appendfsync, Verdict::ok, "every grant is on disk before its reply"});
  else
    out.push_back({prefix + "appendfsync", *appendfsync, Verdict::weakens_exclusion,
                   std::string(*appendfsync == "everysec" ? "an OS crash or power loss can lose about the last second"
                                                          : "an OS crash or power loss can lose the last ~30 s") +
                       " of grants (a crash of Redis alone normally loses none): their holders run on while the lock is free "
                       "again"});

  if (!policy) out.push_back({prefix + "maxmemory-policy", "", Verdict::unknown, unread});
  else if (*policy == "noeviction")
    out.push_back({prefix + "maxmemory-policy", *policy, Verdict::ok,
                   "lock keys are never evicted (a full Redis refuses new grants instead)"});
  else if (maxmemory && *maxmemory == "0")
    out.push_back({prefix + "maxmemory-policy", *policy + " (maxmemory 0)", Verdict::ok,
                   "nothing is evicted while maxmemory is 0 (no limit); set noeviction before setting a limit"});
  else
    // volatile-* too: lock keys carry a TTL, which makes them exactly the keys it evicts.
    out.push_back({prefix + "maxmemory-policy", *policy + (maxmemory ? " (maxmemory " + *maxmemory + ")" : ""),
                   Verdict::breaks_exclusion,
                   std::string(policy->rfind("volatile-", 0) == 0 ? "lock keys carry a TTL, so when memory is full "
                                                                      "they are among the keys evicted"
                                                                    : "when memory is full, lock keys are evicted") +
                       ": a held lock becomes free to another client"});
  return out;
}

}  // namespace dblock::detail::redis
