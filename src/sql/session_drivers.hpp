// The session strategies on SQL (for-update, advisory): the lock lives in a connection
// pinned for as long as it is held, and the server frees it when that connection drops.
// A for-update grant costs one database connection (taken from a small idle list, or opened):
// its lock is an open transaction. Advisory grants share connections (AdvisoryDriver).
// Waiting happens inside the server (lock_timeout / NOWAIT); "renewal" pings the pinned
// connection, so a dropped connection or a server restart is reported as a loss within
// one renewal interval. A grant's handle is its pinned connection (SessionDriver::Pinned).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "core/driver.hpp"
#include "sql/dialect.hpp"
#include "sql/connection_pool.hpp"

namespace dblock::detail::sqldb {

// The advisory lock key for a name: FNV-1a 64 over "<table>:<name>", as a signed 64-bit
// integer. Stable across processes, versions and platforms; distinct names collide with
// probability about n^2 / 2^65 for n names in use (a collision only makes two names share
// one lock, never breaks exclusion).
std::int64_t advisory_key(const std::string& table, const std::string& name);

class SessionDriver : public LockDriver {
 public:
  // Connections come from `connect`, or idle from `home` (the Client's pool: a process that
  // only waits for a session lock then holds one connection, not that pool's first one
  // beside its own); at most max_idle are kept between holds.
  SessionDriver(ConnectionPool& home, ConnectionPool::Open connect, const Dialect& d, std::size_t max_idle)
      : d_(d), home_(home),
        connections_(std::move(connect), {SIZE_MAX, max_idle, milliseconds{0}, d.name + " session locks"}) {}
  ~SessionDriver() override;

  Attempt try_acquire(AcquireRequest& r) override;
  bool waits_in_server() const noexcept override { return true; }

 protected:
  // Takes r's lock on the pinned session s, in r.mode (only what SqlBackend::shapes offers),
  // waiting up to `wait` in the server, and returns its fence; 0 when busy or when r was
  // cancelled meanwhile. Leaves s ready to unlock().
  virtual std::uint64_t lock(Connection& s, const AcquireRequest& r, milliseconds wait) = 0;
  // lock() with a wait, which r's cancel ends (Connection::canceller).
  std::uint64_t wait_lock(Connection& s, AcquireRequest& r, milliseconds wait);
  virtual void unlock(Connection& s, const std::string& name, Mode mode) = 0;
  // A session for a lock: the home pool's idle connection (not a lent one), else one of ours,
  // else a new one.
  ConnectionPool::Handle session() {
    if (auto c = home_.take_idle([](const Connection& c) { return c.may_pin(); }))
      return connections_.adopt(std::move(c));
    return connections_.get();
  }
  const Dialect& d_;
  ConnectionPool& home_;        // the backend's, which outlives every driver
  ConnectionPool connections_;  // pinned while a lock is held; unbounded (one per held lock)

 private:
  class Pinned;
};

class ForUpdateDriver final : public SessionDriver {
 public:
  using SessionDriver::SessionDriver;

 protected:
  std::uint64_t lock(Connection& s, const AcquireRequest& r, milliseconds wait) override;
  void unlock(Connection& s, const std::string& name, Mode mode) override;

 private:
  // A fence for the row lock `transaction` holds on `s`, drawn on another connection.
  std::uint64_t fence_of_lock(Connection& s, const Value& transaction);
};

// Advisory locks are multiplexed: one session may hold many (pg_advisory_lock, GET_LOCK), so a
// Client's advisory locks share a few connections (SharedSession) instead of one each. A lock
// is tried on a shared session; only a wait inside the server takes a connection of its own,
// which joins the shared sessions once the wait is granted. A lost shared connection loses
// each of its locks (docs/ARCHITECTURE.md, "Multiplexed advisory locks").
class SharedSession;

class AdvisoryDriver final : public SessionDriver {
 public:
  // `max_shared`: the shared sessions opened for tries (a wait's own connection may add more).
  AdvisoryDriver(ConnectionPool& home, ConnectionPool::Open connect, const Dialect& d, std::size_t max_idle,
                 std::string table, milliseconds statement_timeout, std::size_t max_shared)
      : SessionDriver(home, std::move(connect), d, max_idle),
        table_(std::move(table)),
        statement_timeout_(statement_timeout),
        max_shared_(std::max<std::size_t>(1, max_shared)) {}
  ~AdvisoryDriver() override;

  Attempt try_acquire(AcquireRequest& r) override;

 protected:
  std::uint64_t lock(Connection& s, const AcquireRequest& r, milliseconds wait) override;
  void unlock(Connection& s, const std::string& name, Mode mode) override;

 private:
  class SharedGrant;
  std::int64_t key_of(const std::string& name) const { return advisory_key(table_, name); }
  // A shared session for one more try (counted in its users): the least used one below
  // locks_per_session, else a new one while fewer than max_shared_ are open, else the least
  // used. Without `may_open` (a try before a wait), none is opened while none is: null.
  std::shared_ptr<SharedSession> pick(bool may_open);
  // A try or a grant left `s`: a session nobody uses any more goes back to the idle list.
  void leave(const std::shared_ptr<SharedSession>& s);
  std::string table_;
  milliseconds statement_timeout_;  // the sessions' own, which bounds a one-statement wait
  const std::size_t max_shared_;
  static constexpr std::size_t locks_per_session = 128;
  std::mutex mutex_;
  std::vector<std::shared_ptr<SharedSession>> shared_;  // guarded by mutex_
  std::size_t opening_ = 0;  // sessions pick() is connecting now, outside the lock; guarded by mutex_
  std::condition_variable opened_;  // opening_ went down
};

}  // namespace dblock::detail::sqldb
