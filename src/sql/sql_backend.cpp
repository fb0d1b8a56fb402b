#include "sql/sql_backend.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/backoff.hpp"
#include "core/owner.hpp"
#include "sql/lease_drivers.hpp"
#include "sql/session_drivers.hpp"
#include "sql/migrator.hpp"

namespace dblock::detail::sqldb {

namespace {

// The shared pool asks the release listener first: the connection it lends (its own, where it
// reaches the same server) saves a waiting process a second one. The session strategies'
// connections (factory_) are never lent ones: a session lock lives as long as its connection.
// A lent connection is checked as the pool checks an idle one of its own: the server may have
// closed it (a killed backend, a restart) before the listener's thread read that, and a waiter
// woken by the listener's resubscribing would make its attempt on it and fail its whole wait.
ConnectionPool::Open borrowing(ConnectionPool::Open open, std::shared_ptr<Notifier> notifier) {
  if (!notifier) return open;
  return [open = std::move(open), notifier = std::move(notifier)]() -> std::unique_ptr<Connection> {
    if (auto c = notifier->lend(); c && c->still_connected()) return c;
    return open();
  };
}

}  // namespace

SqlBackend::SqlBackend(const Dialect& dialect, TableName table, ConnectionPool::Open factory,
                       const ClientOptions& options, std::shared_ptr<Notifier> notifier,
                       std::shared_ptr<ServerWaits> waits)
    : raw_(dialect),
      table_(std::move(table)),
      d_(dialect.rendered(table_)),
      factory_(factory),
      max_idle_(options.pool_size),
      statement_timeout_(options.statement_timeout),
      pool_(borrowing(std::move(factory), options.notifications ? notifier : nullptr), {options.pool_size, options.pool_size, options.connect_timeout + options.statement_timeout,
                                 dialect.name + " connections"}),
      notifier_(options.notifications ? std::move(notifier) : nullptr),
      waits_(std::move(waits)) {}

std::unique_ptr<LockDriver> SqlBackend::make_driver(Strategy strategy) {
  bool offered = std::find(raw_.strategies.begin(), raw_.strategies.end(), strategy) != raw_.strategies.end();
  const bool session = strategy == Strategy::for_update || strategy == Strategy::advisory;
  if (offered && session && !session_refusal_.empty()) throw UsageError(session_refusal_);
  if (offered && strategy == Strategy::insert)
    return std::make_unique<InsertDriver>(pool_, d_, notifier_, waits_, statement_timeout_);
  if (offered && strategy == Strategy::optimistic)
    return std::make_unique<OptimisticDriver>(pool_, d_, notifier_, waits_, statement_timeout_);
  if (offered && strategy == Strategy::for_update)
    return std::make_unique<ForUpdateDriver>(pool_, factory_, d_, max_idle_);
  if (offered && strategy == Strategy::advisory)
    return std::make_unique<AdvisoryDriver>(pool_, factory_, d_, max_idle_, table_.qualified(), statement_timeout_,
                                            max_idle_);
  throw UsageError(not_offered(strategy, raw_.name, raw_.strategies));
}

std::vector<std::string> SqlBackend::migrate() {
  auto s = pool_.get();
  return sqldb::migrate(*s, d_, raw_, table_, migrations_for(raw_.name, embedded_migrations()),
                               "dblock@" + host_name());
}

// One short transaction per batch, so that acquirers interleave with a large sweep: a batch
// keeps the rows it deletes locked (or, on SQLite, the database) for one statement.
std::uint64_t SqlBackend::draw_fence() {
  if (!d_.offers(Statement::fence_next)) return Backend::draw_fence();
  auto s = pool_.get();
  return static_cast<std::uint64_t>(as_int(s->run(d_[Statement::fence_next]).rows.at(0).at(0)));
}

std::size_t SqlBackend::sweep(std::size_t batch) {
  if (d_.sweep_batch_max > 0) batch = std::min(batch, d_.sweep_batch_max);
  const auto limit = static_cast<std::int64_t>(batch);
  const bool picked = !d_.offers(Statement::sweep);
  // One text for every batch: the list has `batch` markers, a short batch repeats a name.
  const std::string remove = picked ? with_markers(d_[Statement::sweep_delete], batch, d_.marker) : std::string();
  std::size_t total = 0;
  for (;;) {
    std::size_t found = 0;  // expired rows this batch found: fewer than asked, it was the last
    {
      auto s = pool_.get();
      if (!picked) {
        found = static_cast<std::size_t>(s->run(d_[Statement::sweep], {limit}).affected);
        total += found;
      } else {
        // A batch can be a deadlock victim, which the session does not retry inside a
        // transaction: InnoDB keeps the pick's lock on the index entry of a row it skipped
        // (SKIP LOCKED), and an acquirer updating that row waits for the batch while the
        // batch's DELETE waits for the acquirer's row. The victim is rolled back whole, and
        // the batch is simply picked again, after a pause that lets the acquirer finish (a
        // name in constant use, its freed row kept, met three deadlocks in a row under ASan).
        Backoff backoff(milliseconds{1}, milliseconds{20});
        for (int attempt = 1;; ++attempt) {
          try {
            Transaction tx(*s);
            auto rows = s->run(d_[Statement::sweep_pick], {limit}).rows;
            found = rows.size();
            std::size_t deleted = 0;
            if (found > 0) {
              std::vector<Value> names;
              names.reserve(batch);
              for (auto& row : rows) names.push_back(std::move(row.at(0)));
              const Value first = names.front();
              names.resize(batch, first);
              deleted = static_cast<std::size_t>(s->run(remove, names).affected);
            }
            tx.commit();
            total += deleted;
            break;
          } catch (const TimeoutError&) {
            if (attempt >= 8 || !s->usable()) throw;
            std::this_thread::sleep_for(backoff.next(milliseconds{0}));
          }
        }
      }
    }  // the session is back in the pool during the pause
    if (found < batch) break;
    if (d_.sweep_pause.count() > 0) std::this_thread::sleep_for(d_.sweep_pause);
  }
  // Shared holders and writers' marks past their time (the name's own row, once it expires,
  // went above; its holders with it where the dialect's trigger says so), then the tickets
  // of waiters that died.
  for (auto statement : {Statement::sweep_holders, Statement::sweep_queue}) {
    while (d_.offers(statement)) {
      std::size_t deleted = 0;
      {
        auto s = pool_.get();
        deleted = static_cast<std::size_t>(s->run(d_[statement], {limit}).affected);
      }
      total += deleted;
      if (deleted < batch) break;
      if (d_.sweep_pause.count() > 0) std::this_thread::sleep_for(d_.sweep_pause);
    }
  }
  return total;
}

std::vector<LeaseInfo> SqlBackend::list() {
  auto s = pool_.get();
  std::vector<LeaseInfo> out;
  using std::chrono::milliseconds;
  for (const auto& row : s->run(d_[Statement::list]).rows) {
    LeaseInfo info;
    info.name = as_text(row[0]);
    info.owner = as_text(row[1]);
    info.fence = static_cast<std::uint64_t>(as_int(row[2]));
    info.holds = static_cast<std::uint32_t>(as_int(row[3]));
    info.acquired_at = std::chrono::system_clock::time_point(milliseconds{as_int(row[4])});
    info.expires_at = std::chrono::system_clock::time_point(milliseconds{as_int(row[5])});
    if (row.size() > 6 && as_text(row[6]) == "shared") info.mode = Mode::shared;
    out.push_back(std::move(info));
  }
  return out;
}

bool SqlBackend::force_release(const std::string& name) {
  auto s = pool_.get();
  bool freed = s->run(d_[Statement::force_release], {name}).affected > 0;
  if (freed && notifier_) notifier_->released(name);
  return freed;
}

std::vector<SettingCheck> SqlBackend::check_settings() {
  // On a pooled session: the very connection setup dblock's own statements run with.
  auto s = pool_.get();
  return raw_.settings(*s);
}

std::optional<Transport> SqlBackend::transport() { return pool_.get()->transport(); }

void SqlBackend::start(bool auto_migrate) {
  // A first connection checks the URL, the credentials and the server. A server that answered
  // but had no slot free is not a bad URL: the first acquire waits for one (within its own
  // wait, ClientCore::acquire), so a fleet started together does not fail at open.
  try {
    pool_.get();
  } catch (const ServerFullError&) {
    if (auto_migrate) throw;
    return;
  }
  if (auto_migrate) migrate();
}

}  // namespace dblock::detail::sqldb
