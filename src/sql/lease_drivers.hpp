// The lease strategies on SQL (insert, optimistic): what they share lives in LeaseDriver,
// what differs is acquire and release. A grant is our row, found again by (name, owner,
// fence): its handle is a KeyedGrant.
#pragma once

#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/driver.hpp"
#include "core/keyed_grant.hpp"
#include "sql/dialect.hpp"
#include "sql/notifier.hpp"
#include "sql/connection_pool.hpp"

namespace dblock::detail::sqldb {

// A shared holder's grant (a reader, a semaphore's holder): its row in ${table}_holders,
// found again by (name, owner, fence) like an exclusive row, through the shared_* statements.
class SharedHolders {
 public:
  SharedHolders(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier)
      : pool_(pool), d_(d), notifier_(std::move(notifier)) {}
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl, int holds);
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence);
  bool release_after(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds keep);

 private:
  ConnectionPool& pool_;
  const Dialect& d_;
  std::shared_ptr<Notifier> notifier_;
};

class LeaseDriver : public LockDriver {
 public:
  LeaseDriver(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier)
      : pool_(pool), d_(d), notifier_(std::move(notifier)) {}

  std::unique_ptr<ReleaseWatch> watch(const std::string& name) override {
    return notifier_ ? notifier_->watch(name) : nullptr;
  }

  // A grant's renewal and release (its handle is a KeyedGrant). Renewal extends our row and
  // writes the hold count; release is the strategy's own.
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                int holds) {
    auto s = pool_.get();
    auto r = s->run(d_[Statement::renew], {name, owner, static_cast<std::int64_t>(fence), std::int64_t{ttl.count()},
                                           std::int64_t{holds}});
    if (r.rows.empty()) return Renewal{false, milliseconds{0}};
    return Renewal{true, milliseconds{as_int(r.rows.front()[0])}};
  }
  virtual bool release(const std::string& name, const std::string& owner, std::uint64_t fence) = 0;
  bool release_after(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds keep) {
    auto s = pool_.get();
    return s->run(d_[Statement::release_after], {name, owner, static_cast<std::int64_t>(fence),
                                                 std::int64_t{keep.count()}}).affected == 1;
  }

 protected:
  Attempt granted(const AcquireRequest& r, const Row& row) {
    return keyed_grant(*this, r, static_cast<std::uint64_t>(as_int(row[0])), milliseconds{as_int(row[1])});
  }
  // The insert strategy's upsert (the dialect's insert_acquire): creates the row granted to
  // us, takes over an expired row or a leftover of ours, or answers busy, in one atomic
  // statement.
  Attempt upsert(Connection& s, AcquireRequest& r) {
    auto won = s.run(d_[Statement::insert_acquire], {r.name, r.owner, std::int64_t{r.ttl.count()}});
    if (won.rows.empty()) return busy(s, r);
    const auto& row = won.rows.front();
    if (as_int(row[0]) == 0)  // the holder's time, and where the dialect says so, its name
      return busy_behind(r, row.size() > 2 ? as_text(row[2]) : std::string(), milliseconds{as_int(row[1])});
    return granted(r, row);
  }
  // Not won: how long the current holder has left, so the waiter sleeps no longer.
  Attempt busy(Connection& s, AcquireRequest& r) {
    auto h = s.run(d_[Statement::holder], {r.name});
    if (h.rows.empty()) return Attempt::busy(milliseconds{0});
    return busy_behind(r, as_text(h.rows.front()[0]), milliseconds{as_int(h.rows.front()[1])});
  }
  // An exclusive acquire found `holder` (an owner; ':readers' or ':semaphore' for shared
  // holders) in its way for `remaining`: busy, except that a semaphore is refused (a mutex
  // is one permit: the two disagree about the name), and that a writer which may wait
  // behind readers marks the name, so that new readers queue behind it (lease_shapes.cpp).
  Attempt busy_behind(AcquireRequest& r, const std::string& holder, milliseconds remaining);
  // A read/write lock's shared hold or one of a semaphore's permits (lease_shapes.cpp).
  Attempt try_shared(AcquireRequest& r);
  // Frees our row with the strategy's release statement and wakes the waiters. Its result
  // when it did, nothing when the row was not ours any more.
  std::optional<Result> free_row(const std::string& sql, const std::string& name, const std::string& owner,
                                 std::uint64_t fence) {
    auto s = pool_.get();
    auto freed = s->run(sql, {name, owner, static_cast<std::int64_t>(fence)});
    if (freed.affected != 1) return std::nullopt;
    if (notifier_) notifier_->released(name);
    return freed;
  }

  ConnectionPool& pool_;
  const Dialect& d_;
  std::shared_ptr<Notifier> notifier_;
  SharedHolders shared_{pool_, d_, notifier_};
};

class InsertDriver final : public LeaseDriver {
 public:
  using LeaseDriver::LeaseDriver;
  Attempt try_acquire(AcquireRequest& r) override;
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence) override;
};

class OptimisticDriver final : public LeaseDriver {
 public:
  using LeaseDriver::LeaseDriver;
  Attempt try_acquire(AcquireRequest& r) override;
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence) override;

 private:
  // The version a release of ours left on a free row (where the dialect's release returns
  // it), per name: this Client's next acquire of the name tries the compare-and-set on it
  // before reading the row. Taken (erased) by every acquire. Bounded: cleared when full.
  std::optional<std::int64_t> take_hint(const std::string& name);
  void leave_hint(const std::string& name, std::int64_t version);
  std::mutex hints_mutex_;
  std::unordered_map<std::string, std::int64_t> hints_;
};

}  // namespace dblock::detail::sqldb
