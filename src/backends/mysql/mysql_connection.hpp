// The MySQL/MariaDB Connection over Connector/C++ 1.1 (the JDBC-style API). One connection
// with connect, read and write timeouts always set.
//
// Statements go out as text, with parameters spliced in as literals by splice_params(): integers in
// decimal, strings as hex literals (X'...'), so no byte of a name can be read as SQL. That
// lets one round trip carry several statements (a transaction that takes a lock and draws
// its fence), which server-side prepared statements cannot do, and MySQL has no RETURNING.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sql/connection.hpp"

namespace sql {
class Connection;
class Statement;
class SQLException;
}  // namespace sql

namespace dblock::detail::sqldb {

struct MySqlTarget {
  std::string host = "127.0.0.1";
  int port = 3306;
  // The further servers of a URL that names several (a primary and its replicas): each
  // connection goes to the first of all that answers and accepts writes (not read_only).
  std::vector<std::pair<std::string, int>> alternates;
  std::string socket;  // a Unix socket path instead of host:port, if set
  std::string user, password, database;
  std::chrono::milliseconds connect_timeout{5000};
  // Bounds every statement through the client's read timeout (whole seconds, rounded up),
  // plus the longest lock wait a statement may ask the server for (max_lock_wait).
  std::chrono::milliseconds statement_timeout{5000};
  std::string where;  // the server in messages, without the password
  // TLS, as the URL's ssl-mode (the mysql client's modes) and files ask (docs/backends/mysql.md,
  // "TLS"). libmariadb enforces only verify_identity itself; required and verify_ca are
  // checked on the server's word (Ssl_cipher) after connecting.
  enum class Tls { disabled, preferred, required, verify_ca, verify_identity } tls = Tls::preferred;
  std::string ssl_ca, ssl_cert, ssl_key;  // file paths
};

// The longest a session strategy may wait inside the server in one statement; longer
// waits are sliced by the client's waiting loop.
inline constexpr std::chrono::milliseconds max_lock_wait{10'000};

class MySqlConnection final : public Connection {
 public:
  explicit MySqlConnection(const MySqlTarget& target);
  ~MySqlConnection() override;
  // `sql` may hold several statements separated by ';'. The result: the rows of the last
  // statement that returned rows; `affected` only for a text that is one statement and is
  // not the first of a transaction (Connector/C++ 1.1 reports no row counts after the first
  // result, and a pending START TRANSACTION is sent first). dblock reads row counts only
  // from such statements; multi-statement texts report through a SELECT.
  Result run(const std::string& sql, const std::vector<Value>& params) override;
  void run_script(const std::string& sql) override;
  void begin() override;
  void commit() override;
  void rollback() noexcept override;
  bool usable() const noexcept override;
  bool still_connected() noexcept override;
  // Connector/C++ does not tell its socket: the first call asks the server which client port
  // it sees (information_schema.PROCESSLIST, ~0.5 ms of server time, so not at every connect:
  // only connections that come to hold a session lock ask) and finds our descriptor with that
  // port. The watch gets a duplicate, so that it never polls a number Connector/C++ closed
  // and the process reused; it is closed right after the connection. -1 over a Unix socket.
  int socket() noexcept override;
  // KILL QUERY of this session, sent on a connection of its own to the server this one
  // reached (session ids are a server's own: another of the URL's servers must not get it).
  // MySQL and MariaDB let an account kill its own sessions' statements without a privilege.
  std::function<void()> canceller() override;
  // The server's word on TLS (Ssl_version), and what ssl-mode and ssl-ca verified.
  std::optional<Transport> transport() override;

 private:
  // Connects to one server and sets the session up; with `writable_only`, keeps the
  // connection only if the server accepts writes (false otherwise). Throws SQLException.
  bool open(const MySqlTarget& t, const std::string& host, int port, bool writable_only);
  Result send(const std::string& text, std::size_t statements);
  [[noreturn]] void fail(const ::sql::SQLException& e);

  std::string where_;
  MySqlTarget::Tls tls_ = MySqlTarget::Tls::disabled;
  bool tls_ca_ = false;  // the URL gave a CA file
  std::unique_ptr<::sql::Connection> conn_;
  std::unique_ptr<::sql::Statement> stmt_;
  // begin() sends nothing: START TRANSACTION rides with the transaction's first statement.
  bool begin_pending_ = false;
  bool in_transaction_ = false;
  bool usable_ = true;
  std::chrono::steady_clock::time_point last_used_;
  int server_port_ = -1;  // TCP only: what socket() looks for
  std::int64_t session_ = 0;  // CONNECTION_ID(), as open() read it
  MySqlTarget reached_;       // the target, narrowed to the server open() reached
  int lock_wait_s_ = 1;   // the session's innodb_lock_wait_timeout, as open() set it
  std::optional<int> socket_;  // socket()'s answer, once asked
  std::unordered_map<std::string, std::size_t> statement_counts_;  // sql text -> results it answers
};

// A script's statements, without comments (quotes respected; `DELIMITER x` lines as the
// mysql client reads them).
std::vector<std::string> split_statements(const std::string& script);
// How many results a text answers: one per statement, two per CALL.
std::size_t results_of(const std::string& sql);

// Sends `text` on `stmt` and reads all of its `statements` results (results_of): the rows of
// the last that had rows, and the row counts.
Result send_text(::sql::Statement& stmt, const std::string& text, std::size_t statements);
// The dblock error for a Connector/C++ one, naming the server as `where`; a lost connection
// also clears *usable (when given).
[[noreturn]] void throw_mysql_error(const ::sql::SQLException& e, const std::string& where, bool* usable = nullptr);

// `sql` with each ?N replaced by parameter N as a literal (1-based).
std::string splice_params(const std::string& sql, const std::vector<Value>& params);

}  // namespace dblock::detail::sqldb
