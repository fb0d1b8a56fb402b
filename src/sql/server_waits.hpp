// ServerWaits: where releases notify nobody, how a queued lease waiter can still wait without
// polling: blocked in the server, on something the one ahead of it holds and lets go. The
// lease drivers call it at four points of a fair wait (joining the queue, each attempt's
// session, the wait between attempts, the grant); a backend that has such waits gives one per
// Client (MySQL's turn keys, backends/mysql/mysql_turn_keys.cpp), and elsewhere it is null.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "core/driver.hpp"
#include "sql/connection.hpp"
#include "sql/connection_pool.hpp"

namespace dblock::detail::sqldb {

class LeaseDriver;
class WaitingPlace;

class ServerWaits {
 public:
  virtual ~ServerWaits() = default;

  // A waiter's stake in its wait (say, its key, and the session holding it), kept in its
  // WaitingPlace. It goes with the place, after the place's ticket: the waiter behind, woken
  // by it, then finds the ticket gone.
  class Place {
   public:
    virtual ~Place() = default;
    // The session the waiter's attempts run on while it has one; null: a pooled one.
    virtual Connection* session() = 0;
  };

  // Joins the name's queue on the attempt's session `s` (`params`: Statement::queue_join's),
  // setting up the waiter's wait in the same round trip; nothing when this waiter takes none
  // (it then joins as elsewhere).
  virtual std::optional<Result> join(LeaseDriver& driver, Connection& s, WaitingPlace& w,
                                     const std::vector<Value>& params) = 0;
  // After an attempt on the pooled session `s`: where that attempt's join left the waiter's
  // stake on `s`, the waiter keeps `s` (it leaves the pool).
  virtual void keep_session(WaitingPlace& w, ConnectionPool::Handle& s) = 0;
  // Waits, up to `until`, for the one ahead of the busy attempt `a` to go: none when there was
  // nothing to wait on or the wait ran out (`a` is still the answer); woke when it went
  // (attempt again now); tried when the wait went on to a grant attempt (its answer now in `a`).
  enum class Turn { none, woke, tried };
  virtual Turn wait(LeaseDriver& driver, AcquireRequest& r, Attempt& a, Clock::time_point until) = 0;
  // The grant `lease` won by waiter `w`, which keeps the waiter's stake until its release
  // (which then wakes the waiter behind); `lease` itself where `w` has none.
  virtual std::unique_ptr<GrantHandle> hold(LeaseDriver& driver, WaitingPlace& w, std::unique_ptr<GrantHandle> lease,
                                            const AcquireRequest& r, std::uint64_t fence) = 0;
};

}  // namespace dblock::detail::sqldb
