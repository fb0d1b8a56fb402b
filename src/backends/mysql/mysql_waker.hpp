// Release wake-ups on MySQL, which has no LISTEN/NOTIFY: waiters block inside the server
// on something the holder keeps while it holds.
//
// For every lease it holds, a client keeps a GET_LOCK "wake lock" (dblock:w:<key of the
// name>) on one connection of its own, taken right after the grant and released right after
// the release. A waiter's watch blocks in GET_LOCK on that key, so the server wakes it the
// moment the holder lets go (or its connection drops), and gives the key straight back.
// When nobody holds the key (the holder crashed, runs without notifications, or has not
// taken it yet) the watch falls back to polling with a growing interval.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "sql/notifier.hpp"
#include "sql/session_pool.hpp"

namespace dblock::detail::sql {

class MySqlWaker final : public Notifier {
 public:
  // scope: "<database>.<table>", which wake keys are derived from (like advisory keys).
  MySqlWaker(SessionPool::Factory connect, std::string scope);
  ~MySqlWaker() override;
  void acquired(const std::string& name) noexcept override;
  void released(const std::string& name) noexcept override;
  void dropped(const std::string& name) noexcept override { released(name); }
  std::unique_ptr<ReleaseWatch> watch(const std::string& name) override;

  // The wake lock's name for a lock name (a GET_LOCK name: at most 64 characters).
  std::string key(const std::string& name) const;

  struct Connections;  // idle connections for watches, shared with them

 private:
  bool hold(const std::string& name);  // with mutex_ held

  SessionPool::Factory connect_;
  std::string scope_;
  std::mutex mutex_;
  std::unique_ptr<Session> holder_;  // the connection that holds this client's wake locks
  std::set<std::string> held_;       // the names it holds them for
  std::shared_ptr<Connections> idle_;
};

}  // namespace dblock::detail::sql
