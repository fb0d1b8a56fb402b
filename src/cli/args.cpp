// The CLI11 setup of the dblock command (src/cli/args.hpp).
#include "cli/args.hpp"

#include <CLI/CLI.hpp>
#include <cstring>

#include "dblock/duration.hpp"
#include "dblock/version.hpp"

namespace dblock::cli {

ClientOptions Common::client_options(std::optional<bool> auto_migrate) const {
  ClientOptions o;
  o.table = table;
  o.connect_timeout = o.statement_timeout = parse_duration(timeout);
  if (o.statement_timeout.count() == 0) throw UsageError("bad --timeout: must be positive");
  o.auto_migrate = auto_migrate;
  return o;
}

namespace {

void add_common(CLI::App* cmd, Common& c) {
  auto* url = cmd->add_option("--url", c.url,
                              "Backend URL: sqlite:PATH, postgresql://, mysql://, redis://, rediss://, redis-sentinel://, "
                              "redlock://, zookeeper://, etcd://")
                   ->envname("DBLOCK_URL")
                   ->default_val("sqlite:dblock.db");
  cmd->add_option("--url-file", c.url_file,
                  "Read the URL from the first line of this file, which only its owner may read (keeps a "
                  "password out of the command line and the environment)")
      ->envname("DBLOCK_URL_FILE")
      ->excludes(url);
  cmd->add_option("--table", c.table, "Lock table: identifier or schema.identifier")
      ->envname("DBLOCK_TABLE")
      ->default_val("dblock_locks");
  cmd->add_option("--timeout", c.timeout, "Connect and statement timeout (e.g. 5s)")->default_val("5s");
}

}  // namespace

Invocation parse_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  Invocation inv;
  // Everything after the first "--" is the command for `dblock run`, untouched by parsing.
  int split = argc;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--") == 0) {
      split = i;
      break;
    }

  CLI::App app{"dblock: distributed locks kept in the database your service already owns"};
  app.set_version_flag("--version", std::string("dblock " DBLOCK_VERSION));
  app.require_subcommand(1);
  app.fallthrough(false);

  RunArgs& run = inv.run;
  auto* run_cmd = app.add_subcommand("run", "Run a command while holding a lock (like flock(1), distributed)");
  add_common(run_cmd, run.common);
  run_cmd->add_option("--name", run.name, "Lock name")->required();
  run_cmd->add_option("--strategy", run.strategy,
                      "insert, optimistic, for-update, advisory, redis, redlock, zookeeper or etcd (default: the "
                      "backend's first)");
  run_cmd->add_option("--ttl", run.ttl, "Lease time to live; renewed while the command runs")->default_val("30s");
  auto* wait_opt = run_cmd->add_option("--wait", run.wait, "Give up after this long (default: wait forever)");
  run_cmd->add_flag("--no-wait", run.no_wait, "Give up at once if the lock is busy (--wait 0s)")->excludes(wait_opt);
  run_cmd->add_flag("--unfair", run.unfair,
                    "Race for the lock instead of waiting in line: whoever asks first after a release wins");
  run_cmd->add_option("--hold-at-least", run.hold_at_least,
                      "Keep the lock taken until this long after it was granted, even if CMD ends sooner "
                      "(lease strategies; against a job started twice by skewed cron clocks)");
  auto* shared_opt = run_cmd->add_flag("--shared", run.shared,
                                       "Hold the lock shared, as one of many readers; an exclusive holder (a writer) "
                                       "excludes them all (strategies that offer it: insert and optimistic, "
                                       "advisory on PostgreSQL, for-update on MySQL, redis, zookeeper, etcd)");
  run_cmd->add_option("--permits", run.permits,
                      "A semaphore: at most N holders at once (1 to 10000; every holder must give the same N)")
      ->default_val(1)
      ->excludes(shared_opt);
  run_cmd->add_option("--grace", run.grace, "After a lost lock: SIGTERM, then SIGKILL after this long")
      ->default_val("10s");
  run_cmd->footer("Usage: dblock run --name NAME [options] -- CMD [ARGS...]");

  // One Common per subcommand: CLI11 writes the defaults of every subcommand's options into
  // their variables, so a shared one would lose the values given to the parsed subcommand.
  Common migrate, sweep, list, release, doctor;
  auto* migrate_cmd = app.add_subcommand("migrate", "Create or upgrade the lock table");
  add_common(migrate_cmd, migrate);

  auto* sweep_cmd = app.add_subcommand("sweep", "Delete expired leases, once or every DUR");
  add_common(sweep_cmd, sweep);
  sweep_cmd->add_option("--every", inv.every, "Run until stopped, one pass every DUR");
  sweep_cmd->add_option("--batch", inv.batch, "Rows per batch, one short transaction each (capped per backend: SQLite 500, MySQL 1000)")->default_val(1000)->check(CLI::Range(1, 1000000));

  auto* list_cmd = app.add_subcommand("list", "Show held locks");
  add_common(list_cmd, list);
  auto* list_json = list_cmd->add_flag("--json", inv.json, "Print JSON (--format json)");
  list_cmd
      ->add_option("--format", inv.format,
                   "text, json, or prometheus (the text format a node-exporter textfile collector reads)")
      ->check(CLI::IsMember({"text", "json", "prometheus"}))
      ->excludes(list_json);

  auto* release_cmd = app.add_subcommand("release", "Free a lock whoever holds it (operators only)");
  add_common(release_cmd, release);
  release_cmd->add_option("--name", inv.release_name, "Lock name")->required();
  release_cmd->add_flag("--force", inv.force, "Required: this frees the lock under its holder");

  auto* doctor_cmd = app.add_subcommand("doctor", "Check the server settings the locks rely on");
  add_common(doctor_cmd, doctor);
  doctor_cmd->add_flag("--json", inv.json, "Print JSON");
  doctor_cmd->footer("Exit status: 0 when every setting read is ok (unknown ones are listed), 78 when one "
                     "weakens or breaks exclusion or fences; 69 when the server cannot be reached.");

  try {
    app.parse(split, argv);
    if (split < argc && !run_cmd->parsed())
      throw CLI::ExtrasError(std::vector<std::string>{argv + split, argv + argc});
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version
      inv.exit_now = app.exit(e, out, err);
      return inv;
    }
    // CLI11 echoes what it did not expect (`dblock list postgresql://u:pw@h/db`, --url forgotten).
    err << "dblock: " << redact_secrets(e.what()) << " (see dblock --help)\n";
    inv.exit_now = usage;
    return inv;
  }

  if (run_cmd->parsed()) {
    if (split + 1 >= argc) {
      err << "dblock: run: missing command: put it after --, e.g. dblock run --name job -- ./job.sh\n";
      inv.exit_now = usage;
      return inv;
    }
    run.command.assign(argv + split + 1, argv + argc);
    inv.command = Invocation::Command::run;
  } else if (migrate_cmd->parsed()) {
    inv.command = Invocation::Command::migrate;
    inv.common = migrate;
  } else if (sweep_cmd->parsed()) {
    inv.command = Invocation::Command::sweep;
    inv.common = sweep;
  } else if (list_cmd->parsed()) {
    inv.command = Invocation::Command::list;
    inv.common = list;
  } else if (release_cmd->parsed()) {
    inv.command = Invocation::Command::release;
    inv.common = release;
  } else if (doctor_cmd->parsed()) {
    inv.command = Invocation::Command::doctor;
    inv.common = doctor;
  }
  return inv;
}

}  // namespace dblock::cli
