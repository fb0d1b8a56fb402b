// Test servers: their URLs come from the environment (scripts/services sets them up;
// a developer may point them at their own). A missing URL fails the test, never skips it.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "dblock/dblock.hpp"
#include "sql/connection.hpp"

namespace dblock::test {

// Where a test's locks live: a URL and the client options (the table) to open it with.
struct Namespace {
  std::string url;
  ClientOptions options;
  std::shared_ptr<Client> open() const { return Client::open(url, options); }
};

inline std::string server_url(const char* variable) {
  const char* url = std::getenv(variable);
  if (!url || !*url)
    FAIL(variable << " is not set: run the tests through scripts/test, which starts the servers, "
                     "or point it at your own server");
  return url;
}

// Terminates the server connections that hold the session lock `name` of `table` (a row
// lock on the table, or the name's advisory key); returns how many. Simulates a dropped
// connection. PostgreSQL: touches no other connection. MySQL cannot tell which row a
// transaction holds, so every other connection holding row locks goes (the suites run one
// at a time).
int terminate_lock_holders(const std::string& url, const std::string& table, const std::string& name);

// A raw session on the test server at `url` (PostgreSQL or MySQL, by its scheme), for
// tests that inspect or disturb the server behind the library's back.
using Connection = dblock::detail::sqldb::Connection;
std::unique_ptr<Connection> server_connection(const std::string& url);
// The same over a connection the caller opened beforehand (on the same server as url), so that
// a measurement from just before the call does not include opening one.
int terminate_lock_holders(Connection& s, const std::string& url, const std::string& table, const std::string& name);

// A fresh lock table with a random name, migrated at construction and dropped at
// destruction, so tests never see each other's locks.
class ScratchTable {
 public:
  enum class Server { postgresql, mysql };
  // On the server's test URL, or the one in `variable` (another server of the same kind).
  explicit ScratchTable(Server server, const char* variable = nullptr) : server_(server) {
    url_ = server_url(variable ? variable : server == Server::mysql ? "DBLOCK_TEST_MYSQL_URL" : "DBLOCK_TEST_PG_URL");
    std::random_device rd;
    table_ = "dblock_t_" + std::to_string(rd()) + std::to_string(rd() % 1000);
    ClientOptions o = options();
    o.auto_migrate = true;
    Client::open(url_, o);
  }
  ~ScratchTable();  // tests/support/servers.cpp
  ScratchTable(const ScratchTable&) = delete;
  ScratchTable& operator=(const ScratchTable&) = delete;

  ClientOptions options() const {
    ClientOptions o;
    o.table = table_;
    return o;
  }
  Namespace ns() const { return Namespace{url_, options()}; }
  const std::string& url() const { return url_; }
  const std::string& name() const { return table_; }
  // The name of a table of the test's own beside the lock table ("<name>_data"), for the
  // rows a test protects; created by the test, dropped with the lock table.
  std::string data_table() {
    has_data_ = true;
    return table_ + "_data";
  }

 private:
  Server server_;
  std::string url_, table_;
  bool has_data_ = false;
};

}  // namespace dblock::test
