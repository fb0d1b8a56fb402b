#include "sql/session_drivers.hpp"

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
  auto s = connections_.get();
  try {
    s->drop_when_unreachable(r.ttl);  // a network cut frees the lock about at the TTL
    auto fence = lock(*s, r.name, r.wait - r.wait % d_.wait_unit, r.mode);
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

std::uint64_t ForUpdateDriver::lock(Connection& s, const std::string& name, milliseconds wait, Mode mode) {
  const bool shared = mode == Mode::shared;
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

std::uint64_t AdvisoryDriver::lock(Connection& s, const std::string& name, milliseconds wait, Mode mode) {
  auto key = advisory_key(table_, name);
  const bool shared = mode == Mode::shared;
  const auto try_lock = shared ? Statement::advisory_try_shared : Statement::advisory_try;
  const auto wait_lock = shared ? Statement::advisory_wait_shared : Statement::advisory_wait;
  const auto bounded = shared ? Statement::advisory_wait_bounded_shared : Statement::advisory_wait_bounded;
  if (wait.count() <= 0) return static_cast<std::uint64_t>(as_int(s.run(d_[try_lock], {key}).rows.at(0).at(0)));
  // One statement per wait, in pieces that end well before the statement timeout (1 s of
  // margin for the statement's own work). A piece that times out is busy only when it was
  // the last: otherwise wait on, still inside the server.
  const milliseconds margin{1000}, piece = statement_timeout_ - margin;
  if (d_.offers(bounded) && piece >= margin) {
    for (auto left = wait;;) {
      auto now = std::min(left, piece);
      try {
        return static_cast<std::uint64_t>(
            as_int(s.run(d_[bounded], {key, std::int64_t{now.count()}}).rows.at(0).at(0)));
      } catch (const TimeoutError&) {
        left -= now;
        if (left.count() <= 0) return 0;
      }
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
        {advisory_key(table_, name)});
}

}  // namespace dblock::detail::sqldb
