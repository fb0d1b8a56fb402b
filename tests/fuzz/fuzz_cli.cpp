// The dblock command line (src/cli/args.hpp) on hostile argv: the input split at NUL bytes
// into arguments after "dblock". Nothing is run and no database is touched: after parsing,
// only the pure checks a command makes on its values before connecting (URL, table, name,
// strategy, durations). Properties:
//  - parse_command_line never throws; it picks exactly one command or an exit code
//    (0 for --help/--version, 64 for bad usage, with a message);
//  - `run` gets the arguments after the first "--" untouched, and no other command takes any;
//  - the values' checks throw UsageError and nothing else;
//  - a password in any argument (a URL's, replaced by a canary) shows in no output nor message,
//    whether the URL is given to --url or misplaced (a positional argument CLI11 quotes).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "dblock/duration.hpp"
#include "core/url.hpp"
#include "core/validate.hpp"
#include "fuzz_check.hpp"

using dblock::cli::Invocation;
using fuzz::accepts;
using fuzz::canary;
using fuzz::contains;

namespace {

// CLI11 builds its parser per call; a cap on arguments keeps one input's cost bounded.
constexpr std::size_t max_args = 64;

void check_common(const dblock::cli::Common& c) {
  accepts([&] { c.client_options(); });  // --timeout
  std::string message;
  if (!accepts([&] { dblock::detail::parse_url(c.url); }, &message)) FUZZ_CHECK(!contains(message, canary));
  accepts([&] { dblock::detail::parse_table_name(c.table); });
}

// Each argument's URL password, by the grammar, replaced by the canary (none when an argument
// spells the canary itself: it could then show legitimately).
void plant_canary(std::vector<std::string>& args) {
  for (const auto& a : args)
    if (contains(a, canary)) return;
  for (auto& a : args) {
    fuzz::Authority at;
    if (fuzz::locate_password(a, at)) a = a.substr(0, at.password_begin) + canary + a.substr(at.at);
  }
}

// The value of `--option V` when the arguments before "--" give that option exactly once in
// that form (and never as --option=V): what the parsed command must then hold.
std::optional<std::string> given(const std::vector<std::string>& args, std::vector<std::string>::const_iterator end,
                                 const std::string& option) {
  std::optional<std::string> value;
  int seen = 0;
  for (auto it = args.begin() + 1; it != end; ++it) {
    if (it->rfind(option + "=", 0) == 0) return std::nullopt;
    if (*it == option && ++seen == 1 && it + 1 != end) value = *(it + 1);
  }
  return seen == 1 ? value : std::nullopt;
}

void check_duration(const std::string& text) {
  accepts([&] { dblock::parse_duration(text); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"dblock"};
  std::string current;
  for (std::size_t i = 0; i < size && args.size() < max_args; ++i) {
    if (data[i] == 0) args.push_back(std::move(current)), current.clear();
    else current += static_cast<char>(data[i]);
  }
  if (args.size() < max_args) args.push_back(current);
  plant_canary(args);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());

  std::ostringstream out, err;
  Invocation inv;
  try {
    inv = dblock::cli::parse_command_line(static_cast<int>(argv.size()), argv.data(), out, err);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: parse_command_line threw %s: %s\n", typeid(e).name(), e.what());
    __builtin_trap();
  }
  auto dashes = std::find(args.begin() + 1, args.end(), "--");
  FUZZ_CHECK(!contains(out.str(), canary) && !contains(err.str(), canary));
  if (inv.exit_now >= 0) {
    FUZZ_CHECK(inv.exit_now == 0 || inv.exit_now == dblock::cli::usage);
    FUZZ_CHECK(inv.exit_now == 0 ? !out.str().empty() : !err.str().empty());
    return 0;
  }
  FUZZ_CHECK(inv.command != Invocation::Command::none);
  FUZZ_CHECK((inv.command == Invocation::Command::run) == (dashes != args.end()));
  // What was given is what the command gets (a subcommand sharing another's variables loses it).
  const auto& common = inv.command == Invocation::Command::run ? inv.run.common : inv.common;
  if (auto v = given(args, dashes, "--url")) FUZZ_CHECK(common.url == *v);
  if (auto v = given(args, dashes, "--table")) FUZZ_CHECK(common.table == *v);
  if (auto v = given(args, dashes, "--timeout")) FUZZ_CHECK(common.timeout == *v);
  switch (inv.command) {
    case Invocation::Command::run: {
      const auto& r = inv.run;
      FUZZ_CHECK(!r.command.empty() && std::equal(r.command.begin(), r.command.end(), dashes + 1, args.end()));
      check_common(r.common);
      accepts([&] { dblock::detail::validate_name(r.name); });
      if (!r.strategy.empty()) accepts([&] { dblock::parse_strategy(r.strategy); });
      check_duration(r.ttl);
      check_duration(r.grace);
      if (!r.wait.empty()) check_duration(r.wait);
      break;
    }
    case Invocation::Command::sweep:
      FUZZ_CHECK(inv.batch >= 1 && inv.batch <= 1'000'000);
      check_common(inv.common);
      if (!inv.every.empty()) check_duration(inv.every);
      break;
    case Invocation::Command::release:
      check_common(inv.common);
      accepts([&] { dblock::detail::validate_name(inv.release_name); });
      break;
    default: check_common(inv.common); break;
  }
  return 0;
}
