// The dblock command line parsed into a command and its arguments. Parsing connects to no
// database and runs nothing, so it can be tested and fuzzed on its own (tests/fuzz/fuzz_cli).
#pragma once

#include <cstddef>
#include <ostream>
#include <string>

#include "cli/cli.hpp"

namespace dblock::cli {

struct Invocation {
  enum class Command { none, run, migrate, sweep, list, release, doctor };
  Command command = Command::none;
  // >= 0: nothing to run; exit with this code (help or version printed, or a usage error
  // reported on the error stream).
  int exit_now = -1;
  RunArgs run;                   // run (its command: everything after the first "--")
  Common common;                 // migrate, sweep, list, release, doctor
  std::string every;             // sweep --every
  std::size_t batch = 1000;      // sweep --batch
  bool json = false;             // list --json, doctor --json
  std::string format = "text";   // list --format text|json|prometheus (--json: json)
  std::string release_name;      // release --name
  bool force = false;            // release --force
};

// Never throws for bad input: a usage error comes back as exit_now == usage. Help and
// errors go to `out` and `err`. Values (URLs, durations, names) are checked later, by the
// command that uses them.
Invocation parse_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace dblock::cli
