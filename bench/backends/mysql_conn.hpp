// dblock-bench's MySQL/MariaDB connection for the bare baselines and the hand-off floor:
// Connector/C++ set up as dblock sets up its own (backends/mysql.cpp, floors/mysql_floor.cpp).
#pragma once

#include <cppconn/exception.h>
#include <cppconn/resultset.h>
#include <cppconn/resultset_metadata.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>
#include <mysql_driver.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "backends/mysql/mysql_connection.hpp"  // results_of: how many results a text answers
#include "core/url.hpp"  // the library's own URL parser: the baselines reach the same server
#include "dblock/dblock.hpp"

namespace dblock_bench {

inline constexpr std::uint64_t kNoMoreResults = ~std::uint64_t{0};  // getUpdateCount() after the last result

inline int whole_seconds(std::chrono::milliseconds ms) {  // rounded up, at least 1 (as mysql_session.cpp)
  return static_cast<int>(std::max<long long>(1, (ms.count() + 999) / 1000));
}

// What one text sent back. Connector/C++ 1.1 reports no row count for the statements after
// the first (getUpdateCount() is -1 after getMoreResults()), so `affected` is the first
// statement's; checks of the later ones go through a result set or a later statement.
struct Sent {
  std::int64_t affected = 0;          // rows changed by the first statement
  std::size_t rows = 0;               // rows of the last result set
  std::optional<std::int64_t> value;  // its first row's first column, if not NULL
};

// A connection like dblock's (mysql_session.cpp): the same connect options (multi-statement
// texts, utf8mb4, no reconnect, read and write timeouts) and session settings (READ
// COMMITTED, strict sql_mode, innodb_lock_wait_timeout), and one plain sql::Statement that
// sends text, as dblock does. Connector/C++ errors become std::runtime_error.
class Conn {
 public:
  Conn(const std::string& url, const dblock::ClientOptions& options, std::string what) : what_(std::move(what)) {
    auto u = dblock::detail::parse_url(url);
    ::sql::ConnectOptionsMap o;
    if (auto it = u.query.find("socket"); it != u.query.end()) {
      o["socket"] = ::sql::SQLString(it->second);
    } else {
      std::string host = u.hosts.empty() || u.hosts[0].host.empty() ? "127.0.0.1" : u.hosts[0].host;
      int port = u.hosts.empty() || !u.hosts[0].port ? 3306 : u.hosts[0].port;
      o["hostName"] = ::sql::SQLString("tcp://" + host + ":" + std::to_string(port));
    }
    o["userName"] = ::sql::SQLString(u.user);
    o["password"] = ::sql::SQLString(u.password);
    if (!u.path.empty()) o["schema"] = ::sql::SQLString(u.path);
    o["OPT_CONNECT_TIMEOUT"] = whole_seconds(options.connect_timeout);
    o["OPT_READ_TIMEOUT"] = whole_seconds(options.statement_timeout + std::chrono::milliseconds(10'000));
    o["OPT_WRITE_TIMEOUT"] = whole_seconds(options.statement_timeout);
    o["OPT_RECONNECT"] = false;
    o["CLIENT_MULTI_STATEMENTS"] = true;
    o["OPT_CHARSET_NAME"] = ::sql::SQLString("utf8mb4");
    try {
      // The driver singleton's creation is not thread-safe: this runs on the main thread,
      // never while a dblock client is being opened on another.
      conn_.reset(::sql::mysql::get_mysql_driver_instance()->connect(o));
      stmt_.reset(conn_->createStatement());
    } catch (const ::sql::SQLException& e) {
      fail(e, "connect");
    }
    run("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; "
        "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', SESSION innodb_lock_wait_timeout = " +
        std::to_string(whole_seconds(options.statement_timeout)));
  }
  ~Conn() {
    try {
      stmt_.reset();
      if (conn_) conn_->close();
    } catch (...) {
    }
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Sends `text` in one round trip and reads every result, as MySqlConnection::send does,
  // counting them as MySqlConnection::run does: once per distinct text, with the library's
  // results_of (a CALL answers two: its SELECT, then its status).
  Sent run(const std::string& text) {
    auto& statements = results_[text];
    if (statements == 0) statements = dblock::detail::sqldb::results_of(text);
    Sent out;
    try {
      bool rows = stmt_->execute(text);
      for (std::size_t i = 0;;) {
        if (rows) {
          std::unique_ptr<::sql::ResultSet> rs(stmt_->getResultSet());
          out.rows = 0;
          out.value.reset();
          while (rs && rs->next())
            if (out.rows++ == 0 && !rs->isNull(1)) out.value = static_cast<std::int64_t>(rs->getInt64(1));
        } else if (auto n = stmt_->getUpdateCount(); i == 0 && n != kNoMoreResults) {
          out.affected = static_cast<std::int64_t>(n);
        }
        if (++i >= statements) break;
        rows = stmt_->getMoreResults();
      }
    } catch (const ::sql::SQLException& e) {
      fail(e, text);
    }
    return out;
  }

  // The rows of one query, as text (for the notes and the server counters).
  std::vector<std::vector<std::string>> query(const std::string& text) {
    std::vector<std::vector<std::string>> out;
    try {
      std::unique_ptr<::sql::ResultSet> rs(stmt_->executeQuery(text));
      const auto n = rs->getMetaData()->getColumnCount();
      while (rs->next()) {
        auto& row = out.emplace_back();
        for (unsigned i = 1; i <= n; ++i) row.push_back(rs->isNull(i) ? "NULL" : rs->getString(i).asStdString());
      }
    } catch (const ::sql::SQLException& e) {
      fail(e, text);
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const ::sql::SQLException& e, const std::string& doing) {
    throw std::runtime_error(fmt::format("mysql {}: {} [MySQL error {}, SQLSTATE {}] in: {}", what_, e.what(),
                                         e.getErrorCode(), e.getSQLStateCStr(), doing));
  }

  std::string what_;
  std::unique_ptr<::sql::Connection> conn_;
  std::unique_ptr<::sql::Statement> stmt_;
  std::unordered_map<std::string, std::size_t> results_;  // per text sent
};

}  // namespace dblock_bench
