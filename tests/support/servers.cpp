#include "support/servers.hpp"

#include <cstdio>
#include <thread>

#include "backends/mysql/mysql_dialect.hpp"
#include "backends/postgresql/pg_dialect.hpp"
#include "core/url.hpp"
#include "core/validate.hpp"
#include "sql/dialect.hpp"
#include "sql/session_drivers.hpp"
#ifdef DBLOCK_TEST_POSTGRESQL
#include "backends/postgresql/pg_connection.hpp"
#endif
#ifdef DBLOCK_TEST_MYSQL
#include "backends/mysql/mysql_backend.hpp"
#endif

namespace dblock::test {

namespace {

bool is_mysql(const std::string& url) { return url.rfind("mysql:", 0) == 0 || url.rfind("mariadb:", 0) == 0; }

#ifdef DBLOCK_TEST_MYSQL
int kill_mysql_lock_holders(Connection& s, const std::string& url, const std::string& table, const std::string& name) {
  char key[17];
  auto db = detail::parse_url(url).path;
  std::snprintf(key, sizeof key, "%016llX",
                static_cast<unsigned long long>(detail::sqldb::advisory_key(db + "." + table, name)));
  // InnoDB refreshes its INFORMATION_SCHEMA transaction tables only when they were not
  // read for 0.1 s: poll slower than that, or see the same stale copy forever.
  for (int round = 0; round < 20; ++round) {
    auto ids = s.run(
        "SELECT IS_USED_LOCK(CONCAT('dblock:', ?1)) UNION SELECT trx_mysql_thread_id "
        "FROM information_schema.INNODB_TRX WHERE trx_rows_locked > 0 AND trx_mysql_thread_id <> CONNECTION_ID()",
        {std::string(key)});
    int killed = 0;
    for (const auto& row : ids.rows) {
      if (std::holds_alternative<std::nullptr_t>(row[0])) continue;
      try {
        s.run("KILL ?1", {row[0]});
        ++killed;
      } catch (const InternalError&) {  // 1094: a connection killed before is still rolling back
      }
    }
    if (killed > 0) return killed;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
  return 0;
}
#endif

}  // namespace

std::unique_ptr<Connection> server_connection(const std::string& url) {
#ifdef DBLOCK_TEST_MYSQL
  if (is_mysql(url)) {
    auto t = detail::mysql_target(detail::parse_url(url), ClientOptions{});
    t.alternates.clear();  // the first server's
    return std::make_unique<detail::sqldb::MySqlConnection>(t);
  }
#endif
#ifdef DBLOCK_TEST_POSTGRESQL
  if (!is_mysql(url)) return std::make_unique<detail::sqldb::PgConnection>(url, "test server", std::chrono::seconds(10));
#endif
  FAIL("no test server session for " << url << " in this build");
  return nullptr;
}

int terminate_lock_holders(const std::string& url, const std::string& table, const std::string& name) {
  auto s = server_connection(url);
  return terminate_lock_holders(*s, url, table, name);
}

int terminate_lock_holders(Connection& s, const std::string& url, const std::string& table, const std::string& name) {
#ifdef DBLOCK_TEST_MYSQL
  if (is_mysql(url)) return kill_mysql_lock_holders(s, url, table, name);
#endif
  // pg_locks shows a bigint advisory key as classid (high 32 bits) and objid (low 32 bits).
  auto key = static_cast<std::uint64_t>(detail::sqldb::advisory_key(table, name));
  auto r = s.run(
      "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE pid <> pg_backend_pid() AND ("
      "(locktype = 'relation' AND relation = $1::regclass AND mode = 'RowShareLock') OR "
      "(locktype = 'advisory' AND objsubid = 1 AND classid::bigint = $2::bigint AND objid::bigint = $3::bigint))",
      {table, static_cast<std::int64_t>(key >> 32), static_cast<std::int64_t>(key & 0xffffffffu)});
  return static_cast<int>(r.rows.size());
}

ScratchTable::~ScratchTable() {
  try {
    const detail::sqldb::Dialect* d = nullptr;
#ifdef DBLOCK_TEST_POSTGRESQL
    if (server_ == Server::postgresql) d = &detail::sqldb::postgresql_dialect();
#endif
#ifdef DBLOCK_TEST_MYSQL
    if (server_ == Server::mysql) d = &detail::sqldb::mysql_dialect();
#endif
    if (!d) return;
    auto conn = server_connection(url_);
    if (has_data_) conn->run_script("DROP TABLE IF EXISTS " + table_ + "_data");
    conn->run_script(detail::sqldb::render((*d)[detail::sqldb::Statement::drop_schema], detail::parse_table_name(table_), d->now_ms));
  } catch (...) {  // a leftover table in a throwaway server is harmless
  }
}

}  // namespace dblock::test
