// Turn keys (docs/ARCHITECTURE.md, "Fair waiting"): where a release notifies nobody (MySQL), a
// queued waiter holds a named server lock of its own, its turn key, on a session pinned for
// it, and blocks in the server on the key of the one ahead of it: the waiter with the next
// lower ticket, or the holder. A waiter that wins keeps its key until its release, so that
// release wakes exactly the next waiter (ZooKeeper's lock recipe, on GET_LOCK). A holder
// that never waited has no key: the waiter behind it polls, as without turn keys. The key
// is taken in the text that writes the ticket, and the wait's text goes on to the grant
// attempt, so waiting costs no round trip of its own.
#include <algorithm>

#include "dblock/errors.hpp"
#include "sql/lease_drivers.hpp"

namespace dblock::detail::sqldb {

namespace {

// A grant won by a waiter with a turn key: the lease's own handle, and the session holding
// the key, which lets it go once the lease is released, waking the waiter behind.
class TurnGrant final : public GrantHandle {
 public:
  TurnGrant(LeaseDriver& driver, ConnectionPool& home, std::unique_ptr<GrantHandle> lease, ConnectionPool::Handle turn,
            const Dialect& d, std::string name, std::string owner, std::uint64_t fence)
      : driver_(driver), home_(home), lease_(std::move(lease)), turn_(std::move(turn)), d_(d), name_(std::move(name)),
        owner_(std::move(owner)), fence_(fence) {}
  ~TurnGrant() override { let_turn_go(home_, turn_, d_, name_, owner_); }  // a grant lost, or let go
  Renewal renew(milliseconds ttl, int holds) override { return lease_->renew(ttl, holds); }
  Batched batched() noexcept override { return lease_->batched(); }
  bool release() override {
    if (!turn_ || !turn_->usable()) {  // a retry after the key's session failed
      let_turn_go(home_, turn_, d_, name_, owner_);
      return lease_->release();
    }
    const bool ours = driver_.release_waking(*turn_, name_, owner_, fence_);  // an error: retried here
    home_.adopt(turn_.detach());  // the key went with the release: the session goes home
    return ours;
  }
  bool release_after(milliseconds keep) override {
    const bool ours = lease_->release_after(keep);  // the waiter behind finds it kept, for how long
    let_turn_go(home_, turn_, d_, name_, owner_);
    return ours;
  }

 private:
  LeaseDriver& driver_;  // the core that owns the driver outlives every grant
  ConnectionPool& home_;  // the Client's pool, likewise
  std::unique_ptr<GrantHandle> lease_;
  ConnectionPool::Handle turn_;
  const Dialect& d_;
  const std::string name_, owner_;
  const std::uint64_t fence_;
};

}  // namespace

void let_turn_go(ConnectionPool& home, ConnectionPool::Handle& turn, const Dialect& d, const std::string& name,
                 const std::string& owner) noexcept {
  if (!turn) return;
  try {
    turn->run(d[Statement::turn_free], {name, owner});
    home.adopt(turn.detach());
  } catch (...) {
    turn.discard();
  }
}

Attempt LeaseDriver::granted(AcquireRequest& r, const Row& row) {
  auto* w = static_cast<WaitingPlace*>(r.place.get());
  const auto fence = static_cast<std::uint64_t>(as_int(row[0]));
  // A row handed over (Dialect::waiters_read_handed) has the lease its ticket asked for,
  // counted from the hand-over.
  const auto left = milliseconds{as_int(row[1])};
  Attempt a = handing(keyed_grant(*this, r, fence, left), r, w && w->ticket != 0);
  if (w) {
    w->ticket = 0;  // the grant statement took it
    if (w->turn)
      a.grant = std::make_unique<TurnGrant>(*this, pool_, std::move(a.grant), std::move(w->turn), d_, r.name, r.owner,
                                            a.fence);
  }
  return a;
}

// One text, so the waiter behind is woken with no round trip in between, after the
// release's commit (a woken waiter that read the row before it would find it still held).
bool LeaseDriver::release_waking(Connection& turn, const std::string& name, const std::string& owner,
                                 std::uint64_t fence) {
  const auto release = hands_over() ? handover_ : release_;  // the key's owner waited: others are likely queued
  const std::string text = d_[release] + "; " + d_[Statement::turn_free];  // turn_free's ?1, ?2 are the release's
  auto answer = turn.run(text, {name, owner, static_cast<std::int64_t>(fence)});
  if (!GrantRows::done(answer)) return false;
  released(name, release, answer);
  return true;
}

bool LeaseDriver::release_with(const std::string& name, const std::string& owner, std::uint64_t fence,
                               Statement statement) {
  auto answer = rows_.free(name, owner, fence, statement);
  if (!answer) return false;
  released(name, statement, *answer);
  return true;
}

void LeaseDriver::released(const std::string& name, Statement statement, const Result& answer) {
  const auto* last = answer.rows.empty() || answer.rows.front().empty()
                         ? nullptr
                         : std::get_if<std::int64_t>(&answer.rows.front().back());
  if (statement == handover_ && last && *last == -1) {
    std::lock_guard lk(lines_mutex_);
    if (lines_.size() >= max_lines) lines_.clear();
    lines_.insert(name);
  }
  freed(name, answer);
}

bool LeaseDriver::joins_line(const AcquireRequest& r) {
  if (!r.fair || r.wait <= milliseconds{0} || r.place || r.mode == Mode::shared || r.permits > 1) return false;
  std::lock_guard lk(lines_mutex_);
  return lines_.erase(r.name) > 0;
}

std::optional<Result> LeaseDriver::join_taking_turn(Connection& s, WaitingPlace& w,
                                                    const std::vector<Value>& params) {
  if (w.turn_tried || !d_.offers(Statement::turn_join)) return std::nullopt;
  w.turn_tried = true;
  w.key_on = &s;  // pooled() keeps s for the key, or closes it if the join fails
  try {
    auto joined = s.run(d_[Statement::turn_join], params);
    if (as_int(joined.sets.at(0).at(0).at(0)) != 1) w.key_on = nullptr;  // no key: s goes back to the pool
    return joined;
  } catch (...) {
    w.key_doubtful = true;
    throw;
  }
}

LeaseDriver::Turn LeaseDriver::wait_turn(AcquireRequest& r, Attempt& a, Clock::time_point until) {
  auto* w = static_cast<WaitingPlace*>(a.place.get());
  if (!w || !w->turn) return Turn::none;
  until = std::min(until, w->renew_at);  // the ticket is written again before it ends
  auto wait = std::chrono::ceil<milliseconds>(until - Clock::now());
  if (w->holder_left > milliseconds{0}) wait = std::min(wait, w->holder_left + milliseconds{1});
  if (wait <= milliseconds{0}) return Turn::none;
  // With no key ahead the wait answers at once, and a grant behind it would be one more
  // attempt right after the one that found the name busy: wait alone until a key shows up.
  const bool grant_after = d_.offers(turn_grant_) && !w->keyless_ahead;
  const std::int64_t ms = wait.count();
  std::vector<Value> params{r.name, r.owner, ms};
  if (grant_after) {
    r.place = std::move(a.place);  // the grant's parameters end with the ticket it holds
    params = grant_params(r, {r.name, r.owner, ms, std::int64_t{r.ttl.count()}});
    a.place = std::move(r.place);
  }
  Result answer;
  std::int64_t woke = 0;
  try {
    answer = w->turn->run(d_[grant_after ? turn_grant_ : Statement::turn_wait], params);
    woke = as_int(answer.sets.empty() ? answer.rows.at(0).at(0) : answer.sets.at(0).at(0).at(0));
  } catch (const TimeoutError&) {
    // Keys waiting on each other in a circle (two waiters that read the queue at different
    // times, one of them having lost its ticket meanwhile): the server ended this wait.
    return Turn::none;
  } catch (const std::exception&) {
    w->turn.discard();  // the session is gone, and the key with it: poll from here on
    return Turn::none;
  }
  w->keyless_ahead = woke == -1;
  if (!grant_after) return woke == 1 ? Turn::woke : Turn::none;
  auto& s = *w->turn;  // the grant may take the session (TurnGrant): the connection lives on
  r.place = std::move(a.place);
  a = answered(s, r, answer.rows);
  return a.acquired() || woke == 1 ? Turn::tried : Turn::none;
}

Attempt LeaseDriver::answered(Connection& s, AcquireRequest& r, const std::vector<Row>& rows) {
  if (rows.empty()) return busy_behind(s, r, std::string(), milliseconds{0});
  const auto& row = rows.front();
  if (as_int(row[0]) != 0) return granted(r, row);
  const auto left = std::max<std::int64_t>(as_int(row[1]), 0);
  return busy_behind(s, r, row.size() > 2 ? as_text(row[2]) : std::string(), milliseconds{left});
}

}  // namespace dblock::detail::sqldb
