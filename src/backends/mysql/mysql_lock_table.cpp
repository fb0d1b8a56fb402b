// dblock::mysql::LockTable: the caller's Connector/C++ connection, inside the transaction open
// on it, as a Connection, under the locks written once in sql/in_transaction.cpp. Statements
// go out as text with the parameters spliced in, as on dblock's own connections, one
// statement a round trip (the caller's connection may not allow several).
#include <cppconn/exception.h>
#include <cppconn/statement.h>

#include "backends/mysql/mysql_connection.hpp"
#include "backends/mysql/mysql_dialect.hpp"
#include "dblock/mysql.hpp"
#include "sql/lock_table_impl.hpp"

namespace dblock {
namespace detail::sqldb {

namespace {

const std::string where = "the caller's connection";

class MySqlCallerTransaction final : public CallerConnection {
 public:
  explicit MySqlCallerTransaction(::sql::Connection& c) {
    try {
      stmt_.reset(c.createStatement());
    } catch (const ::sql::SQLException& e) {
      throw_mysql_error(e, where);
    }
  }
  Result run(const std::string& sql, const std::vector<Value>& params) override {
    try {
      return send_text(*stmt_, splice_params(sql, params), results_of(sql));
    } catch (const ::sql::SQLException& e) {
      throw_mysql_error(e, where);
    }
  }

 private:
  std::unique_ptr<::sql::Statement> stmt_;
};

bool autocommit(::sql::Connection& c) {
  try {
    return c.getAutoCommit();
  } catch (const ::sql::SQLException& e) {
    throw_mysql_error(e, where);
  }
}

}  // namespace

template <>
struct CallerTransaction<::sql::Connection> {
  // The in-transaction texts are the same on MySQL 8 and MariaDB.
  static const Dialect& dialect() { return mysql_dialect(); }
  static std::unique_ptr<Connection> adapt(::sql::Connection& c, const LockTableOptions&) {
    auto tx = std::make_unique<MySqlCallerTransaction>(c);
    // Each statement in autocommit is a transaction of its own: a lock would end with it.
    // START TRANSACTION leaves autocommit on; MariaDB says whether one is open, MySQL 8 cannot.
    if (autocommit(c)) {
      bool open = false;
      try {
        open = as_int(tx->run("SELECT @@in_transaction", {}).rows.at(0).at(0)) == 1;
      } catch (const InternalError&) {  // MySQL 8: no such variable
      }
      if (!open)
        throw UsageError(
            "mysql: a lock in the caller's transaction needs a transaction open on the connection "
            "(setAutoCommit(false), or START TRANSACTION on MariaDB)");
    }
    return tx;
  }
};

}  // namespace detail::sqldb

// Exported by the extern declaration in the public header (an attribute here is ignored).
template class LockTable<::sql::Connection>;

}  // namespace dblock
