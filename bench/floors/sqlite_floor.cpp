#include "bench/floors/sqlite_floor.hpp"

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <thread>

#include "backends/sqlite/sqlite_connection.hpp"
#include "backends/sqlite/sqlite_dialect.hpp"
#include "bench/floors/floor.hpp"
#include "core/validate.hpp"
#include "sql/dialect.hpp"

namespace dblock_bench {

namespace {

namespace sqldb = dblock::detail::sqldb;
using Clock = std::chrono::steady_clock;

class SqliteFloorSession final : public FloorSession {
 public:
  SqliteFloorSession(const std::string& path, const std::string& table,
                     std::chrono::milliseconds busy_timeout, int i)
      : db_(path, SQLite::OPEN_READWRITE), busy_timeout_(busy_timeout), owner_(fmt::format("floor-{}", i)) {
    sqlite3_busy_handler(db_.getHandle(), &SqliteFloorSession::busy_wait, this);
    db_.exec("PRAGMA journal_mode=WAL");
    db_.exec("PRAGMA synchronous=FULL");
    const auto& d = sqldb::sqlite_dialect();
    const auto t = dblock::detail::parse_table_name(table);
    grant_ = std::make_unique<SQLite::Statement>(
        db_, sqldb::render(d[sqldb::Statement::insert_acquire], t, d.now_ms));
    release_ = std::make_unique<SQLite::Statement>(
        db_, sqldb::render(d[sqldb::Statement::insert_release], t, d.now_ms));
  }
  std::uint64_t grant() override {
    auto& st = *grant_;
    st.bind(1, kName);
    st.bind(2, owner_);
    st.bind(3, std::int64_t{30'000});
    st.bind(4, std::int64_t{0});  // ticket 0: the floor keeps its own arrival order
    std::int64_t fence = 0;  // no row: busy
    while (st.executeStep()) fence = st.getColumn(0).getInt64();
    st.reset();
    return static_cast<std::uint64_t>(fence);
  }
  void release(std::uint64_t fence) override {
    auto& st = *release_;
    st.bind(1, kName);
    st.bind(2, owner_);
    st.bind(3, static_cast<std::int64_t>(fence));
    int freed = 0;  // dblock's release answers a row (the queue's next owner) per row it deleted
    while (st.executeStep()) ++freed;
    st.reset();
    if (freed != 1) throw std::runtime_error("sqlite floor hand-off: the release found no row");
  }

 private:
  // Polls as dblock's does (sqlite_connection.cpp): SQLite's own handler sleeps 1, 2, 5, 10
  // ms..., longer than another writer's whole transaction.
  static int busy_wait(void* self, int count) noexcept {
    auto* s = static_cast<SqliteFloorSession*>(self);
    const auto now = Clock::now();
    if (count == 0) s->busy_since_ = now;
    if (now - s->busy_since_ >= s->busy_timeout_) return 0;
    std::this_thread::sleep_for(sqldb::busy_pause(count));
    return 1;
  }

  static constexpr const char* kName = "bench-floor";
  SQLite::Database db_;
  std::chrono::milliseconds busy_timeout_;
  Clock::time_point busy_since_;
  std::string owner_;
  std::unique_ptr<SQLite::Statement> grant_, release_;
};

}  // namespace

std::vector<double> run_sqlite_floor_handoff(const std::string& db_path, const std::string& table,
                                             std::chrono::milliseconds busy_timeout, std::size_t warmup,
                                             std::size_t n) {
  FloorSpec spec;
  spec.label = "sqlite/bare-cv-handoff";
  spec.open = [&](int i) { return std::make_unique<SqliteFloorSession>(db_path, table, busy_timeout, i); };
  return run_floor_handoff(spec, warmup, n);  // no listener: the releasing thread wakes the next
}

}  // namespace dblock_bench
