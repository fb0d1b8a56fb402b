// The lease strategies on SQL (insert, optimistic): what they share lives in LeaseDriver,
// what differs is acquire and release. A grant is our row, found again by (name, owner,
// fence): its handle is a KeyedGrant, its statements a GrantRows.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/driver.hpp"
#include "core/keyed_grant.hpp"
#include "sql/dialect.hpp"
#include "sql/notifier.hpp"
#include "sql/connection_pool.hpp"
#include "sql/server_waits.hpp"

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
  // The same for many rows of this kind: in one statement (the items, as a JSON array), or,
  // where the dialect has Client rows, by renewing the Client's row for their TTL, which keeps
  // every lease already attached to it (one row written per tick, however many leases), and
  // attaching the others in that one statement.
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
  // A lease released another way (LeaseDriver::release_then), or declared lost by the core: not
  // ours to keep alive any more. A tick detaches a row that names our Client row and is not
  // among the leases attached (Statement::client_detach).
  void forget(const std::string& name, std::uint64_t fence);

 private:
  ConnectionPool& pool_;
  const Dialect& d_;
  std::shared_ptr<Notifier> notifier_;
  const Statement renew_, release_, release_after_;
  const std::optional<Statement> renew_batch_;

  // Client rows (Statement::client_renew): this Client's row per TTL, and the leases whose
  // rows name one, with the hold count written then (a changed count is written again, by
  // the statement that attaches).
  struct ClientRow {
    std::string id;  // random, never reused: an expired row stays expired
    bool created = false;
  };
  struct Attached {
    std::string client;
    int holds = 0;
  };
  using RowKey = std::pair<std::string, std::uint64_t>;  // (name, fence): unique in a table
  // The items of one TTL: renews the Client row, then attaches the rest.
  void renew_for_ttl(Connection& s, milliseconds ttl, const std::vector<const Item*>& items,
                     std::map<RowKey, Renewal>& out);
  std::vector<Renewal> renew_rows(Connection& s, const std::vector<Item>& items, const std::string& client);
  std::mutex clients_mutex_;
  std::map<milliseconds, ClientRow> clients_;
  std::map<RowKey, Attached> attached_;
  std::mutex forgotten_mutex_;
  std::vector<RowKey> forgotten_;  // released while a tick ran (forget)
};

// What an exclusive lease acquire keeps between its attempts (the core's QueuePlace): its
// ticket in the name's queue (fair waiting, lease_queue.cpp), its stake in a wait in the
// server (where the backend has ServerWaits) and a writer's mark (behind readers,
// lease_shapes.cpp). Destroyed when the acquire ends; all go then, unless the grant took the
// ticket already (its statement deletes the winner's ticket) and the stake with it.
class WaitingPlace final : public QueuePlace {
 public:
  // `release`: the strategy's hand-over, which passes on a row handed to this waiter after it
  // gave up.
  WaitingPlace(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier, std::string name,
               std::string owner, Statement release)
      : pool_(pool), d_(d), notifier_(std::move(notifier)), name_(std::move(name)), owner_(std::move(owner)),
        release_(release) {}
  ~WaitingPlace() override;  // best effort: what is left ends by itself within seconds
  const std::string& name() const noexcept { return name_; }
  const std::string& owner() const noexcept { return owner_; }

  std::int64_t ticket = 0;          // 0: none; else the ticket the server gave
  Clock::time_point renew_at{};     // when the ticket is next written again (this host's clock)
  bool marked = false;              // a writer's mark is up
  Clock::time_point mark_at{};      // when the waiters' mark (wait_mark) is next written
  milliseconds holder_left{0};      // the last busy answer's holder time left (0: not known)
  std::unique_ptr<ServerWaits::Place> in_server;  // goes after the ticket (members outlive the body)

 private:
  ConnectionPool& pool_;
  const Dialect& d_;
  std::shared_ptr<Notifier> notifier_;
  const std::string name_, owner_;
  const Statement release_;
};

class LeaseDriver : public LockDriver {
 public:
  // `release`: the strategy's statement that frees its row; `handover`: the same for a grant
  // made after waiting, which hands the row over (where the dialect has it); `strategy`: which
  // of the two this driver is (ServerWaits follows a wait with the strategy's grant).
  // `waits`: null where the backend has no waits in the server (waiters then poll, or are
  // woken through `notifier`). `statement_timeout`: the connections', which a grant's wait
  // for a row lock stays under.
  LeaseDriver(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier,
              std::shared_ptr<ServerWaits> waits, Statement release, Statement handover, Strategy strategy,
              milliseconds statement_timeout)
      : pool_(pool), d_(d), notifier_(std::move(notifier)), waits_(std::move(waits)),
        rows_(pool_, d_, notifier_, Statement::renew, release, Statement::release_after, Statement::renew_batch),
        release_(release), handover_(handover), strategy_(strategy),
        longest_row_wait_(std::max(milliseconds{1}, statement_timeout / 2)) {}

  bool waits_in_server() const noexcept override { return waits_ != nullptr; }
  std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) override {
    if (!notifier_) return nullptr;
    offer_idle();
    return notifier_->watch(name, owner);
  }
  // Where releases hand over: a waiter that finds the name busy then needs no second attempt
  // to be sure it missed nothing, and one attempt less is one statement less beside the
  // hand-off it waits for.
  std::unique_ptr<ReleaseWatch> early_watch(const std::string& name, const std::string& owner) override {
    if (!hands_over() || !notifier_) return nullptr;
    if (notifier_->hears()) offer_idle();  // not before it listens: a connection offered then would wait idle
    return notifier_->watch_if_ready(name, owner);
  }

  // A grant's renewal and release (its handle is a KeyedGrant). Renewal extends our row and
  // writes the hold count; release is the strategy's own.
  Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                int holds) {
    return rows_.renew(name, owner, fence, ttl, holds);
  }
  RenewalBatch* renewal_batch() noexcept { return rows_.renewal_batch(); }
  // A grant the core declared lost: its row is detached from the Client row at the next tick
  // (GrantRows::forget), or that row would keep it held for as long as the Client renews.
  void forget(const std::string& name, std::uint64_t fence) { rows_.forget(name, fence); }
  bool release(const std::string& name, const std::string& owner, std::uint64_t fence) {
    return release_with(name, owner, fence, release_);
  }
  // The release with the strategy's `release` or `handover` statement (HandingGrant).
  bool release_with(const std::string& name, const std::string& owner, std::uint64_t fence, Statement statement);
  bool release_after(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds keep) {
    return rows_.release_after(name, owner, fence, keep);
  }
  // The release of a grant made after waiting, on the session `s`, with `then` after it in
  // the same text (its parameters are the release's): the hand-over, where the dialect has
  // it. A waiter's stake in a wait in the server lets go this way (ServerWaits::hold).
  bool release_then(Connection& s, const std::string& name, const std::string& owner, std::uint64_t fence,
                    const std::string& then);

  // For ServerWaits: the Client's pool, the dialect, the strategy, a grant's parameters
  // (grant_params), and the answer of a grant attempt given as rows (won, ms left, holder),
  // or none (lost, holder not known).
  ConnectionPool& pool() noexcept { return pool_; }
  const Dialect& dialect() const noexcept { return d_; }
  Strategy strategy() const noexcept { return strategy_; }
  std::vector<Value> grant_params(const AcquireRequest& r, std::vector<Value> first) const;
  Attempt answered(Connection& s, AcquireRequest& r, const std::vector<Row>& rows);

 protected:
  // A grant statement's winning row: the grant took the ticket, and the waiter's stake in a
  // wait in the server, if it has one, is kept until the release (ServerWaits::hold).
  Attempt granted(AcquireRequest& r, const Row& row);
  // `once()` (one attempt) and, while it is busy and the backend can wait in the server for
  // the one ahead (ServerWaits), that wait and another attempt, for up to the request's wait.
  // A busy answer with nothing to wait on goes back to the core, which polls or sleeps on
  // its watch.
  template <class Once>
  Attempt taking_turns(AcquireRequest& r, Once once) {
    if (auto handed = take_handover(r)) return std::move(*handed);
    const auto until = Clock::now() + r.wait;
    Attempt a = joins_line(r) ? pooled(r, [&](Connection& s) { return in_line(s, r); }) : pooled(r, once);
    while (!a.acquired() && waits_) {
      switch (waits_->wait(*this, r, a, until)) {
        case ServerWaits::Turn::none:
          return a;
        case ServerWaits::Turn::woke:
          r.place = std::move(a.place);
          a = pooled(r, once);
          break;
        case ServerWaits::Turn::tried:
          break;
      }
    }
    return a;
  }
  // `once` on a session of the pool, or on the waiter's own where its stake in a wait in the
  // server keeps one (ServerWaits::keep_session): a waiting process then holds one
  // connection, not that one beside a pooled one.
  template <class Once>
  Attempt pooled(AcquireRequest& r, Once&& once) {
    if (auto* w = static_cast<WaitingPlace*>(r.place.get()); w && w->in_server)
      if (auto* own = w->in_server->session()) return once(*own);
    auto s = pool_.get();
    const auto keep = [&](std::unique_ptr<QueuePlace>& place) {
      if (auto* w = static_cast<WaitingPlace*>(place.get()); w && waits_) waits_->keep_session(*w, s);
    };
    try {
      Attempt a = once(*s);
      keep(a.place);
      keep(r.place);
      return a;
    } catch (...) {
      keep(r.place);
      throw;
    }
  }
  // Whether this fair acquire, which will wait, follows a release of this driver's that
  // handed the name over (released): the name is held, and others queue for it, so
  // the acquire joins the line at once (in_line) instead of asking first. Its attempt could
  // only answer busy, and would land on the server beside the hand-off.
  bool joins_line(const AcquireRequest& r);
  // Every release of ours that freed or handed over our row passes here with its answer, on
  // a pooled session or a waiter's own: a hand-over's last column is -1 when it handed the
  // name over (Statement::insert_handover), and the name then has a line for joins_line;
  // then the strategy's `freed`.
  void released(const std::string& name, Statement statement, const Result& answer);
  virtual void freed(const std::string&, const Result&) {}
  Attempt in_line(Connection& s, AcquireRequest& r) { return busy_behind(s, r, std::string(), milliseconds{0}); }
  // Whether releases hand over (Statement::insert_handover): told through the notifier, or
  // found by the head's next grant (Dialect::waiters_read_handed).
  bool hands_over() const { return d_.offers(handover_) && (notifier_ || d_.waiters_read_handed); }
  // A grant's answer as handed to the core: one made after waiting (others are likely
  // queued) releases with the hand-over statement, where the dialect has one.
  Attempt handing(Attempt a, const AcquireRequest& r, bool waited);
  // The grant a release handed to this queued waiter (Statement::insert_handover), if its
  // message came and the row confirms it (Statement::handed_check: one read, no commit).
  std::optional<Attempt> take_handover(AcquireRequest& r);
  // grant_params: `first` and, where the dialect queues waiters, the asker's ticket
  // (lease_queue.cpp), then, where the dialect bounds it, the grant's wait for a row lock: the
  // request's wait, at least 1 ms (0 would be no bound), at most half the statement timeout
  // (which would end the statement as a server fault).
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
    // An acquire's first attempt, where the dialect has the uncontended path: a name nobody
    // waits for needs no look at the queue. Not through a transaction pooler, which would
    // plan it at every call (insert_acquire's statements keep their plans in its function).
    // No row answered: insert_acquire answers.
    if (!r.place && s.keeps_plans() && d_.offers(Statement::insert_acquire_unmarked)) {
      auto won = s.run(d_[Statement::insert_acquire_unmarked], {r.name, r.owner, std::int64_t{r.ttl.count()}});
      if (!won.rows.empty()) return granted(r, won.rows.front());
    }
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
  // An acquire that will wait marks the name's row (Statement::wait_mark), or keeps its mark,
  // so that the release wakes it. Answers milliseconds::max() when marked, else how soon to
  // try again: 1 ms when the name has no row (released since the busy answer, unmarked, so
  // without a notification), a poll's interval when another transaction holds the row.
  milliseconds mark_waiting(Connection& s, AcquireRequest& r);
  // Before a grant attempt of a waiter with a ticket, where the dialect says a read is the
  // cheaper way to find out (Statement::queue_ahead): the row a release handed to its
  // ticket, taken without a write, or busy behind a live ticket ahead; nothing when the
  // attempt should go on.
  std::optional<Attempt> read_first(Connection& s, AcquireRequest& r);
  // A read/write lock's shared hold or one of a semaphore's permits (lease_shapes.cpp).
  Attempt try_shared(AcquireRequest& r);
  ConnectionPool& pool_;
  const Dialect& d_;
  std::shared_ptr<Notifier> notifier_;
  std::shared_ptr<ServerWaits> waits_;
  GrantRows rows_;  // exclusive grants' rows
  GrantRows shared_{pool_, d_, notifier_, Statement::shared_renew, Statement::shared_release,
                    Statement::shared_release_after};

 private:
  // An idle connection of ours for the notifier to listen on, if it has none yet (it lends it
  // back), or to close if the pool may borrow the notifier's instead (Notifier::offer).
  void offer_idle() {
    notifier_->offer([this] { return pool_.take_idle([](const Connection& c) { return c.may_pin(); }); });
  }
  const Statement release_, handover_;
  const Strategy strategy_;
  const milliseconds longest_row_wait_;  // a grant's (grant_params)
  // Names whose last release by this driver handed them over (joins_line). Bounded: cleared
  // when full.
  static constexpr std::size_t max_lines = 4096;
  std::mutex lines_mutex_;
  std::unordered_set<std::string> lines_;
};

class InsertDriver final : public LeaseDriver {
 public:
  InsertDriver(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier,
               std::shared_ptr<ServerWaits> waits, milliseconds statement_timeout)
      : LeaseDriver(pool, d, std::move(notifier), std::move(waits), Statement::insert_release,
                    Statement::insert_handover, Strategy::insert, statement_timeout) {}
  Attempt try_acquire(AcquireRequest& r) override;
};

class OptimisticDriver final : public LeaseDriver {
 public:
  OptimisticDriver(ConnectionPool& pool, const Dialect& d, std::shared_ptr<Notifier> notifier,
                   std::shared_ptr<ServerWaits> waits, milliseconds statement_timeout)
      : LeaseDriver(pool, d, std::move(notifier), std::move(waits), Statement::optimistic_release,
                    Statement::optimistic_handover, Strategy::optimistic, statement_timeout) {}
  Attempt try_acquire(AcquireRequest& r) override;

 private:
  // A free row's version, where the release answers it (-1: handed over): the hint below.
  void freed(const std::string& name, const Result& answer) override;
  Attempt attempt(Connection& s, AcquireRequest& r);  // one try_acquire round on s, without waiting for a turn
  // The uncontended path (Statement::optimistic_take_unmarked), as insert's (upsert): the
  // compare-and-set of an acquire's first attempt on a free row nobody waits for. Nothing
  // when it took nothing (the full take answers then).
  std::optional<Attempt> take_unmarked(Connection& s, AcquireRequest& r, std::int64_t version);
  // The version a release of ours left on a free row (where the dialect's release returns
  // it), per name: this Client's next acquire of the name tries the compare-and-set on it
  // before reading the row. Taken (erased) by every acquire. Bounded: cleared when full.
  std::optional<std::int64_t> take_hint(const std::string& name);
  void leave_hint(const std::string& name, std::int64_t version);
  std::mutex hints_mutex_;
  std::unordered_map<std::string, std::int64_t> hints_;
};

}  // namespace dblock::detail::sqldb
