// The session strategies on SQL (for-update, advisory): the lock lives in a connection
// pinned for as long as it is held, and the server frees it when that connection drops.
// Each held grant costs one database connection (taken from a small idle list, or opened).
// Waiting happens inside the server (lock_timeout / NOWAIT); "renewal" pings the pinned
// connection, so a dropped connection or a server restart is reported as a loss within
// one renewal interval. A grant's handle is its pinned connection (SessionDriver::Pinned).
#pragma once

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
  // Connections come from `connect`; at most max_idle are kept between holds.
  SessionDriver(ConnectionPool::Open connect, const Dialect& d, std::size_t max_idle)
      : d_(d), connections_(std::move(connect), {SIZE_MAX, max_idle, milliseconds{0}, d.name + " session locks"}) {}
  ~SessionDriver() override;

  Attempt try_acquire(AcquireRequest& r) override;

 protected:
  // Takes the lock on the pinned session s, in `mode` (only what SqlBackend::shapes offers),
  // and returns its fence; 0 when busy. Leaves s ready to unlock().
  virtual std::uint64_t lock(Connection& s, const std::string& name, milliseconds wait, Mode mode) = 0;
  virtual void unlock(Connection& s, const std::string& name, Mode mode) = 0;
  const Dialect& d_;
  ConnectionPool connections_;  // pinned while a lock is held; unbounded (one per held lock)

 private:
  class Pinned;
};

class ForUpdateDriver final : public SessionDriver {
 public:
  using SessionDriver::SessionDriver;

 protected:
  std::uint64_t lock(Connection& s, const std::string& name, milliseconds wait, Mode mode) override;
  void unlock(Connection& s, const std::string& name, Mode mode) override;

 private:
  // A fence for the row lock `transaction` holds on `s`, drawn on another connection.
  std::uint64_t fence_of_lock(Connection& s, const Value& transaction);
};

class AdvisoryDriver final : public SessionDriver {
 public:
  AdvisoryDriver(ConnectionPool::Open connect, const Dialect& d, std::size_t max_idle, std::string table,
                 milliseconds statement_timeout)
      : SessionDriver(std::move(connect), d, max_idle),
        table_(std::move(table)),
        statement_timeout_(statement_timeout) {}

 protected:
  std::uint64_t lock(Connection& s, const std::string& name, milliseconds wait, Mode mode) override;
  void unlock(Connection& s, const std::string& name, Mode mode) override;

 private:
  std::string table_;
  milliseconds statement_timeout_;  // the sessions' own, which bounds a one-statement wait
};

}  // namespace dblock::detail::sqldb
