#include "support/servers.hpp"

#ifdef DBLOCK_TEST_POSTGRESQL
#include "backends/postgresql/pg_session.hpp"
#endif

namespace dblock::test {

int terminate_lock_holders(const std::string& url) {
#ifdef DBLOCK_TEST_POSTGRESQL
  detail::sql::PgSession s(url, "test server", std::chrono::seconds(10));
  auto r = s.run(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
      "AND pid <> pg_backend_pid() AND (state = 'idle in transaction' "
      "OR pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory'))",
      {});
  return static_cast<int>(r.rows.size());
#else
  (void)url;
  return 0;
#endif
}

ScratchTable::~ScratchTable() {
  try {
#ifdef DBLOCK_TEST_POSTGRESQL
    if (server_ == Server::postgresql) {
      detail::sql::PgSession s(url_, "test server", std::chrono::seconds(10));
      s.run_script("DROP TABLE IF EXISTS " + table_ + ", " + table_ + "_schema_history; DROP SEQUENCE IF EXISTS " +
                   table_ + "_fence");
    }
#endif
  } catch (...) {  // a leftover table in a throwaway server is harmless
  }
}

}  // namespace dblock::test
