// PostgreSQL through the generic SqlBackend, with LISTEN/NOTIFY wake-ups.
#include "backends/postgresql/pg_backend.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "backends/postgresql/pg_dialect.hpp"
#include "backends/postgresql/pg_listener.hpp"
#include "backends/postgresql/pg_connection.hpp"
#include "core/process_shared.hpp"
#include "sql/sql_backend.hpp"

namespace dblock::detail {

namespace {

// dblock's own URL parameters, which libpq would refuse: `pooler=transaction` (connections go
// through a transaction pooler such as PgBouncer's pool_mode = transaction) and, with it,
// `listen_host` and `listen_port`, the server itself, where the release listener connects (a
// LISTEN cannot work through such a pooler). Everything else goes to libpq as it is.
const std::vector<std::string> own_parameters = {"pooler", "listen_host", "listen_port"};

// The URL without dblock's own parameters: its query's pairs are split at '&' (values are
// percent-encoded, so none holds one).
std::string libpq_url(const std::string& original) {
  auto q = original.find('?');
  if (q == std::string::npos) return original;
  std::string out = original.substr(0, q), sep = "?";
  std::string_view rest = std::string_view(original).substr(q + 1);
  while (!rest.empty()) {
    auto amp = rest.find('&');
    auto pair = rest.substr(0, amp);
    auto key = pair.substr(0, pair.find('='));
    if (!pair.empty() && std::find(own_parameters.begin(), own_parameters.end(), key) == own_parameters.end()) {
      out += sep;
      out += pair;
      sep = "&";
    }
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

// The URL as libpq takes it, with a connect timeout added unless the URL sets one: no
// connection attempt may hang.
std::string conninfo(const Url& url, const ClientOptions& o) {
  std::string info = libpq_url(url.original);
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
  auto parameter = [&url](const char* key) -> std::string {
    auto it = url.query.find(key);
    return it == url.query.end() ? std::string() : it->second;
  };
  const std::string pooler = parameter("pooler");
  if (!pooler.empty() && pooler != "transaction")
    throw UsageError("postgresql: pooler='" + pooler + "' is not known (pooler=transaction: through a transaction pooler)");
  const bool pooled = !pooler.empty();
  const std::string listen_host = parameter("listen_host"), listen_port = parameter("listen_port");
  if (!pooled && !(listen_host.empty() && listen_port.empty()))
    throw UsageError("postgresql: listen_host and listen_port go with pooler=transaction (the server behind the pooler)");
  if (!listen_port.empty() && listen_port.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("postgresql: listen_port='" + listen_port + "' is not a port number");
  auto connect = [info, where, timeout, sslmode, pooled]() -> std::unique_ptr<sqldb::Connection> {
    return std::make_unique<sqldb::PgConnection>(info, where, timeout, sslmode, pooled);
  };
  // One listener per process, server and channel (core/process_shared.hpp). PostgreSQL
  // refuses a channel name of 64 bytes or more (every release would fail, and locks would
  // only expire): such a table name is bad input.
  const std::string channel = "dblock_" + table.qualified();
  if (channel.size() > 63)
    throw UsageError("table name '" + table.qualified() + "' is too long for postgresql: its release channel '" +
                     channel + "' would exceed 63 bytes (at most 56 bytes, schema and dot included)");
  // Through a transaction pooler the listener connects to the server itself (libpq's host and
  // port parameters override the URL's), or there is none and waiters poll.
  std::shared_ptr<sqldb::Notifier> listener;
  if (!pooled || !(listen_host.empty() && listen_port.empty())) {
    std::string listen_info = info;
    if (!listen_host.empty()) listen_info += "&host=" + listen_host;
    if (!listen_port.empty()) listen_info += "&port=" + listen_port;
    auto listen_connect = [listen_info, where, timeout, sslmode]() -> std::unique_ptr<sqldb::Connection> {
      return std::make_unique<sqldb::PgConnection>(listen_info, where, timeout, sslmode);
    };
    listener = process_shared<sqldb::PgListener>(listen_info + '\n' + channel, [&] {
      return std::make_shared<sqldb::PgListener>(listen_connect, channel, !pooled);
    });
  }
  auto backend = std::make_unique<sqldb::SqlBackend>(sqldb::postgresql_dialect(), table, connect, options, listener);
  if (pooled)
    backend->refuse_session_strategies(
        "postgresql: through a transaction pooler (pooler=transaction) a session lock would be held by a server "
        "session the pooler lends to other clients: use a lease strategy (insert, optimistic) or connect directly");
  backend->start(options.auto_migrate.value_or(false));
  return backend;
}

}  // namespace dblock::detail
