#include "sql/sql_backend.hpp"

#include <algorithm>

#include "core/owner.hpp"
#include "sql/lease_drivers.hpp"
#include "sql/session_drivers.hpp"
#include "sql/migrator.hpp"

namespace dblock::detail::sql {

SqlBackend::SqlBackend(const Dialect& dialect, TableName table, SessionPool::Factory factory,
                       const ClientOptions& options, std::shared_ptr<Notifier> notifier)
    : raw_(dialect),
      table_(std::move(table)),
      d_(dialect.rendered(table_)),
      factory_(factory),
      max_idle_(options.pool_size),
      statement_timeout_(options.statement_timeout),
      pool_(std::move(factory), options.pool_size, options.connect_timeout + options.statement_timeout),
      notifier_(options.notifications ? std::move(notifier) : nullptr) {}

std::unique_ptr<LockDriver> SqlBackend::make_driver(Strategy strategy) {
  bool offered = std::find(raw_.strategies.begin(), raw_.strategies.end(), strategy) != raw_.strategies.end();
  if (offered && strategy == Strategy::insert) return std::make_unique<InsertDriver>(pool_, d_, notifier_);
  if (offered && strategy == Strategy::optimistic) return std::make_unique<OptimisticDriver>(pool_, d_, notifier_);
  if (offered && strategy == Strategy::for_update) return std::make_unique<ForUpdateDriver>(factory_, d_, max_idle_);
  if (offered && strategy == Strategy::advisory)
    return std::make_unique<AdvisoryDriver>(factory_, d_, max_idle_, table_.qualified(), statement_timeout_);
  std::string offers;
  for (auto s : raw_.strategies) offers += (offers.empty() ? "" : ", ") + std::string(to_string(s));
  throw UsageError("strategy '" + std::string(to_string(strategy)) + "' is not offered by the " + raw_.name +
                   " backend (it offers " + offers + ")");
}

std::vector<std::string> SqlBackend::migrate() {
  auto s = pool_.get();
  return sql::migrate(*s, d_, raw_, table_, migrations_for(raw_.name, embedded_migrations()),
                               "dblock@" + host_name());
}

std::size_t SqlBackend::sweep(std::size_t batch) {
  std::size_t total = 0;
  for (;;) {  // one short transaction per batch, so acquirers interleave with a large sweep
    auto s = pool_.get();
    std::size_t n = 0;
    if (d_.sweep_pick.empty()) {
      n = static_cast<std::size_t>(s->run(d_.sweep, {static_cast<std::int64_t>(batch)}).affected);
    } else {
      Transaction tx(*s);
      for (const auto& row : s->run(d_.sweep_pick, {static_cast<std::int64_t>(batch)}).rows)
        n += static_cast<std::size_t>(s->run(d_.sweep, {row.at(0)}).affected);
      tx.commit();
    }
    total += n;
    if (n < batch) return total;
  }
}

std::vector<LeaseInfo> SqlBackend::list() {
  auto s = pool_.get();
  std::vector<LeaseInfo> out;
  using std::chrono::milliseconds;
  for (const auto& row : s->run(d_.list).rows) {
    LeaseInfo info;
    info.name = as_text(row[0]);
    info.owner = as_text(row[1]);
    info.fence = static_cast<std::uint64_t>(as_int(row[2]));
    info.holds = static_cast<std::uint32_t>(as_int(row[3]));
    info.acquired_at = std::chrono::system_clock::time_point(milliseconds{as_int(row[4])});
    info.expires_at = std::chrono::system_clock::time_point(milliseconds{as_int(row[5])});
    out.push_back(std::move(info));
  }
  return out;
}

bool SqlBackend::force_release(const std::string& name) {
  auto s = pool_.get();
  bool freed = s->run(d_.force_release, {name}).affected > 0;
  if (freed && notifier_) notifier_->released(name);
  return freed;
}

}  // namespace dblock::detail::sql
