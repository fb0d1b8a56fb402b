// Redlock (antirez's algorithm) with fences.
//
// Acquire: the acquire script runs on every node at once; the lock is won when a majority
// granted it and time is left: validity = (least TTL the majority granted) - elapsed - drift,
// drift = ttl/100 + 2 ms for clock-rate differences between us and the nodes.
//
// Fences. No node sees every grant, so a node's own counter does not order grants. Each
// node's acquire draws max(its counter + 1, our clock in microseconds) and raises its
// counter to that; the grant takes F = the greatest value among the majority it won. When
// every granting node gave F (every one whose answer was read: a majority), the grant is
// won as it stands: that majority W's counters are F, set while the name was held there.
// Otherwise it writes F back (counter = max(counter, F), the record's fence = F) on the
// nodes, and only counts as won when a majority W confirmed the write-back while still
// holding the name. Either way, the next grant needs a majority too, which overlaps W in
// some node n; it can only take n after our key left n, which is after n's counter reached
// >= F, so its draw there gives more than F, and its own maximum is more than F. Fences
// therefore strictly increase across grants. A node that lost its counter (a restart
// without its append-only file's last second) still draws past F through the clock, unless
// the clocks of the two grants' clients differ by more than the time between the grants.
// The write-back also brings the nodes' counters back in step (a node that was down, a
// split vote's draws), so the next grant needs none.
//
// Split votes. Contenders that ask at once (all the waiters a release wakes) can each win
// a minority of the nodes, and with every one of them backing off, the next round collides
// again: a busy answer therefore names the holder, the contender with the most nodes asks
// the busy nodes again for a few rounds, and the others let go at once.
#include "backends/redis/redlock_driver.hpp"

#include <algorithm>
#include <map>

#include "backends/redis/redis_driver.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::redis {

namespace {
using Kind = NodeAnswer::Kind;

milliseconds drift_for(milliseconds ttl) { return ttl / 100 + milliseconds{2}; }

milliseconds since(Clock::time_point t0) { return std::chrono::ceil<milliseconds>(Clock::now() - t0); }

// How the nodes that answered a release or renewal voted: "not ours" is 0 or nil (the
// release and renew scripts' answers), anything else "ours".
struct Votes {
  std::size_t ours = 0, not_ours = 0;
  explicit Votes(const std::vector<NodeAnswer>& answers) {
    for (const auto& a : answers) {
      if (!a.ok()) continue;
      bool no = a.reply->type == REDIS_REPLY_NIL || (a.reply->type == REDIS_REPLY_INTEGER && a.reply->integer == 0);
      ++(no ? not_ours : ours);
    }
  }
};

// A release or renewal is settled once a majority said "ours" or more than N - majority
// said "not ours": it returns then instead of waiting for the slowest nodes, whose answers
// change nothing (a third of a release's time with five nodes on two cores).
std::optional<Nodes::Late> settled(const std::vector<NodeAnswer>& answers, std::size_t majority) {
  Votes v(answers);
  if (v.ours >= majority || v.not_ours > answers.size() - majority) return Nodes::Late{};
  return std::nullopt;
}

// The fence an answer to the acquire script granted (an integer), 0 for any other answer.
std::uint64_t granted_fence(const redisReply& r) {
  return r.type == REDIS_REPLY_INTEGER && r.integer > 0 ? static_cast<std::uint64_t>(r.integer) : 0;
}
}  // namespace

milliseconds RedlockDriver::per_node_timeout(milliseconds ttl) const {
  return std::min(statement_timeout_, std::clamp(ttl / 10, milliseconds{20}, milliseconds{100}));
}

void RedlockDriver::abort(const std::string& name, const std::string& owner, const std::string& attempt,
                          const std::vector<NodeAnswer>& answers, milliseconds timeout) {
  // Undo where we may have been granted: nodes that granted, and nodes whose answer we did
  // not get (the script may have run there, or may not: the undo names the attempt, so it
  // removes only a hold this attempt added). Best effort: what is left expires with its TTL.
  std::vector<bool> which(answers.size());
  bool any = false;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    bool granted = answers[i].ok() && granted_fence(*answers[i].reply) != 0;
    which[i] = granted || answers[i].kind == Kind::timed_out || answers[i].kind == Kind::unread;
    any = any || which[i];
  }
  // Nobody reads the answers: the first one ends the wait, the rest are dropped on arrival.
  if (any)
    nodes_.eval_all(free_script(), {name}, {owner, "attempt", attempt, keys::channel}, timeout, which,
                    [](const std::vector<NodeAnswer>&) { return std::optional<Nodes::Late>(Nodes::Late{}); });
}

Attempt RedlockDriver::try_acquire(AcquireRequest& r) {
  const auto t0 = Clock::now();
  const auto timeout = per_node_timeout(r.ttl);
  const std::vector<std::string> keys{r.name, keys::fence(r.name)};
  // The fence floor is this machine's clock (not each node's), so that nodes whose counters
  // agree answer one fence and the grant needs no write-back.
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string attempt = "r" + std::to_string(++attempts_);
  const auto now_ms = std::chrono::duration_cast<milliseconds>(now).count();
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
  const std::vector<std::string> args{r.owner,    std::to_string(r.ttl.count()), feed_ ? "1" : "0",
                                      std::to_string(now_ms), attempt, std::to_string(now_us)};
  const auto n = nodes_.size(), majority = nodes_.majority();
  // Won as soon as a majority granted with one fence F (see the top of this file: the next
  // grant's majority overlaps those nodes, whatever the others say), without waiting for
  // the slowest nodes. Their answers are checked when they come: a late grant with a fence
  // other than F means the counters are out of step, and then acquires read every answer
  // (so that a write-back brings them together) until one finds them agreeing again.
  Nodes* nodes = &nodes_;
  auto decided = [&](const std::vector<NodeAnswer>& so_far) -> std::optional<Nodes::Late> {
    if (!nodes->counters_in_step()) return std::nullopt;
    std::size_t granted = 0;
    std::uint64_t f = 0;
    for (const auto& a : so_far) {
      auto g = a.ok() ? granted_fence(*a.reply) : 0;
      if (g == 0) continue;
      if (f != 0 && g != f) return std::nullopt;
      f = g;
      ++granted;
    }
    if (granted < majority) return std::nullopt;
    return Nodes::Late([nodes, f](const redisReply& late) {
      auto g = granted_fence(late);
      if (g != 0 && g != f) nodes->set_counters_in_step(false);
    });
  };
  auto answers = nodes_.eval_all(acquire_script(), keys, args, timeout, {}, decided);
  const bool read_all = std::none_of(answers.begin(), answers.end(), [](const auto& a) { return a.kind == Kind::unread; });

  std::size_t granted = 0, down = 0;
  std::uint64_t fence = 0;
  std::vector<std::uint64_t> node_fence(n, 0);  // what each granting node's counter gave
  auto least_granted = milliseconds::max(), least_busy = milliseconds::max();
  std::vector<bool> busy(n);  // the nodes that answered with someone else's hold
  std::map<std::string, std::size_t> held_by;  // a busy node's holder: how many nodes it has
  auto tally = [&](std::size_t i) {
    const auto& a = answers[i];
    busy[i] = false;
    if (!a.ok() || (a.reply->type != REDIS_REPLY_ARRAY && a.reply->type != REDIS_REPLY_INTEGER)) return;
    auto at = parse_answer(*a.reply, r.ttl);
    if (at.granted) {
      ++granted;
      node_fence[i] = at.fence;
      fence = std::max(fence, at.fence);
      least_granted = std::min(least_granted, at.remaining);
      return;
    }
    busy[i] = true;
    if (at.remaining.count() > 0) least_busy = std::min(least_busy, at.remaining);
    const auto& h = *a.reply->element[1];
    if (h.type == REDIS_REPLY_STRING) ++held_by[std::string(h.str, h.len)];
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (answers[i].kind == Kind::down) ++down;
    tally(i);
  }

  // A split vote: contenders that sent at once each won some nodes, none a majority. The
  // one with the most nodes (ties: the smallest owner string, which everyone compares the
  // same way) asks the nodes it lacks again while the others let go of theirs (they come to
  // the same conclusion from the same answers), instead of everyone backing off and
  // colliding again. Only busy nodes are asked again: a node whose answer timed out may
  // hold a grant of ours already, and a second ask would draw it a second fence there.
  for (int round = 0; round < 4 && granted > 0 && granted < majority; ++round) {
    bool leader = true;
    for (const auto& [holder, count] : held_by)
      if (count >= majority || count > granted || (count == granted && holder < r.owner)) leader = false;
    if (!leader || since(t0) * 2 > r.ttl) break;
    const auto again = busy;
    if (std::find(again.begin(), again.end(), true) == again.end()) break;
    held_by.clear();
    least_busy = milliseconds::max();
    auto more = nodes_.eval_all(acquire_script(), keys, args, timeout, again);
    for (std::size_t i = 0; i < n; ++i)
      if (again[i]) {
        answers[i] = std::move(more[i]);
        tally(i);
      }
  }

  if (granted >= majority && least_granted - since(t0) - drift_for(r.ttl) > milliseconds{0}) {
    // Every granting node's counter gave the same F: those counters were raised to F while
    // the name was held there, by the acquire itself, which is all the write-back would do
    // (see the top of this file). The usual case, once the counters are in step.
    bool in_step = std::all_of(node_fence.begin(), node_fence.end(), [&](auto f) { return f == 0 || f == fence; });
    if (in_step) {
      if (read_all && granted == n) nodes_.set_counters_in_step(true);
      return keyed_grant(*this, r, fence, least_granted - since(t0) - drift_for(r.ttl));
    }
    // Write the fence back before calling it won.
    auto back = nodes_.eval_all(fence_script(), keys, {r.owner, std::to_string(fence)}, timeout);
    std::size_t confirmed = 0;
    for (const auto& a : back)
      if (a.ok() && as_int(*a.reply) == 1) ++confirmed;
    if (confirmed == n) nodes_.set_counters_in_step(true);
    auto validity = least_granted - since(t0) - drift_for(r.ttl);
    if (confirmed >= majority && validity > milliseconds{0}) return keyed_grant(*this, r, fence, validity);
  }
  abort(r.name, r.owner, attempt, answers, timeout);
  if (down > n - majority)
    throw UnavailableError("redlock: " + std::to_string(down) + " of " + std::to_string(n) +
                           " nodes are unreachable, a majority (" + std::to_string(majority) + ") is needed");
  // Not won (busy, a split vote, or answers too slow): the core waits and tries again.
  return Attempt::busy(least_busy == milliseconds::max() ? milliseconds{0} : least_busy);
}

Renewal RedlockDriver::renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                             int holds) {
  const auto t0 = Clock::now();
  auto answers = nodes_.eval_all(renew_script(), {name},
                                 {owner, std::to_string(fence), std::to_string(ttl.count()), std::to_string(holds)},
                                 per_node_timeout(ttl.count() > 0 ? ttl : statement_timeout_), {},
                                 [&](const auto& a) { return settled(a, nodes_.majority()); });
  const Votes v(answers);
  const auto n = nodes_.size(), majority = nodes_.majority();
  auto validity = ttl - since(t0) - drift_for(ttl);
  if (v.ours >= majority && validity > milliseconds{0}) return Renewal{true, validity};
  if (v.ours >= majority && ttl.count() == 0) return Renewal{true, milliseconds{0}};  // a count only
  // A majority can no longer be ours: lost. Otherwise we cannot tell yet; the watchdog
  // retries until the lease's deadline.
  if (v.not_ours > n - majority) return Renewal{false, milliseconds{0}};
  throw UnavailableError("redlock: renewal of '" + name + "' reached " + std::to_string(v.ours) + " of " +
                         std::to_string(n) + " nodes, a majority is " + std::to_string(majority));
}

bool RedlockDriver::release(const std::string& name, const std::string& owner, std::uint64_t fence) {
  return ours_on_a_majority(free_script(), name, {owner, "fence", std::to_string(fence), keys::channel});
}

// A kept lease holds a majority until it expires: no one else can win one before.
bool RedlockDriver::release_after(const std::string& name, const std::string& owner, std::uint64_t fence,
                                  milliseconds keep) {
  return ours_on_a_majority(keep_script(), name, {owner, std::to_string(fence), std::to_string(keep.count())});
}

bool RedlockDriver::ours_on_a_majority(const Script& script, const std::string& name,
                                       const std::vector<std::string>& args) {
  auto answers = nodes_.eval_all(script, {name}, args, std::min(statement_timeout_, milliseconds{500}), {},
                                 [&](const auto& a) { return settled(a, nodes_.majority()); });
  const Votes v(answers);
  const auto n = nodes_.size(), majority = nodes_.majority();
  if (v.ours >= majority) return true;
  if (v.not_ours > n - majority) return false;
  throw UnavailableError("redlock: release of '" + name + "' reached " +
                         std::to_string(v.ours + v.not_ours) + " of " + std::to_string(n) +
                         " nodes; what it held there expires with its TTL");
}

}  // namespace dblock::detail::redis
