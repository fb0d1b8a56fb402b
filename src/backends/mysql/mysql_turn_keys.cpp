#include "backends/mysql/mysql_turn_keys.hpp"

#include <algorithm>
#include <mutex>

#include "backends/mysql/mysql_dialect.hpp"
#include "dblock/errors.hpp"
#include "sql/lease_drivers.hpp"

namespace dblock::detail::sqldb {

namespace {

// The turn keys' statements, rendered for one table.
struct Texts {
  // (name, owner, keep_ms, ticket, lease_ms[, row wait]) -> two result sets: 1 when this
  // session now holds the owner's key, then queue_join's: the key first, so that no one
  // behind finds it not yet taken.
  std::string join;
  // (name, owner, wait_ms) -> 1 when the one ahead of owner (the next lower live ticket's
  // owner, else the holder) let its key go within wait_ms; 0 when it did not; -1 when that
  // one holds no key (a holder that never waited), so there is nothing to block on.
  std::string wait;
  // Per lease strategy, (name, owner, wait_ms, ttl, ticket, row wait) -> wait's answer, then,
  // in the same round trip, a grant attempt's: insert_acquire's, or optimistic_take's on the
  // version it reads. A woken waiter is granted without a round trip in between.
  std::string insert_grant, optimistic_grant;
  std::string free;  // (name, owner): this session lets the owner's key go
};

Texts texts(const Dialect& d, const TableName& table) {
  // A key: "dblock:turn:" and the SHA1 of the table, name and owner (52 characters). MariaDB
  // waits to the microsecond; a server that counts whole seconds answers 0 for a shorter
  // wait, and the waiter polls instead.
  const std::string key = "CONCAT('dblock:turn:', SHA1(CONCAT('${table}', CHAR(0), ?1, CHAR(0), ?2)))";
  Texts t;
  // A waiter's own key may still be held for a moment as it joins: the waiter its last
  // release woke takes that key in its wait and lets it go in the same statement. Taken with
  // no wait, a join in that moment got no key, and the waiter, and the one behind it, polled
  // (10-20 ms a turn): so the join waits up to 20 ms for its own key.
  t.join = "SELECT GET_LOCK(" + key + ", 0.02); " + d[Statement::queue_join];
  // The key of the one ahead is worked out once, so that the check and the wait are on one
  // key (${table}_turn_wait).
  t.wait = "CALL ${table}_turn_wait(?1, ?2, ?3)";
  // The grant runs whatever the wait answered: after a wait that ran out (the holder's lease
  // ending) it is the attempt the waiter makes next anyway. The optimistic take compares on
  // the version read just before it (a missing row: -1, which nothing has). Both answer a row
  // handed to the waiter's ticket first (${table}_lease_release).
  t.insert_grant = t.wait + "; " + mysql_row_wait("CALL ${table}_handed_grant(?1, ?2, ?4, ?5)", "?6");
  t.optimistic_grant = t.wait + "; " + mysql_row_wait("CALL ${table}_turn_take(?1, ?2, ?4, ?5)", "?6");
  t.free = "DO RELEASE_LOCK(" + key + ")";
  for (auto* text : {&t.join, &t.wait, &t.insert_grant, &t.optimistic_grant, &t.free})
    *text = render(*text, table, d.now_ms);
  return t;
}

// Lets the owner's turn key go on session `s`; a session that fails at it is closed, which
// lets the key go as well (`s` is then empty).
void free_key(ConnectionPool::Handle& s, const Texts& t, const std::string& name, const std::string& owner) noexcept {
  try {
    s->run(t.free, {name, owner});
  } catch (...) {
    s.discard();
  }
}

// Lets a turn key go and gives its session to `home`, the Client's pool.
void let_key_go(ConnectionPool& home, ConnectionPool::Handle& turn, const Texts& t, const std::string& name,
                const std::string& owner) noexcept {
  if (!turn) return;
  free_key(turn, t, name, owner);
  if (turn) home.adopt(turn.detach());
}

// A waiter's key: the session holding it, once it has one.
class TurnKey final : public ServerWaits::Place {
 public:
  TurnKey(ConnectionPool& home, const Texts& t, std::string name, std::string owner)
      : home(home), t(t), name(std::move(name)), owner(std::move(owner)) {}
  ~TurnKey() override { let_key_go(home, turn, t, name, owner); }
  // A session an error left unusable took the key with it: the waiter goes on without one,
  // on pooled sessions, and polls.
  Connection* session() override {
    if (turn && !turn->usable()) turn.discard();
    return turn ? &*turn : nullptr;
  }

  ConnectionPool& home;  // the Client's pool, which outlives every acquire
  const Texts& t;        // the TurnKeys', likewise
  const std::string name, owner;
  ConnectionPool::Handle turn;  // the session holding the key, if it has one
  // The attempt's pooled session, on which turn_join just ran: the attempt keeps it as
  // `turn` (keep_session), or closes it when the join failed (the key may be held on it).
  const Connection* key_on = nullptr;
  bool key_doubtful = false;
  bool keyless_ahead = false;  // the last wait found no key ahead: the next waits alone
};

// A grant won by a waiter with a turn key: the lease's own handle, and the session holding
// the key, which lets it go once the lease is released, waking the waiter behind.
class TurnGrant final : public GrantHandle {
 public:
  TurnGrant(LeaseDriver& driver, const Texts& t, std::unique_ptr<GrantHandle> lease, ConnectionPool::Handle turn,
            std::string name, std::string owner, std::uint64_t fence)
      : driver_(driver), t_(t), lease_(std::move(lease)), turn_(std::move(turn)), name_(std::move(name)),
        owner_(std::move(owner)), fence_(fence) {}
  ~TurnGrant() override { let_go(); }  // a grant lost, or let go
  Renewal renew(milliseconds ttl, int holds) override { return lease_->renew(ttl, holds); }
  Batched batched() noexcept override { return lease_->batched(); }
  bool release() override {
    if (!turn_ || !turn_->usable()) {  // a retry after the key's session failed
      let_go();
      return lease_->release();
    }
    // The key goes with the release (an error: retried here), and the session goes home.
    const bool ours = driver_.release_then(*turn_, name_, owner_, fence_, t_.free);
    driver_.pool().adopt(turn_.detach());
    return ours;
  }
  bool release_after(milliseconds keep) override {
    const bool ours = lease_->release_after(keep);  // the waiter behind finds it kept, for how long
    let_go();
    return ours;
  }
  void lost() noexcept override { lease_->lost(); }

 private:
  void let_go() noexcept { let_key_go(driver_.pool(), turn_, t_, name_, owner_); }
  LeaseDriver& driver_;  // the core that owns the driver outlives every grant, and the driver its TurnKeys
  const Texts& t_;
  std::unique_ptr<GrantHandle> lease_;
  ConnectionPool::Handle turn_;
  const std::string name_, owner_;
  const std::uint64_t fence_;
};

class TurnKeys final : public ServerWaits {
 public:
  TurnKeys(const Dialect& d, const TableName& table, std::size_t most) : t_(texts(d, table)), most_(most) {}

  // Takes the waiter's key on the attempt's session `s` and, in the same round trip, joins
  // the queue, once (a refusal is not asked again), unless the Client holds its most keys.
  std::optional<Result> join(LeaseDriver& driver, Connection& s, WaitingPlace& w,
                             const std::vector<Value>& params) override {
    if (w.in_server || keys_.open_count() >= most_) return std::nullopt;
    auto key = std::make_unique<TurnKey>(driver.pool(), t_, w.name(), w.owner());
    auto& k = *key;
    w.in_server = std::move(key);
    k.key_on = &s;  // keep_session keeps s for the key, or closes it if the join fails
    try {
      auto joined = s.run(t_.join, params);
      if (as_int(joined.sets.at(0).at(0).at(0)) != 1) k.key_on = nullptr;  // no key: s goes back to the pool
      return joined;
    } catch (...) {
      k.key_doubtful = true;
      throw;
    }
  }

  void keep_session(WaitingPlace& w, ConnectionPool::Handle& s) override {
    auto* k = static_cast<TurnKey*>(w.in_server.get());
    if (!k || k->key_on != &*s) return;
    k->key_on = nullptr;
    if (k->key_doubtful) return s.discard();  // a failed join: the key goes with the connection
    std::lock_guard lk(mutex_);  // joins ran side by side: the most is kept here
    if (keys_.open_count() < most_) k->turn = keys_.adopt(s.detach());
    else free_key(s, t_, k->name, k->owner);  // s stays the pool's, keyless: the waiter polls
  }

  Turn wait(LeaseDriver& driver, AcquireRequest& r, Attempt& a, Clock::time_point until) override {
    auto* w = static_cast<WaitingPlace*>(a.place.get());
    auto* k = w ? static_cast<TurnKey*>(w->in_server.get()) : nullptr;
    if (!k || !k->turn) return Turn::none;
    until = std::min(until, w->renew_at);  // the ticket is written again before it ends
    auto wait = std::chrono::ceil<milliseconds>(until - Clock::now());
    if (w->holder_left > milliseconds{0}) wait = std::min(wait, w->holder_left + milliseconds{1});
    if (wait <= milliseconds{0}) return Turn::none;
    // With no key ahead the wait answers at once, and a grant behind it would be one more
    // attempt right after the one that found the name busy: wait alone until a key shows up.
    const bool grant_after = !k->keyless_ahead;
    const auto& grant = driver.strategy() == Strategy::optimistic ? t_.optimistic_grant : t_.insert_grant;
    const std::int64_t ms = wait.count();
    std::vector<Value> params{r.name, r.owner, ms};
    if (grant_after) {
      r.place = std::move(a.place);  // the grant's parameters end with the ticket it holds
      params = driver.grant_params(r, {r.name, r.owner, ms, std::int64_t{r.ttl.count()}});
      a.place = std::move(r.place);
    }
    Result answer;
    std::int64_t woke = 0;
    // A cancel (an asynchronous acquire's) kills the text at once (KILL QUERY).
    auto armed = WaitCancel::arm(r.cancel, k->turn->canceller());
    if (r.cancelled()) return Turn::none;
    try {
      answer = k->turn->run(grant_after ? grant : t_.wait, params);
      woke = as_int(answer.sets.empty() ? answer.rows.at(0).at(0) : answer.sets.at(0).at(0).at(0));
    } catch (const TimeoutError&) {
      // Keys waiting on each other in a circle (two waiters that read the queue at different
      // times, one of them having lost its ticket meanwhile): the server ended this wait.
      return Turn::none;
    } catch (const std::exception&) {
      k->turn.discard();  // the session is gone, and the key with it: poll from here on
      // Killed by a cancel after the wait, in the grant: the grant may have committed with
      // its answer lost, leaving a lease of ours that nobody would release before its TTL.
      if (grant_after && r.cancelled()) give_back(driver, r);
      return Turn::none;
    }
    k->keyless_ahead = woke == -1;
    if (!grant_after) return woke == 1 ? Turn::woke : Turn::none;
    auto& s = *k->turn;  // the grant may take the session (TurnGrant): the connection lives on
    r.place = std::move(a.place);
    a = driver.answered(s, r, answer.rows);
    return a.acquired() || woke == 1 ? Turn::tried : Turn::none;
  }

  // A lease `r`'s owner may hold without knowing it, released: an attempt that does not wait
  // takes a leftover of its own owner over (LockDriver::try_acquire), and is then let go.
  // Anything else it finds (a free name nobody waits for) is taken and let go the same way.
  static void give_back(LeaseDriver& driver, const AcquireRequest& r) noexcept {
    try {
      AcquireRequest once{r.name, r.owner, r.ttl, milliseconds{0}, nullptr, r.renewed};
      once.mode = r.mode;
      once.permits = r.permits;
      once.fair = r.fair;
      if (auto a = driver.try_acquire(once); a.acquired()) a.grant->release();
    } catch (...) {  // not reached: the lease, if any, lasts its TTL
    }
  }

  std::unique_ptr<GrantHandle> hold(LeaseDriver& driver, WaitingPlace& w, std::unique_ptr<GrantHandle> lease,
                                    const AcquireRequest& r, std::uint64_t fence) override {
    auto* k = static_cast<TurnKey*>(w.in_server.get());
    if (!k || !k->turn) return lease;
    return std::make_unique<TurnGrant>(driver, t_, std::move(lease), std::move(k->turn), r.name, r.owner, fence);
  }

 private:
  const Texts t_;
  const std::size_t most_;
  std::mutex mutex_;
  // Sessions holding keys, out of the Client's pool (they would drain it): one per waiting
  // acquire or keyed grant. Adopts only, opens none; a session let go returns to its home.
  ConnectionPool keys_{nullptr, {SIZE_MAX, 0, milliseconds{0}, "mysql turn keys"}};
};

}  // namespace

std::shared_ptr<ServerWaits> mysql_turn_keys(const Dialect& dialect, const TableName& table, std::size_t most) {
  return std::make_shared<TurnKeys>(dialect, table, most);
}

}  // namespace dblock::detail::sqldb
