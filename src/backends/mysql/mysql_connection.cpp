#include "backends/mysql/mysql_connection.hpp"

#include <cppconn/datatype.h>
#include <cppconn/exception.h>
#include <cppconn/resultset.h>
#include <cppconn/resultset_metadata.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>
#include <fcntl.h>
#include <mysql_driver.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <thread>

#include "core/backoff.hpp"
#include "core/tcp_socket_lookup.hpp"

namespace dblock::detail::sqldb {

namespace {

constexpr std::uint64_t no_more_results = ~std::uint64_t{0};

int whole_seconds(std::chrono::milliseconds ms) {  // rounded up, at least 1
  return static_cast<int>(std::max<long long>(1, (ms.count() + 999) / 1000));
}

// Every Connector/C++ error becomes a dblock error here, and nowhere else.
[[noreturn]] void throw_error(int code, const std::string& state, std::string msg, const std::string& where,
                              bool* usable) {
  auto gone = [&] {
    if (usable) *usable = false;
  };
  for (auto& c : msg)
    if (c == '\n') c = ' ';
  const std::string what = "mysql at " + where + ": " + msg;
  if (state == "DL001") throw LockLostError(what);  // <table>_check: a stale fence
  if (state == "DL003") throw BusyError(what);      // <table>_lock_in: a lease holds it; roll back
  if (state == "DL004") throw UsageError(what);     // <table>_lock_in: a server setting in the way
  switch (code) {
    case 1049:  // unknown database
      throw SchemaError(what + " (create the database, or fix the URL's path)");
    case 1146:  // no such table
    case 1305:  // no such procedure: a table whose history lacks a migration this dblock needs
    case 1054:  // no such column: the same
      throw SchemaError(what + " (run `dblock migrate` with the same --table)");
    case 1370:  // EXECUTE denied on a procedure
      throw UnavailableError(what + " (dblock CALLs the <table>_* procedures of migrations/mysql: GRANT EXECUTE on them)");
    case 1205:  // lock wait timeout (and MariaDB's NOWAIT)
    case 3572:  // MySQL 8's NOWAIT
    // A deadlock victim still, after run()'s re-sends: InnoDB rolled it back, and nothing it
    // asked for was taken. (150 processes on one name met it in the grant: the name's row
    // against the fence counter.)
    case 1213:
      throw LockWaitTimeout(what);
    case 3058:  // a GET_LOCK deadlock
    case 1969:  // MariaDB max_statement_time
    case 3024:  // MySQL max_execution_time
      throw TimeoutError(what);
    case 3159:  // MySQL's require_secure_transport
      gone();
      throw UnavailableError(what + " (the server requires TLS: give the URL ssl-ca=, or ssl-mode=REQUIRED)");
    case 1045:  // access denied
      throw UnavailableError(what + " (a wrong user or password, or an account that requires TLS or a client "
                                    "certificate: the URL's ssl-ca, ssl-cert, ssl-key)");
    case 1044:  // no access to the database
    case 1142:  // command denied
    case 1143:
      throw UnavailableError(what);
    case 1040:  // too many connections
    case 1203:  // the server's max_user_connections
      gone();
      throw ServerFullError(what);
    case 1226:  // an account's resource limit: MAX_USER_CONNECTIONS frees when a session ends; the hourly ones do not
      gone();
      if (msg.find("'max_user_connections'") != std::string::npos) throw ServerFullError(what);
      throw UnavailableError(what);
    case 1053:  // server shutdown in progress
    case 1152:  // aborted connection
    case 1317:  // query interrupted (KILL QUERY)
    case 1927:  // MariaDB: connection killed
    case 4031:  // MySQL 8: disconnected by the server
      gone();
      throw UnavailableError(what);
    default:
      break;
  }
  if (code >= 2000 && code < 3000) {  // client-side errors: the connection is gone
    gone();
    // A full server's refusal sent before the TLS handshake ended, which the client quotes
    // ("... cannot be verified: 1040 - Too many connections"): a slot frees, as for 1040.
    if (msg.find(": 1040 - ") != std::string::npos || msg.find(": 1203 - ") != std::string::npos ||
        (msg.find(": 1226 - ") != std::string::npos && msg.find("'max_user_connections'") != std::string::npos))
      throw ServerFullError(what);
    throw UnavailableError(what);
  }
  if (state.rfind("08", 0) == 0) {
    gone();
    throw UnavailableError(what);
  }
  throw InternalError(what + " [MySQL error " + std::to_string(code) + ", SQLSTATE " + state + "]");
}

::sql::mysql::MySQL_Driver* driver() {
  // The driver instance is a process-wide singleton whose creation is not thread-safe.
  static ::sql::mysql::MySQL_Driver* d = ::sql::mysql::get_mysql_driver_instance();
  return d;
}

Value column(const ::sql::ResultSet& rs, ::sql::ResultSetMetaData& meta, unsigned i) {
  if (rs.isNull(i)) return nullptr;
  switch (meta.getColumnType(i)) {
    case ::sql::DataType::BIT:
    case ::sql::DataType::TINYINT:
    case ::sql::DataType::SMALLINT:
    case ::sql::DataType::MEDIUMINT:
    case ::sql::DataType::INTEGER:
    case ::sql::DataType::BIGINT:
    case ::sql::DataType::DECIMAL:
    case ::sql::DataType::NUMERIC:
      return static_cast<std::int64_t>(rs.getInt64(i));
    default:
      return std::string(rs.getString(i).asStdString());
  }
}

// Whether `text` has the keyword `word` (upper case) at `at`, in any case, then a blank.
bool keyword_at(const std::string& text, std::size_t at, std::string_view word) {
  if (text.size() <= at + word.size()) return false;
  for (std::size_t k = 0; k < word.size(); ++k)
    if (std::toupper(static_cast<unsigned char>(text[at + k])) != word[k]) return false;
  return text[at + word.size()] == ' ' || text[at + word.size()] == '\t';
}

}  // namespace

std::vector<std::string> split_statements(const std::string& script) {
  std::vector<std::string> out;
  std::string cur, delimiter = ";";
  auto flush = [&] {
    auto b = cur.find_first_not_of(" \t\r\n");
    if (b != std::string::npos) out.push_back(cur.substr(b, cur.find_last_not_of(" \t\r\n") - b + 1));
    cur.clear();
  };
  // `DELIMITER //` at the start of a line (as the mysql client and Flyway read it) makes
  // `//` end statements until the next DELIMITER line, so a procedure body keeps its ';'.
  auto delimiter_line = [&](std::size_t i) -> std::size_t {  // where the line ends, or npos
    if ((i > 0 && script[i - 1] != '\n') || !keyword_at(script, i, "DELIMITER")) return std::string::npos;
    auto eol = std::min(script.find('\n', i), script.size());
    auto b = script.find_first_not_of(" \t", i + 9), e = script.find_last_not_of(" \t\r", eol - 1);
    if (b >= eol || e == std::string::npos || e < b) return std::string::npos;
    flush();
    delimiter = script.substr(b, e - b + 1);
    return eol;
  };
  for (std::size_t i = 0; i < script.size(); ++i) {
    char c = script[i];
    if (auto eol = delimiter_line(i); eol != std::string::npos) {
      i = eol;
    } else if (c == '\'' || c == '"' || c == '`') {  // a quoted string or identifier, copied whole
      auto end = i + 1;
      while (end < script.size() && script[end] != c) end += script[end] == '\\' ? 2 : 1;
      cur.append(script, i, end - i + 1);
      i = end;
    } else if (c == '-' && script.compare(i, 3, "-- ") == 0) {  // a comment, to the end of the line
      i = script.find('\n', i);
      if (i == std::string::npos) break;
      cur += '\n';
    } else if (c == '#') {
      i = script.find('\n', i);
      if (i == std::string::npos) break;
      cur += '\n';
    } else if (c == '/' && i + 1 < script.size() && script[i + 1] == '*') {
      i = script.find("*/", i + 2);
      if (i == std::string::npos) break;
      ++i;
      cur += ' ';
    } else if (script.compare(i, delimiter.size(), delimiter) == 0) {
      flush();
      i += delimiter.size() - 1;
    } else {
      cur += c;
    }
  }
  flush();
  return out;
}

std::size_t results_of(const std::string& sql) {
  std::size_t n = 0;
  for (const auto& statement : split_statements(sql)) {
    // A CALL answers its procedure's SELECT and then its own status (our procedures run
    // exactly one SELECT on every path: migrations/mysql/).
    n += keyword_at(statement, 0, "CALL") ? 2 : 1;
  }
  return n;
}

std::string splice_params(const std::string& sql, const std::vector<Value>& params) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(sql.size() + 64);
  for (std::size_t i = 0; i < sql.size();) {
    if (sql[i] != '?' || i + 1 >= sql.size() || sql[i + 1] < '0' || sql[i + 1] > '9') {
      out += sql[i++];
      continue;
    }
    std::size_t n = 0, j = i + 1;
    while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') n = n * 10 + static_cast<std::size_t>(sql[j++] - '0');
    if (n == 0 || n > params.size())
      throw InternalError("statement refers to parameter ?" + std::to_string(n) + " of " +
                          std::to_string(params.size()));
    const auto& v = params[n - 1];
    if (auto p = std::get_if<std::int64_t>(&v)) {
      out += std::to_string(*p);
    } else if (auto s = std::get_if<std::string>(&v)) {
      out += "X'";
      for (unsigned char c : *s) {
        out += hex[c >> 4];
        out += hex[c & 15];
      }
      out += '\'';
    } else {
      out += "NULL";
    }
    i = j;
  }
  return out;
}

MySqlConnection::MySqlConnection(const MySqlTarget& t) : where_(t.where), tls_(t.tls), tls_ca_(!t.ssl_ca.empty()) {
  std::vector<std::pair<std::string, int>> servers{{t.host, t.port}};
  servers.insert(servers.end(), t.alternates.begin(), t.alternates.end());
  const bool several = servers.size() > 1;
  std::string refused;  // why each server was passed over
  for (const auto& [host, port] : servers) {
    try {
      if (open(t, host, port, several)) {
        last_used_ = std::chrono::steady_clock::now();
        return;
      }
      refused += (refused.empty() ? "" : "; ") + host + ":" + std::to_string(port) + " is read-only";
    } catch (const ::sql::SQLException& e) {
      if (!several) fail(e);
      refused += (refused.empty() ? "" : "; ") + host + ":" + std::to_string(port) + ": " + e.what();
    }
  }
  throw UnavailableError("mysql at " + where_ + ": no server accepts writes (" + refused + ")");
}

bool MySqlConnection::open(const MySqlTarget& t, const std::string& host, int port, bool writable_only) {
  ::sql::ConnectOptionsMap o;
  if (t.socket.empty()) {
    o["hostName"] = ::sql::SQLString("tcp://" + host + ":" + std::to_string(port));
  } else {
    o["socket"] = ::sql::SQLString(t.socket);
  }
  o["userName"] = ::sql::SQLString(t.user);
  o["password"] = ::sql::SQLString(t.password);
  if (!t.database.empty()) o["schema"] = ::sql::SQLString(t.database);
  o["OPT_CONNECT_TIMEOUT"] = whole_seconds(t.connect_timeout);
  // No read may hang on a dead or stuck server (the contract's bounded waits); a lock
  // wait inside the server is bounded separately, and at most max_lock_wait.
  o["OPT_READ_TIMEOUT"] = whole_seconds(t.statement_timeout + max_lock_wait);
  o["OPT_WRITE_TIMEOUT"] = whole_seconds(t.statement_timeout);
  o["OPT_RECONNECT"] = false;  // a silent reconnect would drop session locks unseen
  o["CLIENT_MULTI_STATEMENTS"] = true;
  o["OPT_CHARSET_NAME"] = ::sql::SQLString("utf8mb4");
  using Tls = MySqlTarget::Tls;
  // Connector/C++ 1.1 on libmariadb: `sslEnforce` asks for TLS but takes plaintext from a
  // server that offers none; `sslVerify` refuses that and verifies the certificate's chain
  // and name; a CA file alone verifies the chain when TLS is used.
  if (t.tls == Tls::verify_identity) o["sslVerify"] = true;
  else if (t.tls != Tls::disabled) o["sslEnforce"] = true;
  if (!t.ssl_ca.empty()) o["sslCA"] = ::sql::SQLString(t.ssl_ca);
  if (!t.ssl_cert.empty()) o["sslCert"] = ::sql::SQLString(t.ssl_cert);
  if (!t.ssl_key.empty()) o["sslKey"] = ::sql::SQLString(t.ssl_key);
  conn_.reset(driver()->connect(o));
  stmt_.reset(conn_->createStatement());
  if (t.tls == Tls::required || t.tls == Tls::verify_ca) {
    auto r = send("SHOW SESSION STATUS LIKE 'Ssl_cipher'", 1);
    if (r.rows.empty() || as_text(r.rows[0].at(1)).empty()) {
      stmt_.reset();
      conn_->close();
      conn_.reset();
      throw UnavailableError("mysql at " + where_ + ": the connection is not encrypted (ssl-mode=" +
                             (t.tls == Tls::required ? "REQUIRED" : "VERIFY_CA") + "): the server offers no TLS");
    }
  }
  server_port_ = t.socket.empty() ? port : -1;
  // READ COMMITTED: no gap locks, so concurrent first acquires of a name deadlock less.
  // Times are taken with UTC_TIMESTAMP, so the session time zone does not matter.
  // A row lock wait is bounded like any statement (the session strategies set their own).
  // Among several servers, whether this one takes writes, in the same round trip.
  lock_wait_s_ = whole_seconds(t.statement_timeout);
  std::string setup =
      "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; "
      "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', "
      "SESSION innodb_lock_wait_timeout = " +
      std::to_string(lock_wait_s_);
  // The session's id too, for canceller(): a KILL QUERY names it.
  auto r = send(setup + "; SELECT CONNECTION_ID(), @@GLOBAL.read_only", 3);
  if (!r.rows.empty()) session_ = as_int(r.rows[0].at(0));
  reached_ = t;  // canceller()'s: this server alone
  reached_.host = host;
  reached_.port = port;
  reached_.alternates.clear();
  if (!writable_only) return true;
  if (!r.rows.empty() && as_text(r.rows[0].at(1)) == "0") return true;
  stmt_.reset();
  conn_->close();
  conn_.reset();
  return false;
}

std::optional<Transport> MySqlConnection::transport() {
  Transport t;
  auto r = send("SHOW SESSION STATUS LIKE 'Ssl_version'", 1);
  if (!r.rows.empty()) t.tls = as_text(r.rows[0].at(1));
  if (!t.tls.empty()) {
    // libmariadb checks the chain whenever it has a CA, and the name under VERIFY_IDENTITY
    // (with the system's CAs when none is given).
    t.name_verified = tls_ == MySqlTarget::Tls::verify_identity;
    t.chain_verified = t.name_verified || tls_ca_;
  }
  return t;
}

std::function<void()> MySqlConnection::canceller() {
  if (session_ <= 0) return nullptr;
  return [target = reached_, id = session_] {
    try {
      MySqlConnection(target).run("KILL QUERY " + std::to_string(id), {});
    } catch (...) {  // not sent: the wait ends at its bound
    }
  };
}

MySqlConnection::~MySqlConnection() {
  try {
    stmt_.reset();
    if (conn_) conn_->close();
  } catch (...) {
  }
  if (socket_ && *socket_ >= 0) ::close(*socket_);
}

int MySqlConnection::socket() noexcept {
  if (socket_) return usable() ? *socket_ : -1;
  socket_ = -1;
  if (server_port_ < 0 || !usable()) return -1;
  try {
    auto r = run("SELECT HOST FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()", {});
    if (r.rows.empty()) return -1;
    const auto host = as_text(r.rows[0].at(0));  // "127.0.0.1:54321", "[::1]:54321"
    const auto colon = host.rfind(':');
    if (colon == std::string::npos) return -1;
    const int fd = tcp_socket_with_ports(std::atoi(host.c_str() + colon + 1), server_port_);
    if (fd >= 0) socket_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  } catch (...) {  // no watch then: the renewal ping still finds a closed connection
  }
  return *socket_;
}

void MySqlConnection::fail(const ::sql::SQLException& e) { throw_mysql_error(e, where_, &usable_); }

bool MySqlConnection::usable() const noexcept { return usable_ && conn_ != nullptr; }

bool MySqlConnection::still_connected() noexcept {
  if (!usable()) return false;
  // Connector/C++ cannot peek at its socket, so a connection idle for a while (long enough
  // for a server restart to have closed it) is pinged before it is handed out.
  if (std::chrono::steady_clock::now() - last_used_ < std::chrono::seconds(1)) return true;
  try {
    usable_ = conn_->isValid();
  } catch (...) {
    usable_ = false;
  }
  last_used_ = std::chrono::steady_clock::now();
  return usable_;
}

Result send_text(::sql::Statement& stmt, const std::string& text, std::size_t statements) {
  Result out;
  bool rows = stmt.execute(text);
  // Every result must be read, or the connection is out of step. Connector/C++ 1.1 cannot
  // tell "no more results" from "the next result is a row count", so the loop counts.
  for (std::size_t i = 0;;) {
    if (rows) {
      std::unique_ptr<::sql::ResultSet> rs(stmt.getResultSet());
      if (rs) {
        out.rows.clear();
        auto* meta = rs->getMetaData();
        auto n = meta->getColumnCount();
        while (rs->next()) {
          Row row;
          row.reserve(n);
          for (unsigned i = 1; i <= n; ++i) row.push_back(column(*rs, *meta, i));
          out.rows.push_back(std::move(row));
        }
        if (statements > 1) out.sets.push_back(out.rows);
      }
    } else {
      auto n = stmt.getUpdateCount();
      if (n != no_more_results) out.affected += static_cast<std::int64_t>(n);
    }
    if (++i >= statements) break;
    rows = stmt.getMoreResults();
  }
  return out;
}

void throw_mysql_error(const ::sql::SQLException& e, const std::string& where, bool* usable) {
  throw_error(e.getErrorCode(), e.getSQLStateCStr(), e.what(), where, usable);
}

Result MySqlConnection::send(const std::string& text, std::size_t statements) {
  auto out = send_text(*stmt_, text, statements);
  last_used_ = std::chrono::steady_clock::now();
  return out;
}

Result MySqlConnection::run(const std::string& sql, const std::vector<Value>& params) {
  // Counted on the text before splicing (literals hold no ';'), once per distinct text:
  // the dialect's texts are a small fixed set, sent over and over.
  auto& statements_in_sql = statement_counts_[sql];
  if (statements_in_sql == 0) statements_in_sql = results_of(sql);
  auto statements = statements_in_sql;
  std::string text = splice_params(sql, params);
  if (begin_pending_) {
    text = "START TRANSACTION; " + text;
    ++statements;
    begin_pending_ = false;
  }
  // A deadlock victim's transaction is rolled back whole by InnoDB. Outside an explicit
  // transaction the text is self-contained (a transaction of its own, or statements safe
  // to repeat), so it is sent again, after a short jittered pause so that the same
  // transactions do not meet again in the same order: with 64 contenders on one name, three
  // immediate attempts were each a victim (dblock-bench, mysql/insert contended). At most
  // kDeadlockAttempts, pauses of 1 to 20 ms: about 100 ms at worst.
  constexpr int kDeadlockAttempts = 10;
  Backoff backoff(std::chrono::milliseconds{1}, std::chrono::milliseconds{20});
  for (int attempt = 1;; ++attempt) {
    try {
      return send(text, statements);
    } catch (const ::sql::SQLException& e) {
      if (!in_transaction_ && usable_ && e.getErrorCode() != 0) {
        // A text that failed half-way may have left its transaction open, and the row wait
        // it set for its grant (the dialect's grant texts put the session's back at their
        // end, which a failed text does not reach).
        try {
          send("ROLLBACK; SET SESSION innodb_lock_wait_timeout = " + std::to_string(lock_wait_s_), 2);
        } catch (...) {
        }
        if (e.getErrorCode() == 1213 && attempt < kDeadlockAttempts) {
          std::this_thread::sleep_for(backoff.next(std::chrono::milliseconds{0}));
          continue;
        }
      }
      fail(e);
    }
  }
}

void MySqlConnection::run_script(const std::string& sql) {
  try {
    for (const auto& statement : split_statements(sql)) send(statement, 1);
  } catch (const ::sql::SQLException& e) {
    fail(e);
  }
}

void MySqlConnection::begin() {
  if (in_transaction_) throw InternalError("mysql session: nested transaction");
  in_transaction_ = true;
  begin_pending_ = true;
}

void MySqlConnection::commit() {
  bool sent = !begin_pending_;
  in_transaction_ = begin_pending_ = false;
  if (!sent) return;
  try {
    send("COMMIT", 1);
  } catch (const ::sql::SQLException& e) {
    fail(e);
  }
}

void MySqlConnection::rollback() noexcept {
  bool sent = in_transaction_ && !begin_pending_;
  in_transaction_ = begin_pending_ = false;
  if (!sent || !usable()) return;
  try {
    send("ROLLBACK", 1);
  } catch (...) {
    usable_ = false;  // a connection that cannot roll back must not be reused
  }
}

}  // namespace dblock::detail::sqldb
