#include "bench/floors/mysql_floor.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <stdexcept>

#include "backends/mysql/mysql_connection.hpp"  // splice_params: the literals as dblock writes them
#include "backends/mysql/mysql_dialect.hpp"
#include "bench/backends/mysql_conn.hpp"
#include "bench/floors/floor.hpp"
#include "core/validate.hpp"
#include "sql/dialect.hpp"

namespace dblock_bench {

namespace {

namespace sqldb = dblock::detail::sqldb;

class MySqlFloorSession final : public FloorSession {
 public:
  MySqlFloorSession(const std::string& url, const dblock::ClientOptions& options, int i)
      : c_(url, options, fmt::format("floor {}", i)), owner_(fmt::format("floor-{}", i)) {
    const auto& d = sqldb::mysql_dialect();
    const auto table = dblock::detail::parse_table_name(options.table);
    grant_ = sqldb::splice_params(sqldb::render(d[sqldb::Statement::insert_acquire], table, d.now_ms),
                                  {std::string(kName), owner_, std::int64_t{30'000}, std::int64_t{0},
                                   std::int64_t{10'000}});  // ticket 0: the floor keeps its own order; row wait 10 s
    release_ = sqldb::render(d[sqldb::Statement::insert_release], table, d.now_ms);
  }
  std::uint64_t grant() override {
    return static_cast<std::uint64_t>(c_.run(grant_).value.value_or(0));  // 0: busy
  }
  void release(std::uint64_t fence) override {
    auto text =
        sqldb::splice_params(release_, {std::string(kName), owner_, static_cast<std::int64_t>(fence)});
    if (c_.run(text).affected < 1)
      throw std::runtime_error("mysql floor hand-off: the release found no row");
  }

 private:
  static constexpr const char* kName = "bench-floor";
  Conn c_;
  std::string owner_, grant_, release_;
};

class MySqlSessionFloorSession final : public FloorSession {
 public:
  MySqlSessionFloorSession(const std::string& url, const dblock::ClientOptions& options,
                           const SessionFloorStatements& sql, int i)
      : sql_(sql), c_(url, options, fmt::format("session floor {}", i)),
        aux_(url, options, fmt::format("session floor {} (fence connection)", i)) {}
  std::uint64_t grant() override {  // blocks in the server until the lock is ours
    auto fence = c_.run(sql_.lock).value;
    if (!sql_.draw.empty()) fence = aux_.run(sql_.draw).value;
    if (!fence || *fence <= 0) throw std::runtime_error("mysql session floor hand-off: no fence drawn");
    return static_cast<std::uint64_t>(*fence);
  }
  void release(std::uint64_t) override { c_.run(sql_.unlock); }

 private:
  const SessionFloorStatements& sql_;
  Conn c_, aux_;
};

}  // namespace

std::vector<double> run_mysql_session_floor_handoff(const std::string& url, const dblock::ClientOptions& options,
                                                    const SessionFloorStatements& sql, std::size_t warmup,
                                                    std::size_t n) {
  FloorSpec spec;
  spec.label = sql.label;
  spec.open = [&](int i) { return std::make_unique<MySqlSessionFloorSession>(url, options, sql, i); };
  return run_floor_handoff(spec, warmup, n);  // the server wakes the next waiter itself
}

std::vector<double> run_mysql_floor_handoff(const std::string& url, const dblock::ClientOptions& options,
                                            std::size_t warmup, std::size_t n) {
  FloorSpec spec;
  spec.label = "mysql/bare-cv-handoff";
  spec.open = [&](int i) { return std::make_unique<MySqlFloorSession>(url, options, i); };
  return run_floor_handoff(spec, warmup, n);  // no listener: the releasing thread wakes the next
}

}  // namespace dblock_bench
