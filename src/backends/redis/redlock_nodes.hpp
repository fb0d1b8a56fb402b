// Redlock's N independent Redis nodes, talked to in parallel: a script is queued on every
// node's connection, all are flushed, then the answers are read against one deadline, so an
// attempt costs about one round trip to the slowest node that answers in time, not the sum.
// A node that fails or does not answer in time rests for a second (it is not asked while
// the others can make a majority), and is then retried with a connect timeout no longer than
// the attempt's per-node timeout: a dead or hung node does not slow every attempt.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/redis/redis_connection.hpp"
#include "core/driver.hpp"

namespace dblock::detail::redis {

// One node's answer to a parallel call.
struct NodeAnswer {
  // unread: the call was decided before this node answered (see eval_all's `decided`); the
  // script was sent and may have run.
  enum class Kind { answered, down, timed_out, unread } kind = Kind::down;
  Reply reply;  // answered: the reply (may be a Redis error reply other than NOSCRIPT)
  bool ok() const { return kind == Kind::answered && reply && reply->type != REDIS_REPLY_ERROR; }
};

class Nodes {
 public:
  Nodes(std::vector<Target> nodes, std::size_t pool_size);
  std::size_t size() const noexcept { return targets_.size(); }
  std::size_t majority() const noexcept { return targets_.size() / 2 + 1; }
  const std::vector<Target>& targets() const noexcept { return targets_; }

  // Connects to every node now (with the full connect timeout); throws UnavailableError
  // when fewer than a majority are reachable.
  void connect_all();

  // Runs a script on the nodes flagged in `which` (all when empty) at once and waits for
  // their answers until `timeout` has passed, or until `decided` (when given) says the
  // answers so far settle the outcome, by returning what to do with each answer still to
  // come (an empty function: nothing): those are left `unread`, and whichever call uses
  // their connections next hands each to that function on arrival and drops it.
  using Late = std::function<void(const redisReply&)>;
  using Decided = std::function<std::optional<Late>(const std::vector<NodeAnswer>&)>;
  std::vector<NodeAnswer> eval_all(const Script& s, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args, milliseconds timeout,
                                   const std::vector<bool>& which = {}, const Decided& decided = {});

  // Whether the nodes' fence counters are believed in step (see RedlockDriver::try_acquire):
  // cleared when a late answer shows a node granting with a fence other than the one its
  // acquire settled on, set again once an acquire that read every node found them agreeing.
  bool counters_in_step() const noexcept { return in_step_.load(std::memory_order_relaxed); }
  void set_counters_in_step(bool yes) noexcept { in_step_.store(yes, std::memory_order_relaxed); }

 private:
  using Set = std::vector<std::unique_ptr<Connection>>;  // one slot per node, null: not connected
  Set borrow();
  void give_back(Set s);
  // Drops the connections of `which` (empty: all) that the server closed, and connects the
  // missing ones whose node is not resting (known down or slow), or all with resting_too.
  void ensure(Set& s, const std::vector<bool>& which, milliseconds connect_timeout, bool resting_too);
  void failed(std::size_t i);
  std::unique_ptr<Connection> open(std::size_t i, milliseconds connect_timeout);  // with the scripts loaded
  // Opens the connections of the nodes in `nodes` side by side, into s (connect_timeout
  // negative: each node's own); the error of each that failed, by node (empty: connected).
  std::vector<std::string> open_many(Set& s, const std::vector<std::size_t>& nodes,
                                     milliseconds connect_timeout);

  std::vector<Target> targets_;
  std::size_t pool_size_;
  std::mutex mutex_;
  std::vector<Set> idle_;
  // Per node: when a connection may next be tried (steady clock ticks); 0: any time.
  std::unique_ptr<std::atomic<Clock::rep>[]> retry_at_;
  std::atomic<bool> in_step_{true};
};

}  // namespace dblock::detail::redis
