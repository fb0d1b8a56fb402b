// Read/write locks and semaphores on the SQL lease strategies (docs/ARCHITECTURE.md, "Lock
// shapes"): shared holders are rows of ${table}_holders, and the name's own row, owned by
// ':readers' or ':semaphore' while they hold, keeps every exclusive acquire out. The dialect's
// shared_* statements do the work; this is the part both lease strategies share.
#include "sql/lease_drivers.hpp"

#include <algorithm>

namespace dblock::detail::sqldb {

namespace {

constexpr std::string_view readers_row = ":readers";
constexpr std::string_view semaphore_row = ":semaphore";
// How long a waiting writer's mark keeps new readers out; each attempt renews it, so a
// writer that gives up without taking it back (a crash) delays readers by this much at most.
constexpr milliseconds mark_for{3000};

std::string asked(const AcquireRequest& r) {
  if (r.mode == Mode::shared) return "a read/write lock's reader";
  if (r.permits > 1) return "a semaphore of " + std::to_string(r.permits) + " permits";
  return "a mutex or a read/write lock's writer";
}

// The name's shape as another acquirer left it, and what this one asks: a usage error,
// since the two programs disagree about what the name is (waiting could never end).
[[noreturn]] void disagree(const AcquireRequest& r, const std::string& held) {
  throw UsageError("lock '" + r.name + "' is held as " + held + ", not as " + asked(r) +
                   ": every acquirer of a name must ask for the same shape");
}

// A busy answer's time to sleep (0: not known) bounded by `cap` (milliseconds::max(): none).
milliseconds sooner(milliseconds remaining, milliseconds cap) {
  if (cap == milliseconds::max()) return remaining;
  return remaining > milliseconds{0} ? std::min(remaining, cap) : cap;
}

}  // namespace

Attempt LeaseDriver::busy_behind(Connection& s, AcquireRequest& r, const std::string& holder,
                                 milliseconds remaining) {
  if (holder == semaphore_row && remaining > milliseconds{0}) disagree(r, "a semaphore");
  // Marked before the ticket is taken, so that no grant of the uncontended path passes it;
  // no ticket on a name without a row (no mark there: it would go unseen).
  if (const auto soon = mark_waiting(s, r); soon == milliseconds{1})
    remaining = soon;
  else
    remaining = sooner(queue(s, r, remaining), soon);
  if (holder == readers_row && remaining > milliseconds{0} && d_.offers(Statement::writer_mark) &&
      r.wait > milliseconds{0}) {
    // Writers preferred: new readers queue behind the mark. The writer comes back (woken by
    // the last reader's release, or at half the mark) and renews it before it ends.
    const auto mark = std::min(mark_for, r.wait);
    s.run(d_[Statement::writer_mark], {r.name, r.owner, std::int64_t{mark.count()}});
    waiting(r).marked = true;
    remaining = std::min(remaining, mark / 2);
  } else if (auto* w = static_cast<WaitingPlace*>(r.place.get()); w && w->marked) {
    s.run(d_[Statement::writer_unmark], {r.name, r.owner});  // the readers went: so does the mark
    w->marked = false;
  }
  Attempt a = Attempt::busy(remaining);
  a.place = std::move(r.place);
  return a;
}

Attempt LeaseDriver::try_shared(AcquireRequest& r) {
  const std::string mode = r.mode == Mode::shared ? "s" : "x";
  const auto permits = static_cast<std::int64_t>(r.mode == Mode::shared ? 1 : r.permits);
  auto s = pool_.get();
  auto won = s->run(d_[Statement::shared_acquire], {r.name, r.owner, mode, permits, std::int64_t{r.ttl.count()}});
  if (won.rows.empty()) won = s->run(d_[Statement::shared_busy], {r.name, r.owner, mode, permits});
  const auto& row = won.rows.at(0);
  const auto fence = as_int(row[0]);
  const auto n = as_int(row[1]);
  if (fence > 0) {
    return Attempt{std::make_unique<KeyedGrant<GrantRows>>(shared_, r.name, r.owner, static_cast<std::uint64_t>(fence)),
                   static_cast<std::uint64_t>(fence), milliseconds{n}, nullptr};
  }
  if (fence == -1) disagree(r, "a semaphore of " + std::to_string(n) + " permits");
  if (fence == -2) disagree(r, "a read/write lock's readers");
  if (fence == -3) disagree(r, "a mutex or a read/write lock's writer");
  // Waiting, it marks the name's row as an exclusive waiter does: an exclusive holder's
  // release then wakes it.
  Attempt a = Attempt::busy(sooner(milliseconds{std::max<std::int64_t>(n, 0)}, mark_waiting(*s, r)));
  a.place = std::move(r.place);
  return a;
}

}  // namespace dblock::detail::sqldb
