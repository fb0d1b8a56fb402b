// SqlBackend: a Backend for any SQL database, given its Dialect and a way to open Sessions.
// SQLite uses it as is; server databases add their session strategies on top.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/driver.hpp"
#include "core/validate.hpp"
#include "sql/dialect.hpp"
#include "sql/connection_pool.hpp"
#include "sql/notifier.hpp"
#include "sql/server_waits.hpp"

namespace dblock::detail::sqldb {

class SqlBackend : public Backend {
 public:
  // notifier may be null: the backend cannot tell waiters of releases. waits may be null: lease
  // waiters cannot wait in the server (ServerWaits). With neither, they poll.
  SqlBackend(const Dialect& dialect, TableName table, ConnectionPool::Open factory, const ClientOptions& options,
             std::shared_ptr<Notifier> notifier = nullptr, std::shared_ptr<ServerWaits> waits = nullptr);

  std::string_view name() const noexcept override { return raw_.name; }
  std::vector<Strategy> strategies() const override { return raw_.strategies; }
  Shapes shapes(Strategy strategy) const override {
    const bool lease = strategy == Strategy::insert || strategy == Strategy::optimistic;
    const bool holders = lease && d_.offers(Statement::shared_acquire);
    const bool session_shared = (strategy == Strategy::advisory && d_.offers(Statement::advisory_try_shared)) ||
                                (strategy == Strategy::for_update && d_.offers(Statement::for_update_try_shared));
    return {holders || session_shared, holders};
  }
  std::unique_ptr<LockDriver> make_driver(Strategy strategy) override;
  std::vector<std::string> migrate() override;
  std::size_t sweep(std::size_t batch) override;
  std::vector<LeaseInfo> list() override;
  bool force_release(const std::string& name) override;
  std::vector<SettingCheck> check_settings() override;
  std::optional<Transport> transport() override;
  std::uint64_t draw_fence() override;
  std::string table_name() const override { return table_.qualified(); }

  // Opens one session now, so that an unreachable server, a refused password or a bad file
  // fails here rather than at first use; then applies missing migrations if asked.
  void start(bool auto_migrate);

  ConnectionPool& pool() noexcept { return pool_; }

  // The session strategies (for-update, advisory) are refused, with this one-line reason
  // (PostgreSQL through a transaction pooler).
  void refuse_session_strategies(std::string why) { session_refusal_ = std::move(why); }

 protected:
  const Dialect& raw_;
  const TableName table_;
  const Dialect d_;  // rendered for table_
  const ConnectionPool::Open factory_;  // session strategies pin connections of their own
  const std::size_t max_idle_;
  const std::chrono::milliseconds statement_timeout_;
  ConnectionPool pool_;
  std::shared_ptr<Notifier> notifier_;
  std::shared_ptr<ServerWaits> waits_;
  std::string session_refusal_;
};

}  // namespace dblock::detail::sqldb
