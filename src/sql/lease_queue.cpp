// Fair waiting on the SQL lease strategies (docs/ARCHITECTURE.md, "Fair waiting"): a busy
// exclusive acquire that will wait takes a ticket in the name's queue (the dialect's
// queue_join) and keeps it alive while it waits; the grant statements grant only the lowest
// live ticket (or, with none alive, anyone), and delete the winner's.
#include "sql/lease_drivers.hpp"

#include <algorithm>

namespace dblock::detail::sqldb {

namespace {
// How long a ticket lives unless its waiter writes it again, and how often the waiter does:
// a waiter that dies holds the queue up this long at most, and one whose attempts come
// further apart than this (a stalled process) loses its place only while it is gone.
constexpr milliseconds ticket_for{3000};
constexpr milliseconds renew_ticket_every{1000};
constexpr milliseconds next_polls_every{20};
}  // namespace

WaitingPlace::~WaitingPlace() {
  if (ticket == 0 && !marked && !turn) return;
  try {
    auto s = pool_.get();
    if (ticket != 0) {
      UnflushedCommits unflushed(*s);
      s->run(d_[Statement::queue_leave], {name_, owner_});  // wakes the next waiter where it can
      if (notifier_) notifier_->released(name_);              // (elsewhere the wake-up is ours)
    }
    if (marked) s->run(d_[Statement::writer_unmark], {name_, owner_});
  } catch (...) {
    // Unreachable: the ticket and the mark end by themselves within seconds.
  }
  let_turn_go(turn, d_, name_, owner_);  // after the ticket: the waiter behind, woken, finds it gone
}

WaitingPlace& LeaseDriver::waiting(AcquireRequest& r) {
  if (!r.place) r.place = std::make_unique<WaitingPlace>(pool_, d_, notifier_, r.name, r.owner);
  return static_cast<WaitingPlace&>(*r.place);
}

std::vector<Value> LeaseDriver::grant_params(const AcquireRequest& r, std::vector<Value> first) const {
  if (!d_.offers(Statement::queue_join)) return first;
  std::int64_t ticket = 0;  // unfair: the queue is not looked at
  if (r.fair) {
    const auto* w = static_cast<const WaitingPlace*>(r.place.get());
    ticket = w && w->ticket != 0 ? w->ticket : no_ticket;
  }
  first.emplace_back(ticket);
  return first;
}

bool LeaseDriver::queued_behind(Connection& s, const AcquireRequest& r) const {
  const auto* w = static_cast<const WaitingPlace*>(r.place.get());
  if (!r.fair || !w || w->ticket == 0 || !d_.offers(Statement::queue_ahead)) return false;
  return !s.run(d_[Statement::queue_ahead], {r.name, r.owner, w->ticket}).rows.empty();
}

milliseconds LeaseDriver::queue(Connection& s, AcquireRequest& r, milliseconds remaining) {
  // A try (no wait) takes no ticket: it would only hold up the waiters behind it.
  if (!r.fair || r.wait <= milliseconds{0} || !d_.offers(Statement::queue_join)) return remaining;
  auto& w = waiting(r);
  w.holder_left = remaining;
  const auto now = Clock::now();
  if (w.ticket == 0 || now >= w.renew_at) {
    const std::vector<Value> params{r.name, r.owner, std::int64_t{ticket_for.count()}, w.ticket};
    auto joined = join_taking_turn(w, params);  // the turn key and the ticket, where the dialect has keys
    if (!joined) {
      // A ticket is worth nothing after a crash (its waiter is gone): no flush for it.
      UnflushedCommits unflushed(s);
      joined = s.run(d_[Statement::queue_join], params);
    }
    w.ticket = as_int(joined->rows.at(0)[0]);
    w.renew_at = now + renew_ticket_every;
  }
  // Without release notifications (MySQL) the next waiter finds the release by polling, and
  // only its poll can succeed: a busy answer naming the holder's time left comes to it alone
  // (the others are answered busy for a time not known, 0). A waiter that backed off while it
  // was behind would sleep through its turn (up to the backoff's 100 ms), so every queued
  // waiter polls at least every next_polls_every, the next one twice as often.
  if (!notifier_)
    remaining = remaining > milliseconds{0} ? std::min(remaining, next_polls_every / 2) : next_polls_every;
  return remaining;
}

}  // namespace dblock::detail::sqldb
