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
  if (ticket == 0 && !marked) return;
  try {
    auto s = pool_.get();
    // Handed the name as it gave up: the acquire returns no lease, so the row goes on to the
    // next in line (the release statement hands over again, or frees it). A hand-over whose
    // message has not come yet is freed by handed_free.
    // A forged message's fence releases nothing, and the ticket then leaves as below.
    if (ticket != 0 && notifier_ && d_.offers(release_))
      if (auto handed = notifier_->take_handover(name_, owner_);
          handed && handed->token == std::to_string(ticket) &&
          !s->run(d_[release_], {name_, owner_, static_cast<std::int64_t>(handed->fence)}).rows.empty())
        ticket = 0;  // the release took it
    if (ticket != 0) {
      UnflushedCommits unflushed(*s);
      s->run(d_[Statement::queue_leave], {name_, owner_});  // wakes the next waiter where it can
      if (d_.offers(Statement::handed_free)) s->run(d_[Statement::handed_free], {name_, owner_, ticket});
      unflushed.end();
      if (notifier_) notifier_->released(name_);              // (elsewhere the wake-up is ours)
    }
    if (marked) s->run(d_[Statement::writer_unmark], {name_, owner_});
  } catch (...) {
    // Unreachable: the ticket and the mark end by themselves within seconds.
  }
}

WaitingPlace& LeaseDriver::waiting(AcquireRequest& r) {
  if (!r.place) r.place = std::make_unique<WaitingPlace>(pool_, d_, notifier_, r.name, r.owner, handover_);
  return static_cast<WaitingPlace&>(*r.place);
}

std::vector<Value> LeaseDriver::grant_params(const AcquireRequest& r, std::vector<Value> first) const {
  if (d_.offers(Statement::queue_join)) {
    std::int64_t ticket = 0;  // unfair: the queue is not looked at
    if (r.fair) {
      const auto* w = static_cast<const WaitingPlace*>(r.place.get());
      ticket = w && w->ticket != 0 ? w->ticket : no_ticket;
    }
    first.emplace_back(ticket);
  }
  if (d_.grant_waits_bounded) first.emplace_back(row_wait(r));
  return first;
}

std::int64_t LeaseDriver::row_wait(const AcquireRequest& r) const {
  return std::clamp(r.wait, milliseconds{1}, longest_row_wait_).count();
}

namespace {

// The handle of a grant made after waiting, where releases hand over: its release is the
// strategy's hand-over statement, the rest the plain grant's.
class HandingGrant final : public GrantHandle {
 public:
  HandingGrant(LeaseDriver& driver, std::unique_ptr<GrantHandle> lease, Statement handover, std::string name,
               std::string owner, std::uint64_t fence)
      : driver_(driver), lease_(std::move(lease)), handover_(handover), name_(std::move(name)),
        owner_(std::move(owner)), fence_(fence) {}
  Renewal renew(milliseconds ttl, int holds) override { return lease_->renew(ttl, holds); }
  Batched batched() noexcept override { return lease_->batched(); }
  bool release() override { return driver_.release_with(name_, owner_, fence_, handover_); }
  bool release_after(milliseconds keep) override { return lease_->release_after(keep); }
  void lost() noexcept override { lease_->lost(); }

 private:
  LeaseDriver& driver_;  // the core that owns the driver outlives every grant
  std::unique_ptr<GrantHandle> lease_;
  const Statement handover_;
  const std::string name_, owner_;
  const std::uint64_t fence_;
};

}  // namespace

Attempt LeaseDriver::handing(Attempt a, const AcquireRequest& r, bool waited) {
  if (waited && a.acquired() && hands_over())
    a.grant = std::make_unique<HandingGrant>(*this, std::move(a.grant), handover_, r.name, r.owner, a.fence);
  return a;
}

std::optional<Attempt> LeaseDriver::take_handover(AcquireRequest& r) {
  auto* w = static_cast<WaitingPlace*>(r.place.get());
  if (!hands_over() || !notifier_ || !w || w->ticket == 0) return std::nullopt;
  auto handed = notifier_->take_handover(r.name, r.owner);
  // Another acquire's (one that gave up, and freed the row handed to it): not ours.
  if (!handed || handed->token != std::to_string(w->ticket)) return std::nullopt;
  // A message is a claim, not a grant: any role that may connect can NOTIFY, naming a queued
  // waiter's owner and ticket (both readable in the queue table). Granted only when the row
  // says so, read without a write; the lease left counts from the read's sending. Otherwise
  // the next attempt asks the server as usual.
  if (!d_.offers(Statement::handed_check)) return std::nullopt;
  const auto sent = Clock::now();
  auto read = [&](Connection& s) {
    return s.run(d_[Statement::handed_check], {r.name, r.owner, static_cast<std::int64_t>(handed->fence)});
  };
  auto beside = notifier_->lend_for_read();
  auto seen = beside ? read(*beside) : read(*pool_.get());
  if (seen.rows.empty()) return std::nullopt;
  const auto left = milliseconds{as_int(seen.rows.front()[0])} -
                    std::chrono::duration_cast<milliseconds>(Clock::now() - sent);
  if (left <= milliseconds{0}) return std::nullopt;
  w->ticket = 0;  // the release took it
  return handing(keyed_grant(*this, r, handed->fence, left), r, true);
}

std::optional<Attempt> LeaseDriver::read_first(Connection& s, AcquireRequest& r) {
  const auto* w = static_cast<const WaitingPlace*>(r.place.get());
  if (!r.fair || !w || w->ticket == 0 || !d_.offers(Statement::queue_ahead)) return std::nullopt;
  auto ahead = s.run(d_[Statement::queue_ahead], {r.name, r.owner, w->ticket});
  if (ahead.rows.empty()) return std::nullopt;
  if (as_int(ahead.rows.front()[0]) > 0) return granted(r, ahead.rows.front());  // handed to this ticket
  return busy_behind(s, r, std::string(), milliseconds{0});
}

milliseconds LeaseDriver::mark_waiting(Connection& s, AcquireRequest& r) {
  constexpr auto marked = milliseconds::max();
  if (r.wait <= milliseconds{0} || !d_.offers(Statement::wait_mark)) return marked;
  auto& w = waiting(r);
  const auto now = Clock::now();
  if (now < w.mark_at) return marked;
  try {
    UnflushedCommits unflushed(s);
    auto done = s.run(d_[Statement::wait_mark], {r.name, std::int64_t{2 * ticket_for.count()}});
    unflushed.end();
    if (done.rows.empty()) return milliseconds{1};
    w.mark_at = now + renew_ticket_every;
    // A row the mark found free (where the dialect answers its time left) was released
    // since the busy answer, perhaps unmarked and so without a notification: try again.
    if (as_int(done.rows.front()[0]) <= 0) return milliseconds{1};
  } catch (const LockWaitTimeout&) {
    return next_polls_every;  // the row is locked (a release under way, a caller's check_in)
  }
  return marked;
}

milliseconds LeaseDriver::queue(Connection& s, AcquireRequest& r, milliseconds remaining) {
  // A try (no wait) takes no ticket: it would only hold up the waiters behind it.
  if (!r.fair || r.wait <= milliseconds{0} || !d_.offers(Statement::queue_join)) return remaining;
  auto& w = waiting(r);
  w.holder_left = remaining;
  const auto now = Clock::now();
  if (w.ticket == 0 || now >= w.renew_at) {
    std::vector<Value> params{r.name, r.owner, std::int64_t{ticket_for.count()}, w.ticket, std::int64_t{r.ttl.count()}};
    if (d_.grant_waits_bounded) params.emplace_back(row_wait(r));  // a join may mark the name's row
    try {
      std::optional<Result> joined;
      if (waits_) joined = waits_->join(*this, s, w, params);  // the wait in the server set up too
      if (!joined) {
        // A ticket is worth nothing after a crash (its waiter is gone): no flush for it.
        UnflushedCommits unflushed(s);
        joined = s.run(d_[Statement::queue_join], params);
        unflushed.end();
      }
      // No ticket answered: the renewed one was handed the row just now (queue_join).
      if (!joined->rows.empty()) w.ticket = as_int(joined->rows.front()[0]);
      w.renew_at = now + renew_ticket_every;
    } catch (const LockWaitTimeout&) {
      // The name's row stayed locked by another transaction past the wait (as the grant
      // found it): no ticket this time, and the waiter polls.
    }
  }
  // Without release notifications (MySQL without a turn key; PostgreSQL while its LISTEN
  // connection is away, say refused by a full server) the next waiter finds the release by
  // polling, and only its poll can succeed: a busy answer naming the holder's time left comes
  // to it alone (the others are answered busy for a time not known, 0). A waiter that backed
  // off while it was behind would sleep through its turn (up to the backoff's 100 ms), so every
  // queued waiter polls at least every next_polls_every, the next one twice as often.
  if (!notifier_ || !notifier_->hears())
    remaining = remaining > milliseconds{0} ? std::min(remaining, next_polls_every / 2) : next_polls_every;
  return remaining;
}

}  // namespace dblock::detail::sqldb
