#include "bench/floors/pg_floor.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <pqxx/pqxx>

#include "bench/floors/floor.hpp"

namespace dblock_bench {

namespace {

class PgFloorSession final : public FloorSession {
 public:
  PgFloorSession(const std::string& url, const FloorStatements& sql, int i)
      : c_(url), owner_(fmt::format("floor-{}", i)) {
    c_.prepare("floor_grant", sql.grant);
    c_.prepare("floor_release", sql.release);
  }
  std::uint64_t grant() override {
    pqxx::nontransaction tx(c_);
    auto fence =
        tx.exec_prepared("floor_grant", kName, owner_, std::int64_t{30'000}, std::int64_t{0}, std::int64_t{10'000})
            .at(0).at(0).as<std::int64_t>();  // ticket 0: the floor keeps its own arrival order; row wait 10 s
    return static_cast<std::uint64_t>(fence);
  }
  void release(std::uint64_t fence) override {
    pqxx::nontransaction tx(c_);
    tx.exec_prepared("floor_release", kName, owner_, static_cast<std::int64_t>(fence));
  }

 private:
  static constexpr const char* kName = "bench-floor";
  pqxx::connection c_;
  std::string owner_;
};

class PgSessionFloorSession final : public FloorSession {
 public:
  PgSessionFloorSession(const std::string& url, const SessionFloorStatements& sql)
      : sql_(sql), c_(url), aux_(url) {
    c_.prepare("floor_lock", sql.lock);
    c_.prepare("floor_unlock", sql.unlock);
    if (!sql.draw.empty()) aux_.prepare("floor_draw", sql.draw);
  }
  std::uint64_t grant() override {  // blocks in the server until the lock is ours
    pqxx::result r;
    if (sql_.transaction) {
      tx_.emplace(c_);
      r = tx_->exec_prepared("floor_lock", sql_.key);
    } else {
      r = pqxx::nontransaction(c_).exec_prepared("floor_lock", sql_.key);
    }
    if (!sql_.draw.empty()) r = pqxx::nontransaction(aux_).exec_prepared("floor_draw");
    return static_cast<std::uint64_t>(r.at(0).at(0).as<std::int64_t>());
  }
  void release(std::uint64_t) override {
    if (sql_.transaction) {
      tx_->abort();
      tx_.reset();
    } else {
      pqxx::nontransaction(c_).exec_prepared("floor_unlock", sql_.key);
    }
  }

 private:
  const SessionFloorStatements& sql_;
  pqxx::connection c_, aux_;
  std::optional<pqxx::work> tx_;
};

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& c, const std::string& channel, FloorWakes& wakes)
      : pqxx::notification_receiver(c, channel), wakes_(wakes) {}
  void operator()(const std::string&, int) override { wakes_.one(); }

 private:
  FloorWakes& wakes_;
};

}  // namespace

std::vector<double> run_pg_floor_handoff(const std::string& url, const FloorStatements& sql,
                                         std::size_t warmup, std::size_t n) {
  FloorSpec spec;
  spec.label = "postgresql/bare-notify-handoff";
  spec.open = [&](int i) { return std::make_unique<PgFloorSession>(url, sql, i); };
  spec.listen = [&](FloorWakes& wakes) {
    pqxx::connection c(url);
    Receiver r(c, sql.channel, wakes);
    c.get_notifs();  // LISTEN in place before the workers start
    wakes.ready();
    while (!wakes.stopped()) c.await_notification(0, 100'000);
  };
  return run_floor_handoff(spec, warmup, n);
}

std::vector<double> run_pg_session_floor_handoff(const std::string& url, const SessionFloorStatements& sql,
                                                 std::size_t warmup, std::size_t n) {
  FloorSpec spec;
  spec.label = sql.label;
  spec.open = [&](int) { return std::make_unique<PgSessionFloorSession>(url, sql); };
  return run_floor_handoff(spec, warmup, n);  // the server wakes the next waiter itself
}

}  // namespace dblock_bench
