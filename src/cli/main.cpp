// dblock <command> [options]: the command-line front of the library.
#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>

#include "cli/cli.hpp"
#include "core/duration.hpp"

namespace dblock::cli {

int exit_code(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::usage: return usage;
    case ErrorKind::unavailable:
    case ErrorKind::timeout: return unavailable;
    case ErrorKind::schema: return config;
    case ErrorKind::lost: return lost;
    case ErrorKind::not_owner:
    case ErrorKind::internal: return software;
  }
  return software;
}

ClientOptions Common::client_options(std::optional<bool> auto_migrate) const {
  ClientOptions o;
  o.table = table;
  o.connect_timeout = o.statement_timeout = detail::parse_duration(timeout);
  if (o.statement_timeout.count() == 0) throw UsageError("bad --timeout: must be positive");
  o.auto_migrate = auto_migrate;
  return o;
}

namespace {

void add_common(CLI::App* cmd, Common& c) {
  cmd->add_option("--url", c.url, "Backend URL (sqlite:PATH, sqlite:///abs/path)")
      ->envname("DBLOCK_URL")
      ->default_val("sqlite:dblock.db");
  cmd->add_option("--table", c.table, "Lock table: identifier or schema.identifier")
      ->envname("DBLOCK_TABLE")
      ->default_val("dblock_locks");
  cmd->add_option("--timeout", c.timeout, "Connect and statement timeout (e.g. 5s)")->default_val("5s");
}

}  // namespace
}  // namespace dblock::cli

int main(int argc, char** argv) {
  using namespace dblock::cli;
  // Everything after the first "--" is the command for `dblock run`, untouched by parsing.
  int split = argc;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) {
      split = i;
      break;
    }

  CLI::App app{"dblock: distributed locks kept in the SQL database you already own"};
  app.set_version_flag("--version", std::string("dblock 0.1.0"));
  app.require_subcommand(1);
  app.fallthrough(false);

  RunArgs run;
  auto* run_cmd = app.add_subcommand("run", "Run a command while holding a lock (like flock(1), distributed)");
  add_common(run_cmd, run.common);
  run_cmd->add_option("--name", run.name, "Lock name")->required();
  run_cmd->add_option("--strategy", run.strategy, "insert, optimistic, for-update, advisory, ...");
  run_cmd->add_option("--ttl", run.ttl, "Lease time to live; renewed while the command runs")->default_val("30s");
  auto* wait_opt = run_cmd->add_option("--wait", run.wait, "Give up after this long (default: wait forever)");
  run_cmd->add_flag("--no-wait", run.no_wait, "Give up at once if the lock is busy (--wait 0s)")->excludes(wait_opt);
  run_cmd->add_option("--grace", run.grace, "After a lost lock: SIGTERM, then SIGKILL after this long")
      ->default_val("10s");
  run_cmd->footer("Usage: dblock run --name NAME [options] -- CMD [ARGS...]");

  Common migrate;
  auto* migrate_cmd = app.add_subcommand("migrate", "Create or upgrade the lock table");
  add_common(migrate_cmd, migrate);

  Common sweep;
  std::string every;
  std::size_t batch = 1000;
  auto* sweep_cmd = app.add_subcommand("sweep", "Delete expired leases, once or every DUR");
  add_common(sweep_cmd, sweep);
  sweep_cmd->add_option("--every", every, "Run until stopped, one pass every DUR");
  sweep_cmd->add_option("--batch", batch, "Rows per DELETE")->default_val(1000)->check(CLI::Range(1, 1000000));

  Common list;
  bool json = false;
  auto* list_cmd = app.add_subcommand("list", "Show held locks");
  add_common(list_cmd, list);
  list_cmd->add_flag("--json", json, "Print JSON");

  Common release;
  std::string release_name;
  bool force = false;
  auto* release_cmd = app.add_subcommand("release", "Free a lock whoever holds it (operators only)");
  add_common(release_cmd, release);
  release_cmd->add_option("--name", release_name, "Lock name")->required();
  release_cmd->add_flag("--force", force, "Required: this frees the lock under its holder");

  try {
    app.parse(split, argv);
    if (split < argc && !run_cmd->parsed())
      throw CLI::ExtrasError(std::vector<std::string>{argv + split, argv + argc});
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "dblock: " << e.what() << " (see dblock --help)\n";
    return usage;
  }

  try {
    if (run_cmd->parsed()) {
      if (split + 1 >= argc) {
        std::cerr << "dblock: run: missing command: put it after --, e.g. dblock run --name job -- ./job.sh\n";
        return usage;
      }
      run.command.assign(argv + split + 1, argv + argc);
      return run_command(run);
    }
    if (migrate_cmd->parsed()) return migrate_command(migrate);
    if (sweep_cmd->parsed()) return sweep_command(sweep, every, batch);
    if (list_cmd->parsed()) return list_command(list, json);
    if (release_cmd->parsed()) return release_command(release, release_name, force);
  } catch (const dblock::Error& e) {
    std::cerr << "dblock: " << e.what() << "\n";
    return exit_code(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "dblock: internal error: " << e.what() << "\n";
    return software;
  }
  return software;
}
