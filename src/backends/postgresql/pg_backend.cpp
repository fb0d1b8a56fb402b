// PostgreSQL through the generic SqlBackend, with LISTEN/NOTIFY wake-ups.
#include "backends/postgresql/pg_backend.hpp"

#include <unistd.h>

#include <cstdlib>

#include "backends/postgresql/pg_dialect.hpp"
#include "backends/postgresql/pg_listener.hpp"
#include "backends/postgresql/pg_connection.hpp"
#include "core/process_shared.hpp"
#include "sql/sql_backend.hpp"

namespace dblock::detail {

namespace {

// The user's URL goes to libpq as it is (so sslmode and friends work), with a connect
// timeout added unless the URL sets one: no connection attempt may hang.
std::string conninfo(const Url& url, const ClientOptions& o) {
  std::string info = url.original;
  auto add = [&](const std::string& key, const std::string& value) {
    if (url.query.count(key)) return;
    info += (info.find('?') == std::string::npos ? "?" : "&") + key + "=" + value;
  };
  auto secs = std::max<long long>(1, (o.connect_timeout.count() + 999) / 1000);  // libpq takes seconds
  add("connect_timeout", std::to_string(secs));
  add("application_name", "dblock");
  return info;
}

}  // namespace

std::unique_ptr<Backend> open_postgresql(const Url& url, const ClientOptions& options) {
  auto table = parse_table_name(options.table);
  auto info = conninfo(url, options);
  auto where = url.redacted();
  auto timeout = options.statement_timeout;
  // The sslmode libpq applies: the URL's, else the environment's, else its default; `require`
  // verifies the chain as `verify-ca` does once there is a root certificate to verify it with.
  auto setting = [&url](const char* key, const char* variable) -> std::string {
    if (auto it = url.query.find(key); it != url.query.end()) return it->second;
    const char* env = std::getenv(variable);
    return env ? env : "";
  };
  std::string sslmode = setting("sslmode", "PGSSLMODE");
  if (sslmode.empty()) sslmode = "prefer";
  if (sslmode == "require") {
    auto root = setting("sslrootcert", "PGSSLROOTCERT");
    const char* home = std::getenv("HOME");
    if (root.empty() && home) root = std::string(home) + "/.postgresql/root.crt";
    if (!root.empty() && ::access(root.c_str(), R_OK) == 0) sslmode = "verify-ca";
  }
  auto connect = [info, where, timeout, sslmode]() -> std::unique_ptr<sqldb::Connection> {
    return std::make_unique<sqldb::PgConnection>(info, where, timeout, sslmode);
  };
  // One listener per process, server and channel (core/process_shared.hpp). PostgreSQL
  // refuses a channel name of 64 bytes or more (every release would fail, and locks would
  // only expire): such a table name is bad input.
  const std::string channel = "dblock_" + table.qualified();
  if (channel.size() > 63)
    throw UsageError("table name '" + table.qualified() + "' is too long for postgresql: its release channel '" +
                     channel + "' would exceed 63 bytes (at most 56 bytes, schema and dot included)");
  auto listener = process_shared<sqldb::PgListener>(info + '\n' + channel,
                                                  [&] { return std::make_shared<sqldb::PgListener>(connect, channel); });
  auto backend = std::make_unique<sqldb::SqlBackend>(sqldb::postgresql_dialect(), table, connect, options, listener);
  backend->start(options.auto_migrate.value_or(false));
  return backend;
}

}  // namespace dblock::detail
