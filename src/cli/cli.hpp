// Shared pieces of the dblock command: exit codes and the options every command takes.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dblock/dblock.hpp"

namespace dblock::cli {

// sysexits(3) codes, as flock(1)-style tools use them.
enum Exit : int {
  ok = 0,
  usage = 64,        // bad usage or bad input
  unavailable = 69,  // backend unreachable or credentials refused
  software = 70,     // internal error
  busy = 75,         // the lock was not acquired (busy, or the wait timed out)
  lost = 76,         // the lock was lost while the command ran; the command was stopped
  config = 78,       // lock table missing (run `dblock migrate`) or migrations changed, or
                     // (dblock doctor) a server setting weakens or breaks the guarantees
};

int exit_code(ErrorKind kind) noexcept;

struct Common {
  std::string url;
  std::string url_file;  // --url-file / DBLOCK_URL_FILE: the URL read from a private file
  std::string table = "dblock_locks";
  std::string timeout = "5s";  // connect and statement timeout
  ClientOptions client_options(std::optional<bool> auto_migrate = std::nullopt) const;
  // The URL to open: --url, or the first line of --url-file, which must be a regular file
  // that only its owner can read or write (as ssh wants of a key and libpq of .pgpass).
  std::string server_url() const;
};

// `text` with whatever looks like a secret replaced by ****: the password of every
// scheme://user:password@ and the value of every parameter whose name holds "password". For
// messages that may echo what the user typed (CLI11's usage errors).
std::string redact_secrets(const std::string& text);

struct RunArgs {
  Common common;
  std::string name;
  std::string strategy;
  std::string ttl = "30s";
  std::string wait;  // empty: wait forever
  bool no_wait = false;
  bool unfair = false;  // LockOptions::fair = false
  std::string grace = "10s";
  std::string hold_at_least;  // empty: release at the end
  bool shared = false;        // a reader of a read/write lock
  std::uint32_t permits = 1;  // a semaphore when > 1
  std::vector<std::string> command;
};

int run_command(const RunArgs& args);
int migrate_command(const Common& c);
int sweep_command(const Common& c, const std::string& every, std::size_t batch);
int list_command(const Common& c, const std::string& format);  // text, json, prometheus
int release_command(const Common& c, const std::string& name, bool force);
int doctor_command(const Common& c, bool json);
// The settings doctor finds weakening or breaking a guarantee, as warnings on stderr
// (`dblock migrate` prints them after its own output; its exit code stays its own).
void warn_settings(Client& client) noexcept;

}  // namespace dblock::cli
