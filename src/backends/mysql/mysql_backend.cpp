// MySQL and MariaDB through the generic SqlBackend. MySQL has no LISTEN/NOTIFY: a fair lease
// waiter blocks in GET_LOCK on the turn key of the waiter ahead of it, other lease waiters
// poll, bounded by the holder's time left (docs/ARCHITECTURE.md, "Waiting and wake-ups"),
// and the session strategies wait inside the server.
#include "backends/mysql/mysql_backend.hpp"

#include <cctype>
#include <mutex>
#include <optional>
#include <tuple>

#include "backends/mysql/mysql_dialect.hpp"
#include "backends/mysql/mysql_connection.hpp"
#include "backends/mysql/mysql_turn_keys.hpp"
#include "core/pem_file.hpp"
#include "dblock/errors.hpp"
#include "sql/sql_backend.hpp"

namespace dblock::detail {

namespace {

using Tls = sqldb::MySqlTarget::Tls;

// ssl-mode as the mysql client spells it, in any case, '-' or '_'.
Tls tls_mode(std::string text) {
  for (auto& c : text) c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (text == "DISABLED") return Tls::disabled;
  if (text == "PREFERRED") return Tls::preferred;
  if (text == "REQUIRED") return Tls::required;
  if (text == "VERIFY_CA") return Tls::verify_ca;
  if (text == "VERIFY_IDENTITY") return Tls::verify_identity;
  throw UsageError("bad mysql URL: ssl-mode must be DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY");
}

// The URL's TLS parameters. Without ssl-mode: VERIFY_IDENTITY once a CA is given, REQUIRED
// with a client certificate alone, else PREFERRED (TLS when the server offers it, as the
// mysql client does); over a Unix socket, none.
void read_tls(const Url& url, sqldb::MySqlTarget& t) {
  std::optional<Tls> mode;
  for (const auto& [key, value] : url.query) {
    if (key == "socket") continue;
    if (key == "ssl-mode") mode = tls_mode(value);
    else if (key == "ssl-ca") t.ssl_ca = (read_pem_file("mysql", key, value), value);
    else if (key == "ssl-cert") t.ssl_cert = (read_pem_file("mysql", key, value), value);
    else if (key == "ssl-key") t.ssl_key = (read_pem_file("mysql", key, value), value);
    else throw UsageError("unknown mysql URL parameter '" + key + "' (known: socket, ssl-mode, ssl-ca, ssl-cert, ssl-key)");
  }
  const bool files = !t.ssl_ca.empty() || !t.ssl_cert.empty();
  if (t.ssl_cert.empty() != t.ssl_key.empty()) throw UsageError("bad mysql URL: ssl-cert and ssl-key go together");
  if (!t.socket.empty()) {
    if (mode || files) throw UsageError("bad mysql URL: no TLS over a Unix socket (?socket=): drop the ssl-* parameters");
    t.tls = Tls::disabled;
    return;
  }
  if (mode == Tls::disabled && files) throw UsageError("bad mysql URL: ssl-mode=DISABLED with TLS files");
  if (mode == Tls::verify_ca && t.ssl_ca.empty()) throw UsageError("bad mysql URL: ssl-mode=VERIFY_CA needs ssl-ca");
  t.tls = mode ? *mode : !t.ssl_ca.empty() ? Tls::verify_identity : files ? Tls::required : Tls::preferred;
}

}  // namespace

sqldb::MySqlTarget mysql_target(const Url& url, const ClientOptions& options) {
  sqldb::MySqlTarget t;
  for (std::size_t i = 0; i < url.hosts.size(); ++i) {
    const auto& hp = url.hosts[i];
    std::pair<std::string, int> server{hp.host.empty() ? "127.0.0.1" : hp.host, hp.port ? hp.port : 3306};
    if (i == 0) std::tie(t.host, t.port) = server;
    else t.alternates.push_back(server);
  }
  if (auto it = url.query.find("socket"); it != url.query.end()) {
    if (url.hosts.size() > 1) throw UsageError("a mysql URL with ?socket= names one server");
    t.socket = it->second;
  }
  read_tls(url, t);
  t.user = url.user;
  t.password = url.password;
  t.database = url.path;
  // The database is written into SQL text as the lock table's schema: it follows the rule of
  // a table name's parts, so nothing in it needs quoting (nor could break out of it).
  bool plain_database = true;
  try {
    plain_database = t.database.empty() || parse_table_name(t.database).schema.empty();
  } catch (const UsageError&) {
    plain_database = false;
  }
  if (!plain_database)
    throw UsageError("bad mysql URL: the database must be letters, digits and _ (it is the lock table's schema)");
  t.connect_timeout = options.connect_timeout;
  t.statement_timeout = options.statement_timeout;
  t.where = url.redacted();
  return t;
}

std::unique_ptr<Backend> open_mysql(const Url& url, const ClientOptions& options) {
  const auto t = mysql_target(url, options);
  // Every statement names the table with its database, so GET_LOCK keys (server-wide) and
  // messages say which database's locks they are.
  auto table = parse_table_name(options.table);
  if (table.schema.empty()) {
    if (t.database.empty())
      throw UsageError(
          "a mysql URL needs a database (mysql://user:pass@host:port/DATABASE), "
          "or give the table as database.table");
    table.schema = t.database;
  }
  auto connect = [t]() -> std::unique_ptr<sqldb::Connection> { return std::make_unique<sqldb::MySqlConnection>(t); };
  ClientOptions qualified = options;
  qualified.table = table.qualified();
  auto backend = std::make_unique<sqldb::SqlBackend>(sqldb::mysql_dialect(), table, connect, qualified, nullptr,
                                                     sqldb::mysql_turn_keys(sqldb::mysql_dialect(), table, options.pool_size));
  backend->start(options.auto_migrate.value_or(false));
  return backend;
}

}  // namespace dblock::detail
