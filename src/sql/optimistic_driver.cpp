// The optimistic strategy: a persistent row per name with a version column. Acquire reads
// the row and compare-and-sets it on the version it read (or, right after a release of our
// own, on the version that release left); whoever updates one row wins.
#include "sql/lease_drivers.hpp"

namespace dblock::detail::sqldb {

namespace {
constexpr std::size_t max_hints = 4096;
}

std::optional<std::int64_t> OptimisticDriver::take_hint(const std::string& name) {
  std::lock_guard lk(hints_mutex_);
  auto it = hints_.find(name);
  if (it == hints_.end()) return std::nullopt;
  auto v = it->second;
  hints_.erase(it);
  return v;
}

void OptimisticDriver::leave_hint(const std::string& name, std::int64_t version) {
  std::lock_guard lk(hints_mutex_);
  if (hints_.size() >= max_hints) hints_.clear();
  hints_[name] = version;
}

Attempt OptimisticDriver::try_acquire(AcquireRequest& r) {
  if (r.mode == Mode::shared || r.permits > 1) return try_shared(r);  // the holders table, as insert's
  return taking_turns(r, [&](Connection& s) { return attempt(s, r); });
}

Attempt OptimisticDriver::attempt(Connection& s, AcquireRequest& r) {
  if (auto first = read_first(s, r)) return std::move(*first);
  // Our own last release of the name left this version: try the compare-and-set on it at
  // once, a round trip fewer than reading first (a Client that takes and releases a name in
  // turn). Only a free row still at that version is won. Any miss (taken or changed since:
  // a release's hint can land just after another of our threads took the name) goes on as
  // if there had been no hint. A waiter from the queue skips it: others held the name since.
  // On a name nobody waits for, the take is the uncontended path's (take_unmarked).
  auto version = take_hint(r.name);
  if (const auto* w = static_cast<const WaitingPlace*>(r.place.get()); w && w->ticket != 0) version.reset();
  if (version) {
    if (auto won = take_unmarked(s, r, *version)) return std::move(*won);
    auto won = grant(s, Statement::optimistic_take,
                     grant_params(r, {r.name, r.owner, std::int64_t{r.ttl.count()}, *version}));
    if (!won) return row_locked(r);
    if (!won->rows.empty() && as_int(won->rows.front()[0]) != 0) return granted(r, won->rows.front());
  }
  // A lost compare-and-set means the row changed under us: read again. Each round either
  // finds a live holder (busy) or races a writer that just changed the row; a few rounds
  // settle it, and the caller's backoff covers the rest.
  std::optional<std::int64_t> lost_on;  // the version the last take lost on
  for (int round = 0; round < 4; ++round) {
    auto read = s.run(d_[Statement::optimistic_read], {r.name});
    // No row yet (or the sweeper removed a free one): there is no version to compare, so the
    // row is created already granted to us, atomically, by the insert strategy's upsert. A
    // separate "create a free row, then compare-and-set it" gave a sweep running meanwhile
    // (which removes free rows) a window to win every round, and cost a round trip more.
    // The upsert also takes over a live row that still names us: a leftover (see
    // LockDriver::try_acquire).
    if (read.rows.empty()) return upsert(s, r);
    const auto& row = read.rows.front();
    auto version = as_int(row[1]);
    auto remaining = milliseconds{as_int(row[2])};
    if (remaining.count() > 0)
      return as_text(row[0]) == r.owner ? upsert(s, r) : busy_behind(s, r, as_text(row[0]), remaining);
    // Still free at the version the last take lost on: nobody changed it, so the take was
    // refused for a waiter ahead in the queue (a dialect that cannot say so in its answer).
    if (lost_on == version) return busy_behind(s, r, std::string(), milliseconds{0});
    auto won = grant(s, Statement::optimistic_take,
                     grant_params(r, {r.name, r.owner, std::int64_t{r.ttl.count()}, version}));
    if (!won) return row_locked(r);
    if (won->rows.empty()) {  // lost the compare-and-set: read again
      lost_on = version;
      continue;
    }
    const auto& answer = won->rows.front();
    if (as_int(answer[0]) != 0) return granted(r, answer);
    // The dialect said why it lost (see Statement::optimistic_take): a holder, or a rival
    // taking it now, is busy; only a row that is free for nobody is worth reading again.
    if (auto left = as_int(answer[1]); left >= 0)
      return busy_behind(s, r, answer.size() > 2 ? as_text(answer[2]) : std::string(), milliseconds{left});
  }
  return busy(s, r);
}

std::optional<Attempt> OptimisticDriver::take_unmarked(Connection& s, AcquireRequest& r, std::int64_t version) {
  if (r.place || !s.keeps_plans() || !d_.offers(Statement::optimistic_take_unmarked)) return std::nullopt;
  auto won = s.run(d_[Statement::optimistic_take_unmarked], {r.name, r.owner, std::int64_t{r.ttl.count()}, version});
  if (won.rows.empty()) return std::nullopt;
  return granted(r, won.rows.front());
}

void OptimisticDriver::freed(const std::string& name, const Result& answer) {
  if (answer.rows.empty() || answer.rows.front().empty()) return;
  if (auto version = as_int(answer.rows.front().back()); version >= 0) leave_hint(name, version);
}

}  // namespace dblock::detail::sqldb
