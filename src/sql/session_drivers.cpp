#include "sql/session_drivers.hpp"

#include <atomic>
#include <map>

#include "core/fnv1a.hpp"

namespace dblock::detail::sqldb {

std::int64_t advisory_key(const std::string& table, const std::string& name) {
  return static_cast<std::int64_t>(fnv1a64(name, fnv1a64(":", fnv1a64(table))));  // of "<table>:<name>"
}

SessionDriver::~SessionDriver() = default;

// A held session lock: the connection it lives in, pinned until release. "Renewal" pings it:
// a dropped connection or a server restart took the lock with it. Giving it back frees the
// lock (unlock), and closing it frees it too (a lost grant's connection is closed at once).
class SessionDriver::Pinned final : public GrantHandle {
 public:
  Pinned(SessionDriver& driver, std::string name, Mode mode, ConnectionPool::Handle session)
      : driver_(driver), name_(std::move(name)), mode_(mode), session_(std::move(session)) {}

  Renewal renew(milliseconds ttl, int) override {
    if (!session_ || !session_->usable()) return Renewal{};
    // A hold given back: the server keeps no count of a session lock's holds, and no lease to
    // extend, so there is nothing to send.
    if (ttl.count() == 0) return Renewal{true, ttl};
    try {
      session_->run(driver_.d_[Statement::ping]);
      return Renewal{true, ttl};
    } catch (const Error&) {
      return Renewal{};
    }
  }

  bool release() override {
    auto s = std::move(session_);
    if (!s || !s->usable()) {  // the server already freed it: the lease was lost
      s.discard();
      return false;
    }
    try {
      driver_.unlock(*s, name_, mode_);
    } catch (const Error&) {
      s.discard();  // the lock may still be held on it: closing frees it
      return false;
    }
    return true;  // s goes back to the idle list
  }

  // Closes the connection of a grant declared lost, so that the server frees its lock as soon
  // as it sees the close, instead of when the owner gets round to release() (PostgreSQL
  // first tries a bounded rollback).
  void lost() noexcept override { session_.discard(); }
  int socket() noexcept override { return session_ ? session_->socket() : -1; }
  // Never given back holding the lock (an acquire that failed after the grant, say).
  ~Pinned() override { session_.discard(); }

 private:
  SessionDriver& driver_;
  const std::string name_;
  const Mode mode_;
  ConnectionPool::Handle session_;
};

Attempt SessionDriver::try_acquire(AcquireRequest& r) {
  auto s = session();
  try {
    s->drop_when_unreachable(r.ttl);  // a network cut frees the lock about at the TTL
    auto fence = wait_lock(*s, r, r.wait - r.wait % d_.wait_unit);
    if (fence == 0) return Attempt::busy(milliseconds{0});  // s goes back to the idle list
    return Attempt{std::make_unique<Pinned>(*this, r.name, r.mode, std::move(s)), fence, r.ttl, nullptr};
  } catch (...) {
    // A half-taken lock goes with the transaction or the connection (GET_LOCK is not
    // transactional: a session given back could keep it).
    try {
      if (s) s->rollback();
    } catch (...) {
    }
    s.discard();
    throw;
  }
}

std::uint64_t SessionDriver::wait_lock(Connection& s, AcquireRequest& r, milliseconds wait) {
  if (wait.count() <= 0 || !r.cancel) return lock(s, r, wait);
  auto armed = WaitCancel::arm(r.cancel, s.canceller());
  auto fence = r.cancelled() ? 0 : lock(s, r, wait);
  // Cancelled: a cancel request sent may still reach the session's next statement, so the
  // session is not kept (the caller closes it as this throws, and a lock it took goes too).
  if (r.cancelled()) throw CancelledError("the acquire of lock '" + r.name + "' was cancelled while it waited");
  return fence;
}

std::uint64_t ForUpdateDriver::lock(Connection& s, const AcquireRequest& req, milliseconds wait) {
  const std::string& name = req.name;
  const bool shared = req.mode == Mode::shared;
  for (int round = 0; round < 3; ++round) {
    s.begin();
    try {
      Result r;
      if (wait.count() <= 0) {
        r = s.run(d_[shared ? Statement::for_update_try_shared : Statement::for_update_try], {name});
      } else {
        s.allow_wait(wait);
        s.run(d_[Statement::session_wait], {std::int64_t{wait.count()}});
        r = s.run(d_[shared ? Statement::for_update_wait_shared : Statement::for_update_wait], {name});
      }
      if (!r.rows.empty()) {  // locked: the transaction stays open
        // The wait is over, the transaction is not: without this, every renewal ping of the
        // held lock kept the wait's client-side bound (PostgreSQL: the wait + 6 s, not the
        // statement timeout + 1 s), and a ping sent into a network cut held the holder's
        // exit back that long (6.25 s for `dblock run`'s 250 ms slices; a 30 s wait, 36 s).
        s.allow_wait(milliseconds{0});
        return fence_of_lock(s, r.rows.front().at(0));
      }
      s.rollback();
    } catch (const TimeoutError&) {  // NOWAIT or lock_timeout: busy
      s.rollback();
      return 0;
    } catch (...) {
      s.rollback();
      throw;
    }
    // No row for this name yet (or the sweeper removed it): create it outside the
    // transaction and lock again. Only the first acquire of a name pays for this.
    s.run(d_[Statement::for_update_create], {name});
  }
  return 0;
}

// The fence is drawn on another connection (Statement::fence_next says why), so it must be
// shown to belong to a lock still held: were the locking connection's backend killed between
// the lock and the draw, the next holder could lock and draw first, and this grant would
// carry a higher fence than its successor's. Either the draw itself checks that the locking
// transaction still ran after it (fence_next_held), or a ping on the locking connection
// after the draw proves it (a dead connection throws, and the attempt fails).
std::uint64_t ForUpdateDriver::fence_of_lock(Connection& s, const Value& transaction) {
  const bool checked = d_.offers(Statement::fence_next_held);
  Value drawn;
  {
    auto aux = connections_.get();  // an idle connection of this driver's, or a new one
    drawn = checked ? aux->run(d_[Statement::fence_next_held], {transaction}).rows.at(0).at(0)
                    : aux->run(d_[Statement::fence_next]).rows.at(0).at(0);
  }
  if (checked && !std::holds_alternative<std::nullptr_t>(drawn)) return static_cast<std::uint64_t>(as_int(drawn));
  s.run(d_[Statement::ping]);  // throws where the locking connection is gone
  if (checked) throw UnavailableError("the row lock ended before its fence was drawn");
  return static_cast<std::uint64_t>(as_int(drawn));
}

void ForUpdateDriver::unlock(Connection& s, const std::string&, Mode) { s.rollback(); }

// A connection holding advisory locks of several grants (AdvisoryDriver). Its statements take
// `use`, one at a time. It renews all its locks with one ping per tick (RenewalBatch): they live
// and die with it.
class SharedSession final : public RenewalBatch {
 public:
  SharedSession(ConnectionPool::Handle c, const Dialect& d) : conn(std::move(c)), d_(d) {}
  std::mutex use;
  ConnectionPool::Handle conn;  // guarded by use; closed (discarded) once a statement failed on it
  // The shortest TTL of a lock taken on it: the connection is closed when unreachable for
  // about that long (Connection::drop_when_unreachable). Guarded by use.
  milliseconds unreachable_after = milliseconds::max();
  std::atomic<bool> dead{false};  // discarded: its locks are gone, and no try is made on it
  std::size_t users = 0;          // grants and tries on it; guarded by the driver's mutex
  // The keys it holds, in which mode and how often (guarded by use). The server grants a key
  // the session holds again without asking (re-entrant per session): a try meets this first.
  std::map<std::int64_t, std::pair<Mode, int>> keys;

  bool alive() const { return conn && conn->usable(); }  // under use
  // Whether a try of `key` in `mode` may be sent here: the key is not held here, or held shared
  // and asked shared (another reader's hold, counted by the server). An exclusive hold here is
  // a grant of this Client's that has not let go yet (a lost one's, whose unlock is under way):
  // the server would grant it twice. Under use.
  bool may_try(std::int64_t key, Mode mode) const {
    auto it = keys.find(key);
    return it == keys.end() || (it->second.first == Mode::shared && mode == Mode::shared);
  }
  void took(std::int64_t key, Mode mode) {  // under use
    auto& k = keys[key];
    k.first = mode;
    ++k.second;
  }
  void gave_back(std::int64_t key) {  // under use
    auto it = keys.find(key);
    if (it != keys.end() && --it->second.second <= 0) keys.erase(it);
  }
  // Closes the connection (under use): whatever it still holds goes with it.
  void close() noexcept {
    conn.discard();
    keys.clear();
    dead = true;
  }
  std::vector<Renewal> renew(const std::vector<Item>& items) override {
    bool ok;
    {
      std::lock_guard lk(use);
      ok = alive();
      if (ok) try {
          conn->run(d_[Statement::ping]);
        } catch (const Error&) {
          ok = false;
        }
    }
    std::vector<Renewal> out;
    for (const auto& i : items) out.push_back(ok ? Renewal{true, i.ttl} : Renewal{});
    return out;
  }

 private:
  const Dialect& d_;
};

// An advisory lock held on a shared session. Its release unlocks the name there; a failed
// unlock closes the session, which frees the lock (and loses the session's others).
class AdvisoryDriver::SharedGrant final : public GrantHandle {
 public:
  SharedGrant(AdvisoryDriver& driver, std::shared_ptr<SharedSession> session, std::string name, Mode mode)
      : driver_(driver), session_(std::move(session)), key_{std::move(name), std::string(), 0}, mode_(mode) {}
  ~SharedGrant() override {
    if (!done_) let_go();  // never kept holding the lock (an acquire that failed after the grant)
  }
  Renewal renew(milliseconds ttl, int holds) override {
    if (ttl.count() == 0) {  // a hold given back: nothing to send (see Pinned::renew)
      std::lock_guard lk(session_->use);
      return session_->alive() ? Renewal{true, ttl} : Renewal{};
    }
    return session_->renew({{&key_, ttl, holds}}).front();
  }
  bool release() override { return let_go(); }
  void lost() noexcept override { let_go(); }
  int socket() noexcept override {
    std::lock_guard lk(session_->use);
    return session_->alive() ? session_->conn->socket() : -1;
  }
  Batched batched() noexcept override { return {session_.get(), &key_}; }

 private:
  // Unlocks the name on the session, once; false when the lock was not there to free.
  bool let_go() noexcept {
    if (done_) return false;
    done_ = true;
    bool ours = false;
    {
      std::lock_guard lk(session_->use);
      if (session_->alive()) try {
          driver_.unlock(*session_->conn, key_.name, mode_);
          session_->gave_back(driver_.key_of(key_.name));
          ours = true;
        } catch (...) {
          session_->close();
        }
    }
    driver_.leave(session_);
    return ours;
  }
  AdvisoryDriver& driver_;  // the core that owns the driver outlives every grant
  std::shared_ptr<SharedSession> session_;
  const GrantKey key_;  // the name (a session lock has no owner or fence to check)
  const Mode mode_;
  bool done_ = false;  // released or let go: called under the Grant's `use`
};

AdvisoryDriver::~AdvisoryDriver() = default;

std::shared_ptr<SharedSession> AdvisoryDriver::pick(bool may_open) {
  std::unique_lock lk(mutex_);
  for (;;) {
    std::shared_ptr<SharedSession> best, least;
    std::size_t live = 0;
    for (const auto& s : shared_) {
      if (s->dead) continue;
      ++live;
      if (!least || s->users < least->users) least = s;
      if (s->users < locks_per_session && (!best || s->users < best->users)) best = s;
    }
    // A session being opened counts against max_shared_ from here: threads that picked
    // together would each open one otherwise (4 threads taking 1,000 locks opened up to 11
    // for 8).
    if (!best && (may_open || live > 0) && live + opening_ < max_shared_) {
      ++opening_;
      lk.unlock();
      std::shared_ptr<SharedSession> s;
      try {
        s = std::make_shared<SharedSession>(session(), d_);  // connects outside the lock
      } catch (...) {
        lk.lock();
        --opening_;
        opened_.notify_all();
        throw;
      }
      s->users = 1;
      lk.lock();
      --opening_;
      shared_.push_back(s);
      opened_.notify_all();
      return s;
    }
    if (!best) best = least;
    // Every slot is being opened and none is live yet: a try waits for one rather than open
    // a connection beside them.
    if (!best && may_open && opening_ > 0) {
      opened_.wait(lk);
      continue;
    }
    if (best) ++best->users;
    return best;
  }
}

void AdvisoryDriver::leave(const std::shared_ptr<SharedSession>& s) {
  {
    std::lock_guard lk(mutex_);
    if (--s->users > 0) return;
    shared_.erase(std::remove(shared_.begin(), shared_.end(), s), shared_.end());
  }
  // Nobody uses it any more: an open connection goes back to the idle list.
  std::lock_guard lk(s->use);
  s->conn = ConnectionPool::Handle();
}

Attempt AdvisoryDriver::try_acquire(AcquireRequest& r) {
  const auto wait = r.wait - r.wait % d_.wait_unit;
  // A try on a shared session first; one that waits opens no first session for it (a lone
  // waiter, `dblock run`, then waits on one connection, not two). A session found closed by the server
  // (a restart) is left to its grants, whose renewals report them lost, and another is tried.
  while (auto s = pick(wait.count() <= 0)) {
    std::uint64_t fence = 0;
    bool alive = true;
    try {
      std::lock_guard lk(s->use);
      alive = s->alive() && s->conn->still_connected();  // not closed by the server meanwhile
      if (!alive) {
        s->close();
      } else if (s->may_try(key_of(r.name), r.mode)) {
        if (r.ttl < s->unreachable_after) {
          s->conn->drop_when_unreachable(r.ttl);
          s->unreachable_after = r.ttl;
        }
        fence = lock(*s->conn, r, milliseconds{0});
        if (fence != 0) s->took(key_of(r.name), r.mode);
      }
    } catch (...) {
      {
        std::lock_guard lk(s->use);
        if (!s->alive()) s->close();
      }
      leave(s);
      throw;
    }
    if (fence != 0) return Attempt{std::make_unique<SharedGrant>(*this, s, r.name, r.mode), fence, r.ttl, nullptr};
    leave(s);
    if (!alive) continue;
    if (wait.count() <= 0) return Attempt::busy(milliseconds{0});
    break;
  }
  // A wait inside the server, on a connection of its own, which then shares the lock it won.
  auto c = session();
  try {
    c->drop_when_unreachable(r.ttl);
    auto fence = wait_lock(*c, r, wait);
    if (fence == 0) return Attempt::busy(milliseconds{0});  // c goes back to the idle list
    auto s = std::make_shared<SharedSession>(std::move(c), d_);
    s->unreachable_after = r.ttl;
    s->took(key_of(r.name), r.mode);
    s->users = 1;
    {
      std::lock_guard lk(mutex_);
      shared_.push_back(s);
    }
    return Attempt{std::make_unique<SharedGrant>(*this, s, r.name, r.mode), fence, r.ttl, nullptr};
  } catch (...) {
    try {
      if (c) c->rollback();
    } catch (...) {
    }
    c.discard();
    throw;
  }
}

std::uint64_t AdvisoryDriver::lock(Connection& s, const AcquireRequest& r, milliseconds wait) {
  auto key = key_of(r.name);
  const bool shared = r.mode == Mode::shared;
  const auto try_lock = shared ? Statement::advisory_try_shared : Statement::advisory_try;
  const auto wait_lock = shared ? Statement::advisory_wait_shared : Statement::advisory_wait;
  const auto bounded = shared ? Statement::advisory_wait_bounded_shared : Statement::advisory_wait_bounded;
  if (wait.count() <= 0) return static_cast<std::uint64_t>(as_int(s.run(d_[try_lock], {key}).rows.at(0).at(0)));
  // One statement per wait, in pieces of whole wait units that end well before the statement
  // timeout (1 s of margin for the statement's own work). A piece that times out (an error on
  // PostgreSQL, an answer of 0 from MySQL's GET_LOCK) is busy only when it was the last:
  // otherwise wait on, still inside the server.
  const milliseconds margin{1000}, room = statement_timeout_ - margin, piece = room - room % d_.wait_unit;
  if (d_.offers(bounded) && piece >= margin) {
    for (auto left = wait;;) {
      auto now = std::min(left, piece);
      try {
        auto fence = static_cast<std::uint64_t>(
            as_int(s.run(d_[bounded], {key, std::int64_t{now.count()}}).rows.at(0).at(0)));
        if (fence != 0) return fence;
      } catch (const TimeoutError&) {
      }
      left -= now;
      if (left.count() <= 0 || r.cancelled()) return 0;  // a cancel ends the piece it is in
    }
  }
  s.begin();  // the wait bound is transaction-local; the advisory lock is session-level
  try {
    s.allow_wait(wait);
    s.run(d_[Statement::session_wait], {std::int64_t{wait.count()}});
    auto fence = static_cast<std::uint64_t>(as_int(s.run(d_[wait_lock], {key}).rows.at(0).at(0)));
    s.commit();
    return fence;
  } catch (const TimeoutError&) {
    s.rollback();
    return 0;
  } catch (...) {
    s.rollback();
    throw;
  }
}

void AdvisoryDriver::unlock(Connection& s, const std::string& name, Mode mode) {
  s.run(d_[mode == Mode::shared ? Statement::advisory_unlock_shared : Statement::advisory_unlock],
        {key_of(name)});
}

}  // namespace dblock::detail::sqldb
