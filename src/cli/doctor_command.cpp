// dblock doctor: the server settings that exclusion and fences rely on, and how the traffic to
// the server is protected, each with what it means; and the same warnings after `dblock
// migrate`, where a new deployment is set up.
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "cli/cli.hpp"

namespace dblock::cli {

namespace {

std::string shown(const SettingCheck& c) { return c.value.empty() ? c.setting + " (not read)" : c.setting + " = " + c.value; }

}  // namespace

int doctor_command(const Common& c, bool json) {
  // Nothing is created: a doctor run must not be what makes the lock table.
  auto client = Client::open(c.server_url(), c.client_options(false));
  auto checks = client->check_settings();
  std::size_t problems = 0;
  for (const auto& check : checks) problems += is_problem(check.verdict);
  if (json) {
    auto out = nlohmann::json::array();
    for (const auto& check : checks)
      out.push_back({{"setting", check.setting},
                     {"value", check.value},
                     {"verdict", std::string(to_string(check.verdict))},
                     {"meaning", check.meaning}});
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "dblock doctor: " << client->backend() << " at " << client->url() << "\n";
    for (const auto& check : checks)
      std::cout << fmt::format("{:<17}  {}\n{:<17}    {}\n", to_string(check.verdict), shown(check), "", check.meaning);
  }
  if (problems == 0) return ok;
  // One line on stderr, like every failing command, for scripts and cron mails.
  const bool exposed = std::any_of(checks.begin(), checks.end(), [](const auto& c) { return c.verdict == Verdict::exposed; });
  problems -= exposed;
  std::cerr << "dblock: ";
  if (problems > 0)
    std::cerr << problems << (problems == 1 ? " setting weakens or breaks" : " settings weaken or break")
              << " the locks' guarantees (see docs/RELIABILITY.md)" << (exposed ? "; " : "");
  if (exposed) std::cerr << "the traffic to the server is exposed on the network (see docs/SECURITY.md)";
  std::cerr << "\n";
  return config;
}

void warn_settings(Client& client) noexcept {
  try {
    for (const auto& check : client.check_settings())
      if (is_problem(check.verdict))
        std::cerr << "dblock: warning: " << shown(check) << " " << to_string(check.verdict) << ": " << check.meaning
                  << " (dblock doctor)\n";
  } catch (const std::exception& e) {
    std::cerr << "dblock: warning: could not read the server settings (dblock doctor): " << e.what() << "\n";
  }
}

}  // namespace dblock::cli
