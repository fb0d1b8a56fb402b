#include "support/servers.hpp"

#ifdef DBLOCK_TEST_POSTGRESQL
#include "backends/postgresql/pg_session.hpp"
#include "sql/session_drivers.hpp"
#endif

namespace dblock::test {

int terminate_lock_holders(const std::string& url, const std::string& table, const std::string& name) {
#ifdef DBLOCK_TEST_POSTGRESQL
  detail::sql::PgSession s(url, "test server", std::chrono::seconds(10));
  // pg_locks shows a bigint advisory key as classid (high 32 bits) and objid (low 32 bits).
  auto key = static_cast<std::uint64_t>(detail::sql::advisory_key(table, name));
  auto r = s.run(
      "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE pid <> pg_backend_pid() AND ("
      "(locktype = 'relation' AND relation = $1::regclass AND mode = 'RowShareLock') OR "
      "(locktype = 'advisory' AND objsubid = 1 AND classid::bigint = $2::bigint AND objid::bigint = $3::bigint))",
      {table, static_cast<std::int64_t>(key >> 32), static_cast<std::int64_t>(key & 0xffffffffu)});
  return static_cast<int>(r.rows.size());
#else
  (void)url, (void)table, (void)name;
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
