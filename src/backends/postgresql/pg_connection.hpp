// The PostgreSQL Connection over libpqxx 6.4: one connection with connect and statement
// timeouts always set, statements prepared once per connection (unnamed, and no session
// setting, through a transaction pooler: `pooled`). libpq has no read timeout,
// and the server's statement_timeout cannot answer through a stalled network, so every round
// trip is also bounded on the client: past statement_timeout + 1 s (or a lock wait allowed
// by allow_wait, + 6 s) a guard thread shuts the socket down, the call fails with
// TimeoutError and the session is discarded.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

#include "sql/connection.hpp"

namespace pqxx {
class connection_base;
class dbtransaction;
class result;
}  // namespace pqxx

namespace dblock::detail::sqldb {

class PgConnection final : public Connection {
 public:
  // conninfo: a libpq URI (the user's URL, with connect_timeout added). `where` names the
  // server in messages without the password; `sslmode` is the one libpq applies (the URL's,
  // or PGSSLMODE's), for transport(). `pooled`: through a transaction pooler (PgBouncer's
  // pool_mode = transaction), where consecutive transactions may run on different server
  // sessions: nothing may rely on session state (named prepared statements, SET).
  PgConnection(const std::string& conninfo, const std::string& where, std::chrono::milliseconds statement_timeout,
               std::string sslmode = "prefer", bool pooled = false);
  ~PgConnection() override;
  Result run(const std::string& sql, const std::vector<Value>& params) override;
  void run_script(const std::string& sql) override;
  void begin() override;
  void commit() override;
  void rollback() noexcept override;
  bool usable() const noexcept override;
  bool keeps_plans() const noexcept override { return !pooled_; }  // named statements: run()
  bool still_connected() noexcept override;
  void allow_wait(std::chrono::milliseconds wait) override { wait_allowed_ = wait; }
  int socket() noexcept override;
  // libpq's cancel request (PQcancel, through libpqxx's cancel_query): a connection of its
  // own to this connection's server, naming this session by its cancel key, so it reaches
  // this session and no other, whatever the URL's other hosts.
  std::function<void()> canceller() override;
  // The backend's TCP keepalives and tcp_user_timeout (set once per TTL on a connection).
  void drop_when_unreachable(std::chrono::milliseconds ttl) override;
  // The server's word on TLS (pg_stat_ssl), and what sslmode verified.
  std::optional<Transport> transport() override;

  // libpqxx's connection, for the listener and the session strategies.
  pqxx::connection_base& connection();

 private:
  // Runs f with the socket guarded (see above); maps libpqxx errors to dblock errors (and
  // marks the session unusable when the connection is gone).
  template <class F>
  auto guarded(F&& f) -> decltype(f());
  std::chrono::milliseconds bound() const;

  // The concrete pqxx::connection, owned through a pimpl: deleting it through
  // connection_base (whose destructor does not close) would leak the connection.
  struct Pqxx;
  std::string where_;
  std::string sslmode_;
  std::unique_ptr<Pqxx> owned_;
  pqxx::connection_base* conn_ = nullptr;
  std::unique_ptr<pqxx::dbtransaction> tx_;  // between begin() and commit()/rollback()
  std::unordered_map<std::string, std::string> prepared_;  // sql -> statement name
  bool usable_ = true;
  bool pooled_ = false;
  std::chrono::milliseconds statement_timeout_;
  std::chrono::milliseconds wait_allowed_{0};  // until the end of the transaction
  long long keepalive_idle_s_ = 0;             // what drop_when_unreachable last set (0: never)
};

// A libpqxx result as the strategies read it: integer columns as numbers, the rest as text.
Result to_result(const pqxx::result& r);

// The same mapping for code that holds no session (connecting).
[[noreturn]] void throw_pg_error(const std::exception& e, const std::string& where, bool* usable = nullptr);

}  // namespace dblock::detail::sqldb
