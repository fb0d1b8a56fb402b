#include "sql/session_drivers.hpp"

namespace dblock::detail::sql {

std::int64_t advisory_key(const std::string& table, const std::string& name) {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a 64
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  };
  mix(table);
  mix(":");
  mix(name);
  return static_cast<std::int64_t>(h);
}

SessionDriver::~SessionDriver() = default;

bool SessionDriver::alive(Held& held) {
  std::lock_guard use(held.use);
  if (!held.session || !held.session->usable()) return false;
  try {
    held.session->run(d_[Statement::ping]);
    return true;
  } catch (const Error&) {
    return false;
  }
}

Attempt SessionDriver::try_acquire(const AcquireRequest& r) {
  std::shared_ptr<Held> mine;
  {
    std::lock_guard lk(mutex_);
    if (auto it = held_.find({r.name, r.owner}); it != held_.end()) mine = it->second;
  }
  // Re-entry shares the pinned connection, but only while it still holds the lock: after a
  // dropped connection, the old grant is lost and this is a new acquire.
  if (mine && alive(*mine)) {
    std::lock_guard lk(mutex_);
    ++mine->holds;
    return Attempt{true, mine->fence, r.ttl};
  }
  if (mine) {
    std::lock_guard lk(mutex_);
    if (auto it = held_.find({r.name, r.owner}); it != held_.end() && it->second == mine) held_.erase(it);
  }
  auto s = connections_.get();
  try {
    auto fence = lock(*s, r.name, r.wait - r.wait % d_.wait_unit);
    if (fence == 0) return Attempt{false, 0, milliseconds{0}};  // s goes back to the idle list
    auto held = std::make_shared<Held>();
    held->fence = fence;
    held->holds = 1;
    held->session = std::move(s);
    std::lock_guard lk(mutex_);
    held_[{r.name, r.owner}] = held;
    return Attempt{true, held->fence, r.ttl};
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

Renewal SessionDriver::renew(const std::string& name, const std::string& owner, std::uint64_t fence,
                             milliseconds ttl) {
  std::shared_ptr<Held> held;
  {
    std::lock_guard lk(mutex_);
    auto it = held_.find({name, owner});
    if (it == held_.end() || it->second->fence != fence) return Renewal{false, milliseconds{0}};
    held = it->second;
  }
  // The connection is gone, and the lock with it: lost.
  return alive(*held) ? Renewal{true, ttl} : Renewal{false, milliseconds{0}};
}

bool SessionDriver::release(const std::string& name, const std::string& owner, std::uint64_t fence) {
  std::shared_ptr<Held> held;
  {
    std::lock_guard lk(mutex_);
    auto it = held_.find({name, owner});
    if (it == held_.end() || it->second->fence != fence) return false;
    held = it->second;
    if (--held->holds > 0) return true;
    held_.erase(it);
  }
  std::lock_guard use(held->use);
  auto s = std::move(held->session);
  if (!s || !s->usable()) {  // the server already freed it: the lease was lost
    s.discard();
    return false;
  }
  try {
    unlock(*s, name);
  } catch (const Error&) {
    s.discard();  // the lock may still be held on it: closing frees it
    return false;
  }
  return true;  // s goes back to the idle list
}

void SessionDriver::lost(const std::string& name, const std::string& owner, std::uint64_t fence) noexcept {
  std::shared_ptr<Held> held;
  {
    std::lock_guard lk(mutex_);
    auto it = held_.find({name, owner});
    if (it == held_.end() || it->second->fence != fence) return;
    held = it->second;  // stays in held_: release() then reports the loss
  }
  ConnectionPool::Handle s;
  {
    std::lock_guard use(held->use);
    s = std::move(held->session);
  }
  s.discard();  // closes the connection (PostgreSQL first tries a bounded rollback)
}

std::uint64_t ForUpdateDriver::lock(Connection& s, const std::string& name, milliseconds wait) {
  for (int round = 0; round < 3; ++round) {
    s.begin();
    try {
      Result r;
      if (wait.count() <= 0) {
        r = s.run(d_[Statement::for_update_try], {name});
      } else {
        s.allow_wait(wait);
        s.run(d_[Statement::session_wait], {std::int64_t{wait.count()}});
        r = s.run(d_[Statement::for_update_wait], {name});
      }
      if (!r.rows.empty()) return next_fence();  // locked: the transaction stays open
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

std::uint64_t ForUpdateDriver::next_fence() {
  auto aux = connections_.get();  // an idle connection of this driver's, or a new one
  auto fence = static_cast<std::uint64_t>(as_int(aux->run(d_[Statement::fence_next]).rows.at(0).at(0)));
  return fence;
}

void ForUpdateDriver::unlock(Connection& s, const std::string&) { s.rollback(); }

std::uint64_t AdvisoryDriver::lock(Connection& s, const std::string& name, milliseconds wait) {
  auto key = advisory_key(table_, name);
  if (wait.count() <= 0) return static_cast<std::uint64_t>(as_int(s.run(d_[Statement::advisory_try], {key}).rows.at(0).at(0)));
  // One statement per wait, in pieces that end well before the statement timeout (1 s of
  // margin for the statement's own work). A piece that times out is busy only when it was
  // the last: otherwise wait on, still inside the server.
  const milliseconds margin{1000}, piece = statement_timeout_ - margin;
  if (d_.offers(Statement::advisory_wait_bounded) && piece >= margin) {
    for (auto left = wait;;) {
      auto now = std::min(left, piece);
      try {
        return static_cast<std::uint64_t>(
            as_int(s.run(d_[Statement::advisory_wait_bounded], {key, std::int64_t{now.count()}}).rows.at(0).at(0)));
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
    auto fence = static_cast<std::uint64_t>(as_int(s.run(d_[Statement::advisory_wait], {key}).rows.at(0).at(0)));
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

void AdvisoryDriver::unlock(Connection& s, const std::string& name) {
  s.run(d_[Statement::advisory_unlock], {advisory_key(table_, name)});
}

}  // namespace dblock::detail::sql
