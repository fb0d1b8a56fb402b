// The lease strategies on SQL (insert, optimistic): what they share lives in LeaseDriver,
// what differs is acquire and release. A grant is our row, found again by (name, owner,
// fence): its handle is a KeyedGrant, its statements a GrantRows.
#pragma once

#include <algorithm>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/driver.hpp"
#include "core/keyed_grant.hpp"
#include "sql/dialect.hpp"
#include "sql/notifier.hpp"
#include "sql/connection_pool.hpp"

namespace dblock::detail::sqldb {

// A grant's row, found again by (name, owner, fence): an exclusive lease's row in ${table},
// or a shared holder's (a reader, a semaphore's holder) in ${table}_holders. The dialect's
// statements for that kind of row renew it, free it (waking the waiters) and keep it after
// its release; its handle is a KeyedGrant.
class GrantRows final : public RenewalBatch {
 public:
  // `renew_batch`: the kind's renewal of many rows in one statement, where the dialect has one.
  GrantRows(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier, Statement renew,
            Statement release, Statement release_after, std::optional<Statement> renew_batch = std::nullopt)
      : pool_(pool), d_(d), notifier_(std::move(notifier)), renew_(renew), release_(release),
        release_after_(release_after), renew_batch_(renew_batch) {}
  // Extends our row to at least ttl from now and writes the owner's hold count.
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl, int holds);
  // The same for many rows of this kind, in one statement (the items, as a JSON array).
  std::vector<Renewal> renew(const std::vector<Item>& items) override;
  RenewalBatch* renewal_batch() noexcept { return renew_batch_ ? this : nullptr; }
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence) {
    return free(name, owner, fence).has_value();
  }
  // The release statement's result (the kind's, or `release`) when it freed our row (and
  // woke the waiters); nothing when the row was not ours any more.
  std::optional<Result> free(const std::string& name, const std::string& owner, std::uint64_t fence) {
    return free(name, owner, fence, release_);
  }
  std::optional<Result> free(const std::string& name, const std::string& owner, std::uint64_t fence,
                             Statement release);
  // Whether a release or keep statement's result says the row was ours.
  static bool done(const Result& r);
  bool release_after(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds keep);

 private:
  ConnectionPool& pool_;
  const Dialect& d_;
  std::shared_ptr<Notifier> notifier_;
  const Statement renew_, release_, release_after_;
  const std::optional<Statement> renew_batch_;
};

// What an exclusive lease acquire keeps between its attempts (the core's QueuePlace): its
// ticket in the name's queue (fair waiting, lease_queue.cpp), its turn key's session (where
// the dialect has turn keys, lease_turns.cpp) and a writer's mark (behind readers,
// lease_shapes.cpp). Destroyed when the acquire ends; all go then, unless the grant took the
// ticket already (its statement deletes the winner's ticket) and the turn key with it.
class WaitingPlace final : public QueuePlace {
 public:
  // `release`: the strategy's hand-over, which passes on a row handed to this waiter after it
  // gave up.
  WaitingPlace(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier, std::string name,
               std::string owner, Statement release)
      : pool_(pool), d_(d), notifier_(std::move(notifier)), name_(std::move(name)), owner_(std::move(owner)),
        release_(release) {}
  ~WaitingPlace() override;  // best effort: what is left ends by itself within seconds

  std::int64_t ticket = 0;          // 0: none; else the ticket the server gave
  Clock::time_point renew_at{};     // when the ticket is next written again (this host's clock)
  bool marked = false;              // a writer's mark is up
  ConnectionPool::Handle turn;      // the session holding this waiter's turn key, if it has one
  bool turn_tried = false;          // turn_join was asked once (a refusal is not asked again)
  // The attempt's pooled session, on which turn_join just ran: the attempt keeps it as `turn`
  // (LeaseDriver::pooled), or closes it when the join failed (the key may be held on it).
  const Connection* key_on = nullptr;
  bool key_doubtful = false;
  bool keyless_ahead = false;       // the last wait found no key ahead: the next waits alone
  milliseconds holder_left{0};      // the last busy answer's holder time left (0: not known)

 private:
  ConnectionPool& pool_;
  const Dialect& d_;
  std::shared_ptr<Notifier> notifier_;
  const std::string name_, owner_;
  const Statement release_;
};

// Lets a turn key go and gives its session to `home`, the Client's pool; a session that fails
// at it is closed, which lets the key go as well (lease_turns.cpp).
void let_turn_go(ConnectionPool& home, ConnectionPool::Handle& turn, const Dialect& d, const std::string& name,
                 const std::string& owner) noexcept;

class LeaseDriver : public LockDriver {
 public:
  // `release`: the strategy's statement that frees its row; `handover`: the same for a grant
  // made after waiting, which hands the row over (where the dialect has it); `turn_grant`: its
  // grant after a turn key's wait (where the dialect has one). A turn key is taken on the
  // attempt's pooled session, which then leaves `pool` (it would drain it) for `turns_`
  // until the key goes, and comes back.
  // `statement_timeout`: the connections', which a grant's wait for a row lock stays under.
  LeaseDriver(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier, Statement release,
              Statement handover, Statement turn_grant, milliseconds statement_timeout)
      : pool_(pool), d_(d), notifier_(std::move(notifier)),
        rows_(pool_, d_, notifier_, Statement::renew, release, Statement::release_after, Statement::renew_batch),
        release_(release),
        handover_(handover), turn_grant_(turn_grant),
        longest_row_wait_(std::max(milliseconds{1}, statement_timeout / 2)),
        turns_(nullptr, {SIZE_MAX, 0, milliseconds{0}, d.name + " turn keys"}) {}  // adopts only: opens none

  std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) override {
    return notifier_ ? notifier_->watch(name, owner) : nullptr;
  }
  // Where releases hand over: a waiter that finds the name busy then needs no second attempt
  // to be sure it missed nothing, and one attempt less is one statement less beside the
  // hand-off it waits for.
  std::unique_ptr<ReleaseWatch> early_watch(const std::string& name, const std::string& owner) override {
    return hands_over() && notifier_ ? notifier_->watch_if_ready(name, owner) : nullptr;
  }

  // A grant's renewal and release (its handle is a KeyedGrant). Renewal extends our row and
  // writes the hold count; release is the strategy's own.
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                int holds) {
    return rows_.renew(name, owner, fence, ttl, holds);
  }
  RenewalBatch* renewal_batch() noexcept { return rows_.renewal_batch(); }
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence) {
    return release_with(name, owner, fence, release_);
  }
  // The release with the strategy's `release` or `handover` statement (HandingGrant).
  bool release_with(const std::string& name, const std::string& owner, std::uint64_t fence, Statement statement);
  bool release_after(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds keep) {
    return rows_.release_after(name, owner, fence, keep);
  }
  // The release of a grant whose owner waited with a turn key, on the session holding the
  // key: the release (the hand-over, where the dialect has it) and the key's let-go in one
  // text (lease_turns.cpp).
  bool release_waking(Connection& turn, const std::string& name, const std::string& owner, std::uint64_t fence);

 protected:
  // A grant statement's winning row: the grant took the ticket, and a turn key, if the
  // waiter had one, is kept until the release (lease_turns.cpp).
  Attempt granted(AcquireRequest& r, const Row& row);
  // `once()` (one attempt) and, while it is busy behind a waiter or holder with a turn key,
  // a wait in the server for that key and another attempt, for up to the request's wait. A
  // busy answer without a key to wait on goes back to the core, which polls.
  template <class Once>
  Attempt taking_turns(AcquireRequest& r, Once once) {
    if (auto handed = take_handover(r)) return std::move(*handed);
    const auto until = Clock::now() + r.wait;
    Attempt a = joins_line(r) ? pooled(r, [&](Connection& s) { return in_line(s, r); }) : pooled(r, once);
    while (!a.acquired()) {
      switch (wait_turn(r, a, until)) {
        case Turn::none:
          return a;
        case Turn::woke:
          r.place = std::move(a.place);
          a = pooled(r, once);
          break;
        case Turn::tried:
          break;
      }
    }
    return a;
  }
  // `once` on a session of the pool. Where that attempt's join took the waiter's turn key on
  // it, the waiter keeps the session for the key, and its later attempts go there too (behind
  // a holder without a key, it polls): a waiting process holds one connection, not a turn
  // key's beside a pooled one.
  template <class Once>
  Attempt pooled(AcquireRequest& r, Once&& once) {
    if (auto* w = static_cast<WaitingPlace*>(r.place.get()); w && w->turn) return once(*w->turn);
    auto s = pool_.get();
    const auto keep_key_session = [&](std::unique_ptr<QueuePlace>& place) {
      auto* w = static_cast<WaitingPlace*>(place.get());
      if (!w || w->key_on != &*s) return;
      w->key_on = nullptr;
      if (w->key_doubtful) s.discard();  // a failed join: the key goes with the connection
      else w->turn = turns_.adopt(s.detach());
    };
    try {
      Attempt a = once(*s);
      keep_key_session(a.place);
      keep_key_session(r.place);
      return a;
    } catch (...) {
      keep_key_session(r.place);
      throw;
    }
  }
  // Whether this fair acquire, which will wait, follows a release of this driver's that
  // handed the name over (released): the name is held, and others queue for it, so
  // the acquire joins the line at once (in_line) instead of asking first. Its attempt could
  // only answer busy, and would land on the server beside the hand-off.
  bool joins_line(const AcquireRequest& r);
  // Every release of ours that freed or handed over our row passes here with its answer, on
  // a pooled session or a turn key's: a hand-over's last column is -1 when it handed the
  // name over (Statement::insert_handover), and the name then has a line for joins_line;
  // then the strategy's `freed`.
  void released(const std::string& name, Statement statement, const Result& answer);
  virtual void freed(const std::string&, const Result&) {}
  Attempt in_line(Connection& s, AcquireRequest& r) { return busy_behind(s, r, std::string(), milliseconds{0}); }
  // Whether releases hand over (Statement::insert_handover): told through the notifier, or
  // found by the head's turn grant.
  bool hands_over() const { return d_.offers(handover_) && (notifier_ || d_.waiters_read_handed); }
  // A grant's answer as handed to the core: one made after waiting (others are likely
  // queued) releases with the hand-over statement, where the dialect has one.
  Attempt handing(Attempt a, const AcquireRequest& r, bool waited);
  // The grant a release handed to this queued waiter (Statement::insert_handover), if its
  // message came and the row confirms it (Statement::handed_check: one read, no commit).
  std::optional<Attempt> take_handover(AcquireRequest& r);
  // The parameters of an exclusive grant statement: `first` and, where the dialect queues
  // waiters, the asker's ticket (lease_queue.cpp), then, where the dialect bounds it, the
  // grant's wait for a row lock: the request's wait, at least 1 ms (0 would be no bound), at
  // most half the statement timeout (which would end the statement as a server fault).
  std::vector<Value> grant_params(const AcquireRequest& r, std::vector<Value> first) const;
  std::int64_t row_wait(const AcquireRequest& r) const;  // that wait, in ms
  // A grant statement's answer, or nothing when it waited for the name's row past its bound
  // (Dialect::grant_waits_bounded): another transaction holds the row, and the attempt is
  // busy; the core tries again until the acquire's deadline.
  std::optional<Result> grant(Connection& s, Statement statement, const std::vector<Value>& params) {
    try {
      return s.run(d_[statement], params);
    } catch (const LockWaitTimeout&) {
      return std::nullopt;
    }
  }
  // The insert strategy's upsert (the dialect's insert_acquire): creates the row granted to
  // us, takes over an expired row or a leftover of ours, or answers busy, in one atomic
  // statement.
  Attempt upsert(Connection& s, AcquireRequest& r) {
    if (auto first = read_first(s, r)) return std::move(*first);
    auto won = grant(s, Statement::insert_acquire, grant_params(r, {r.name, r.owner, std::int64_t{r.ttl.count()}}));
    if (!won) return row_locked(r);
    if (won->rows.empty()) return busy(s, r);
    const auto& row = won->rows.front();
    if (as_int(row[0]) == 0)  // the holder's time, and where the dialect says so, its name
      return busy_behind(s, r, row.size() > 2 ? as_text(row[2]) : std::string(), milliseconds{as_int(row[1])});
    return granted(r, row);
  }
  // Busy behind another transaction's lock on the name's row (grant() answered nothing): no
  // holder to ask about, and no ticket to take now, as joining the queue would wait for the
  // same row (MySQL's mark). The waiter keeps the place it has, and polls.
  Attempt row_locked(AcquireRequest& r) {
    Attempt a = Attempt::busy(milliseconds{0});
    a.place = std::move(r.place);
    return a;
  }
  // Not won: how long the current holder has left, so the waiter sleeps no longer.
  Attempt busy(Connection& s, AcquireRequest& r) {
    auto h = s.run(d_[Statement::holder], {r.name});
    if (h.rows.empty()) return busy_behind(s, r, std::string(), milliseconds{0});
    return busy_behind(s, r, as_text(h.rows.front()[0]), milliseconds{as_int(h.rows.front()[1])});
  }
  // Every busy answer to an exclusive acquire: it found `holder` (an owner; ':readers' or
  // ':semaphore' for shared holders, '' for none: another waiter's turn) in its way for
  // `remaining`. Busy, except that a semaphore is refused (a mutex is one permit: the two
  // disagree about the name); a writer which may wait behind readers marks the name, so that
  // new readers queue behind it (lease_shapes.cpp); and a fair acquire that will wait keeps
  // its ticket (queue()).
  Attempt busy_behind(Connection& s, AcquireRequest& r, const std::string& holder, milliseconds remaining);
  // The request's WaitingPlace, made on first use.
  WaitingPlace& waiting(AcquireRequest& r);
  // A fair acquire that will wait takes a ticket in the name's queue, or keeps its own alive.
  // Answers how long it may sleep, given the holder's `remaining` (lease_queue.cpp).
  milliseconds queue(Connection& s, AcquireRequest& r, milliseconds remaining);
  // Before a grant attempt of a waiter with a ticket, where the dialect says a read is the
  // cheaper way to find out (Statement::queue_ahead): the row a release handed to its
  // ticket, taken without a write, or busy behind a live ticket ahead; nothing when the
  // attempt should go on.
  std::optional<Attempt> read_first(Connection& s, AcquireRequest& r);
  // Takes the waiter's turn key on the attempt's session `s` (which the waiter then keeps:
  // pooled()) and, in the same round trip, joins the queue (queue_join's `params`), once;
  // nothing where the dialect has no turn keys: the caller joins without a key
  // (lease_turns.cpp).
  std::optional<Result> join_taking_turn(Connection& s, WaitingPlace& w, const std::vector<Value>& params);
  // Waits, up to `until` and a ticket's renewal, for the key of the one ahead of the busy
  // attempt `a` to go: none when there was no key to wait on or the wait ran out (`a` is
  // still the answer); woke when it went (attempt again now); tried when the dialect
  // attempted in the same round trip (its answer now in `a`).
  enum class Turn { none, woke, tried };
  Turn wait_turn(AcquireRequest& r, Attempt& a, Clock::time_point until);
  // A grant attempt's answer as the turn_grant statements give it: a row (won, ms left,
  // holder), or none (lost, holder not known).
  Attempt answered(Connection& s, AcquireRequest& r, const std::vector<Row>& rows);
  // A read/write lock's shared hold or one of a semaphore's permits (lease_shapes.cpp).
  Attempt try_shared(AcquireRequest& r);
  ConnectionPool& pool_;
  const Dialect& d_;
  std::shared_ptr<Notifier> notifier_;
  GrantRows rows_;  // exclusive grants' rows
  GrantRows shared_{pool_, d_, notifier_, Statement::shared_renew, Statement::shared_release,
                    Statement::shared_release_after};

 private:
  const Statement release_, handover_, turn_grant_;
  const milliseconds longest_row_wait_;  // a grant's (grant_params)
  // Names whose last release by this driver handed them over (joins_line). Bounded: cleared
  // when full.
  static constexpr std::size_t max_lines = 4096;
  std::mutex lines_mutex_;
  std::unordered_set<std::string> lines_;
  ConnectionPool turns_;  // sessions holding turn keys: one per waiting acquire or keyed grant
};

class InsertDriver final : public LeaseDriver {
 public:
  InsertDriver(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier, milliseconds statement_timeout)
      : LeaseDriver(pool, d, std::move(notifier), Statement::insert_release, Statement::insert_handover,
                    Statement::insert_turn_grant, statement_timeout) {}
  Attempt try_acquire(AcquireRequest& r) override;
};

class OptimisticDriver final : public LeaseDriver {
 public:
  OptimisticDriver(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier,
                   milliseconds statement_timeout)
      : LeaseDriver(pool, d, std::move(notifier), Statement::optimistic_release, Statement::optimistic_handover,
                    Statement::optimistic_turn_grant, statement_timeout) {}
  Attempt try_acquire(AcquireRequest& r) override;

 private:
  // A free row's version, where the release answers it (-1: handed over): the hint below.
  void freed(const std::string& name, const Result& answer) override;
  Attempt attempt(Connection& s, AcquireRequest& r);  // one try_acquire round on s, without waiting for a turn
  // The version a release of ours left on a free row (where the dialect's release returns
  // it), per name: this Client's next acquire of the name tries the compare-and-set on it
  // before reading the row. Taken (erased) by every acquire. Bounded: cleared when full.
  std::optional<std::int64_t> take_hint(const std::string& name);
  void leave_hint(const std::string& name, std::int64_t version);
  std::mutex hints_mutex_;
  std::unordered_map<std::string, std::int64_t> hints_;
};

}  // namespace dblock::detail::sqldb
