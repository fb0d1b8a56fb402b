// dblock <command> [options]: the command-line front of the library.
#include <iostream>

#include "cli/args.hpp"
#include "cli/cli.hpp"

namespace dblock::cli {

int exit_code(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::usage: return usage;
    case ErrorKind::unavailable:
    case ErrorKind::timeout: return unavailable;
    case ErrorKind::busy:
    case ErrorKind::cancelled: return busy;
    case ErrorKind::schema: return config;
    case ErrorKind::lost: return lost;
    case ErrorKind::not_owner:
    case ErrorKind::internal: return software;
  }
  return software;
}

}  // namespace dblock::cli

int main(int argc, char** argv) {
  using namespace dblock::cli;
  auto inv = parse_command_line(argc, argv, std::cout, std::cerr);
  if (inv.exit_now >= 0) return inv.exit_now;
  try {
    switch (inv.command) {
      case Invocation::Command::run: return run_command(inv.run);
      case Invocation::Command::migrate: return migrate_command(inv.common);
      case Invocation::Command::sweep: return sweep_command(inv.common, inv.every, inv.batch);
      case Invocation::Command::list: return list_command(inv.common, inv.json ? "json" : inv.format);
      case Invocation::Command::release: return release_command(inv.common, inv.release_name, inv.force);
      case Invocation::Command::doctor: return doctor_command(inv.common, inv.json);
      case Invocation::Command::none: break;
    }
  } catch (const dblock::Error& e) {
    std::cerr << "dblock: " << e.what() << "\n";
    return exit_code(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "dblock: internal error: " << e.what() << "\n";
    return software;
  }
  return software;
}
