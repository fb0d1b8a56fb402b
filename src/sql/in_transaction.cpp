#include "sql/in_transaction.hpp"

#include <algorithm>
#include <thread>

#include "core/backoff.hpp"
#include "sql/session_drivers.hpp"

namespace dblock::detail::sqldb {

InTransaction::InTransaction(const Dialect& dialect, std::string_view table, std::function<std::uint64_t()> draw)
    : table_(parse_table_name(table)), d_(dialect.rendered(table_)), draw_(std::move(draw)) {
  if (!d_.offers(Statement::lock_in) || !d_.offers(Statement::check_in))
    throw UsageError(d_.name + " has no locks in a caller's transaction");
}

// Another transaction or a session lock in the way: the server waits for it (up to 10 s an
// attempt, so a deadline-less wait is not cut by a lock_timeout the caller never set), in
// its own unit (whole seconds on MySQL: a shorter rest is polled out with tries).
// A lease in the way holds no server lock to wait on: the loop sleeps until it may expire,
// polling with backoff for an earlier release.
std::optional<std::uint64_t> InTransaction::lock(Connection& tx, const std::string& name,
                                                 std::optional<Clock::time_point> deadline) const {
  validate_name(name);
  const auto key = advisory_key(table_.qualified(), name);
  constexpr milliseconds slice{10'000};
  Backoff backoff(milliseconds{1}, milliseconds{100});
  for (bool first = true;; first = false) {
    auto now = Clock::now();
    // The first attempt only tries: the uncontended path changes no setting in the server.
    auto wait = first ? milliseconds{0}
                      : deadline ? std::clamp(std::chrono::ceil<milliseconds>(*deadline - now), milliseconds{0}, slice)
                                 : slice;
    wait -= wait % d_.wait_unit;  // a wait below the server's unit is a try
    const auto started = now;
    auto r = tx.run(d_[Statement::lock_in], {name, key, static_cast<std::int64_t>(wait.count())});
    std::int64_t answer;
    if (!r.rows.empty()) answer = as_int(r.rows[0].at(0));
    else {
      auto h = tx.run(d_[Statement::holder], {name});
      answer = h.rows.empty() ? -1 : -std::max<std::int64_t>(1, as_int(h.rows[0].at(1)));
    }
    if (answer > 0 && d_.in_transaction_fence_apart) {
      if (auto drawn = r.rows[0].size() > 1 ? as_int(r.rows[0][1]) : 0; drawn > 0)
        return static_cast<std::uint64_t>(drawn);  // drawn in the transaction (MariaDB's sequence)
      // MySQL 8 (no sequence): the row is locked in the caller's transaction, which the caller
      // rolls back on this error.
      if (!draw_)
        throw UsageError(d_.name + ": on MySQL 8 lock_in draws its fence on a connection of a Client's: make the "
                         "LockTable from that Client");
      // Drawn once the row is locked, then shown to belong to a lock still held: were the
      // caller's connection killed between the two, a successor could lock and draw first.
      auto fence = draw_();
      tx.run(d_[Statement::ping], {});
      return fence;
    }
    if (answer > 0) return static_cast<std::uint64_t>(answer);
    if (answer < 0 && !d_.in_transaction_waits_for_leases) {
      if (deadline) return std::nullopt;
      throw BusyError(d_.name + ": lock '" + name + "' is held by a lease for " + std::to_string(-answer) +
                         " ms more, which cannot be waited for inside the transaction: roll back and try again, "
                         "or use try_lock_in");
    }
    now = Clock::now();
    if (deadline && now >= *deadline) return std::nullopt;
    // Back off before the next attempt unless the server waited this one out: a lease's
    // expiry, a try, or a holder the server cannot wait for (MySQL: an advisory one).
    if (answer < 0 || (!first && now < started + wait)) {
      auto until = now + backoff.next(milliseconds{std::max<std::int64_t>(0, -answer)});
      std::this_thread::sleep_until(deadline ? std::min(until, *deadline) : until);
    }
  }
}

void InTransaction::check(Connection& tx, const std::string& name, std::uint64_t fence) const {
  validate_name(name);
  if (fence == 0 || fence > static_cast<std::uint64_t>(INT64_MAX))
    throw UsageError("bad fence " + std::to_string(fence) + " for lock '" + name + "'");
  if (tx.run(d_[Statement::check_in], {name, static_cast<std::int64_t>(fence)}).rows.empty())
    throw LockLostError(d_.name + ": lock '" + name + "' is not held with fence " + std::to_string(fence) +
                        " (released, expired or taken over)");
}

}  // namespace dblock::detail::sqldb
