// dblock migrate | sweep | list | release.
#include <signal.h>

#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include "cli/cli.hpp"
#include "dblock/duration.hpp"

namespace dblock::cli {
namespace {

std::string iso8601(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buf, ms % 1000);
}

}  // namespace

int migrate_command(const Common& c) {
  auto client = Client::open(c.server_url(), c.client_options(false));
  auto applied = client->migrate();
  if (applied.empty()) std::cout << "dblock: table " << c.table << " is up to date\n";
  for (const auto& script : applied) std::cout << "dblock: applied " << script << " to table " << c.table << "\n";
  std::cout.flush();  // the warnings on stderr come after the output above
  warn_settings(*client);
  return ok;
}

int sweep_command(const Common& c, const std::string& every, std::size_t batch) {
  std::optional<std::chrono::milliseconds> period;
  if (!every.empty()) {
    period = parse_duration(every);
    if (period->count() == 0) throw UsageError("bad --every: must be positive");
  }
  if (!period) {
    auto client = Client::open(c.server_url(), c.client_options());
    auto n = client->sweep(batch);  // before any output: a failure prints only its error
    std::cout << "dblock: swept " << n << " expired leases\n";
    return ok;
  }
  // A long-running job: SIGINT/SIGTERM/SIGHUP end it between passes. Blocked before
  // connecting, so that a stop signal during a slow start is taken as a stop, not a kill.
  sigset_t stop;
  sigemptyset(&stop);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, s);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  auto client = Client::open(c.server_url(), c.client_options());
  std::cout << "dblock: sweeping table " << c.table << " every " << every << std::endl;
  for (;;) {
    try {
      if (auto n = client->sweep(batch)) std::cout << "dblock: swept " << n << " expired leases" << std::endl;
    } catch (const Error& e) {  // a failed pass is reported; the job goes on
      std::cerr << "dblock: sweep failed: " << e.what() << std::endl;
    }
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(*period).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    if (sigtimedwait(&stop, nullptr, &ts) > 0) return ok;
  }
}

namespace {

// Prometheus' text format, one gauge family per figure, a series per held lock (labels name
// and owner). Times are Unix timestamps rather than ages, so that a file written by cron and
// scraped later still says the truth (age = time() - dblock_lock_acquired_timestamp_seconds).
std::string label(const std::string& v) {
  std::string out;
  for (char ch : v) {
    if (ch == '\\' || ch == '"') out += '\\';
    if (ch == '\n') out += "\\n";
    else out += ch;
  }
  return out;
}

std::string unix_seconds(std::chrono::system_clock::time_point t) {
  return fmt::format("{:.3f}", std::chrono::duration<double>(t.time_since_epoch()).count());
}

void print_prometheus(const std::vector<LeaseInfo>& leases) {
  std::cout << "# HELP dblock_locks_held Locks held now (not expired).\n# TYPE dblock_locks_held gauge\n"
            << "dblock_locks_held " << leases.size() << "\n";
  struct Family {
    const char *name, *help;
    std::string (*value)(const LeaseInfo&);
  };
  const Family families[] = {
      {"dblock_lock_fence", "The fence of the lock's current grant.",
       [](const LeaseInfo& l) { return std::to_string(l.fence); }},
      {"dblock_lock_holds", "Re-entrant holds of the lock's owner (0: released, kept by hold-at-least).",
       [](const LeaseInfo& l) { return std::to_string(l.holds); }},
      {"dblock_lock_acquired_timestamp_seconds", "When the lock was granted (Unix time).",
       [](const LeaseInfo& l) { return unix_seconds(l.acquired_at); }},
      {"dblock_lock_expires_timestamp_seconds", "When the lease expires unless renewed (Unix time).",
       [](const LeaseInfo& l) { return unix_seconds(l.expires_at); }},
  };
  for (const auto& f : families) {
    std::cout << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " gauge\n";
    for (const auto& l : leases)
      std::cout << f.name << "{name=\"" << label(l.name) << "\",owner=\"" << label(l.owner) << "\"} " << f.value(l)
                << "\n";
  }
}

}  // namespace

int list_command(const Common& c, const std::string& format) {
  auto client = Client::open(c.server_url(), c.client_options());
  auto leases = client->list();
  if (format == "prometheus") {
    print_prometheus(leases);
    return ok;
  }
  if (format == "json") {
    auto out = nlohmann::json::array();
    for (const auto& l : leases)
      out.push_back({{"name", l.name},
                     {"owner", l.owner},
                     {"fence", l.fence},
                     {"holds", l.holds},
                     {"mode", std::string(to_string(l.mode))},
                     {"acquired_at", iso8601(l.acquired_at)},
                     {"expires_at", iso8601(l.expires_at)}});
    std::cout << out.dump(2) << "\n";
    return ok;
  }
  if (leases.empty()) {
    std::cout << "no locks held\n";
    return ok;
  }
  std::size_t w = 4, wo = 5;
  for (const auto& l : leases) w = std::max(w, l.name.size()), wo = std::max(wo, l.owner.size());
  std::cout << fmt::format("{:<{}}  {:<{}}  {:>8}  {:>5}  {:<24}  {:<24}  {}\n", "NAME", w, "OWNER", wo, "FENCE",
                           "HOLDS", "ACQUIRED", "EXPIRES", "MODE");
  for (const auto& l : leases)
    std::cout << fmt::format("{:<{}}  {:<{}}  {:>8}  {:>5}  {:<24}  {:<24}  {}\n", l.name, w, l.owner, wo, l.fence,
                             l.holds, iso8601(l.acquired_at), iso8601(l.expires_at), to_string(l.mode));
  return ok;
}

int release_command(const Common& c, const std::string& name, bool force) {
  if (!force)
    throw UsageError("release: refusing without --force (it frees the lock under a holder that may still run)");
  const auto url = c.server_url();
  Client::check_lock(url, name);  // a bad name is refused before open() creates anything
  auto client = Client::open(url, c.client_options());
  if (client->force_release(name)) std::cout << "dblock: released lock '" << name << "'\n";
  else std::cout << "dblock: lock '" << name << "' was not held\n";
  return ok;
}

}  // namespace dblock::cli
