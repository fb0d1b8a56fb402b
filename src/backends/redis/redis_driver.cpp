#include "backends/redis/redis_driver.hpp"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

#include "dblock/errors.hpp"

namespace dblock::detail::redis {

std::string now_ms_text() {
  return std::to_string(std::chrono::duration_cast<milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count());
}

Answer parse_answer(const redisReply& r, milliseconds ttl) {
  if (r.type == REDIS_REPLY_INTEGER && r.integer > 0)  // a grant answers its fence alone
    return Answer{true, static_cast<std::uint64_t>(r.integer), ttl};
  // {-1, permits} or {-2, type}: the name is held in a shape this attempt cannot join (see
  // refuse_mismatch); Redlock, which offers no shapes, only meets them when a name is also
  // locked with the redis strategy on a node's server, and counts such a node busy.
  if (r.type == REDIS_REPLY_ARRAY && r.elements == 2 && r.element[0]->type == REDIS_REPLY_INTEGER &&
      r.element[0]->integer < 0)
    return Answer{false, 0, milliseconds{0}};
  if (r.type != REDIS_REPLY_ARRAY || r.elements != 3)
    throw InternalError("redis: unexpected answer to the acquire script");
  return Answer{false, 0, milliseconds{std::max<std::int64_t>(0, as_int(*r.element[2]))}};
}

void confirm_replicated(Connection& c, const Failover& failover, milliseconds ttl,
                        const std::function<void(Connection&)>& undo) {
  if (failover.replicas <= 0) return;
  const auto limit = std::max(milliseconds{1}, std::min(failover.wait_timeout, ttl / 2));
  auto acked = as_int(*c.command({"WAIT", std::to_string(failover.replicas), std::to_string(limit.count())}));
  if (acked >= failover.replicas) return;
  if (undo) {
    try {
      undo(c);
    } catch (const Error&) {  // best effort: the TTL frees what it could not
    }
  }
  c.abandon("too few replicas acknowledged");
  const auto asked = std::to_string(failover.replicas);
  throw UnavailableError("redis: " + std::to_string(acked) + " of the " + asked + " replicas asked for (replicas=" +
                         asked + ") acknowledged a write on " + c.where() + " within " +
                         std::to_string(limit.count()) + " ms");
}

namespace {

// Tries `call` again while the master cannot be reached or is not the master (an
// UnavailableError: refused, dropped, READONLY, LOADING, MASTERDOWN, too few replicas), for up
// to retry_for: each try takes a new connection, which asks the Sentinels where the master is.
template <class Call>
auto following_master(milliseconds retry_for, Call call) {
  const auto until = std::chrono::steady_clock::now() + retry_for;
  milliseconds pause{50};
  for (;;) {
    try {
      return call();
    } catch (const UnavailableError&) {
      if (std::chrono::steady_clock::now() + pause >= until) throw;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds{500});
  }
}

// How long a writer that found readers keeps new readers out (the hash's ':writer' mark, on
// the server's clock): this, or what is left of the writer's wait if less, so a try-lock
// (no wait) leaves no mark and a writer that gives up keeps nobody out after its deadline.
// A waiting writer tries again within half of it (its busy answer says so), and each
// attempt renews the mark, so it lasts while the writer waits.
constexpr milliseconds writer_mark{3000};

// The acquire scripts' refusals: the name is held with another number of permits, or the key
// is not a dblock lock. Both are the caller's mistake (two programs disagree about what the
// name is): a UsageError, never a wait that cannot end.
void refuse_mismatch(const redisReply& r, const AcquireRequest& req) {
  if (r.type != REDIS_REPLY_ARRAY || r.elements != 2 || r.element[0]->type != REDIS_REPLY_INTEGER) return;
  if (r.element[0]->integer == -1) {
    auto held = as_int(*r.element[1]);
    auto shape = [](std::int64_t permits) {
      return permits == 1 ? std::string("a mutex or read/write lock (permits 1)")
                          : "a semaphore of " + std::to_string(permits) + " permits";
    };
    throw UsageError("lock '" + req.name + "' is held as " + shape(held) + ", not as " +
                     shape(static_cast<std::int64_t>(req.permits)) + ": every holder of a name must ask for the same permits");
  }
  if (r.element[0]->integer == -2)
    throw UsageError("lock '" + req.name + "': the redis key of that name holds a " +
                     std::string(r.element[1]->str, r.element[1]->len) + " that is not a dblock lock");
}

// A shaped grant (a reader, or one of a semaphore's holders): a field of the name's hash,
// found again by owner and fence.
class ShapedGrant final : public GrantHandle {
 public:
  ShapedGrant(ConnectionPool& pool, const Failover& failover, std::string name, std::string owner, std::uint64_t fence)
      : pool_(pool), failover_(failover), name_(std::move(name)), owner_(std::move(owner)),
        fence_(std::to_string(fence)) {}
  Renewal renew(milliseconds ttl, int holds) override {
    auto c = pool_.get();
    auto reply =
        c->eval(shaped_renew_script(), {name_}, {owner_, fence_, std::to_string(ttl.count()), std::to_string(holds)});
    if (reply->type == REDIS_REPLY_NIL) return Renewal{false, milliseconds{0}};
    if (ttl.count() > 0) confirm_replicated(*c, failover_, ttl);
    return Renewal{true, milliseconds{as_int(*reply)}};
  }
  bool release() override {
    auto c = pool_.get();
    return as_int(*c->eval(shaped_release_script(), {name_}, {owner_, fence_, keys::channel})) != 0;
  }
  bool release_after(milliseconds keep) override {
    auto c = pool_.get();
    return as_int(*c->eval(shaped_keep_script(), {name_}, {owner_, fence_, std::to_string(keep.count())})) != 0;
  }

 private:
  ConnectionPool& pool_;                // the backend's, which outlives every grant (as the driver does)
  const Failover& failover_;  // the driver's, likewise
  const std::string name_, owner_, fence_;
};

// A fair waiter's place in the name's queue (keys::queue), kept between the attempts of one
// acquire. Dropped while the server still has it (the acquire timed out or threw) it leaves
// the queue, so the waiters behind need not wait for it to lapse; best effort: if the leave
// fails, the ticket lapses within ticket_life.
class Ticket final : public QueuePlace {
 public:
  Ticket(ConnectionPool& pool, const std::string& name, const std::string& owner)
      : pool_(pool), name_(name), owner_(owner) {}
  ~Ticket() override {
    if (!held) return;
    try {
      auto c = pool_.get();
      c->eval(leave_script(), {name_, keys::queue(name_), keys::alive(name_), keys::fence(name_)},
              {owner_, keys::channel});
    } catch (...) {  // a destructor never throws
    }
  }
  bool held = true;  // false once a grant or a last attempt took the ticket away on the server
  // The last attempt that kept it: its token, as a hand-over names it, and when it was sent
  // (see take_handover).
  std::string token;
  Clock::time_point sent{};

 private:
  ConnectionPool& pool_;  // the backend's, which outlives every acquire
  const std::string name_, owner_;
};

// An attempt's token: unique within the process, which with the owner (one Client's thread)
// makes it unique to one attempt of one acquire.
std::string next_token() {
  static std::atomic<std::uint64_t> n{0};
  return std::to_string(++n);
}

}  // namespace

Attempt RedisDriver::try_acquire(AcquireRequest& r) {
  // A retry after an answer that never came is safe: a grant it may have made names our
  // owner, and the acquire scripts take such a leftover over with a new fence.
  return following_master(failover_.retry_for, [&] { return attempt(r); });
}

// A fair waiter whose release watch is armed takes the name as a hand-over: the release grants
// it to the queue's head for this long, its TTL, so that a stall right after a hand-over costs
// no more than after any grant (a head that gave up passes the name on as its ticket leaves;
// one that died in line holds it as a holder that died would). A grant the core will not
// renew gets the TTL it asked for, as any grant does. Not where a grant must wait for
// replicas (the release's write is not the waiter's to confirm).
milliseconds RedisDriver::handover_lease(const AcquireRequest& r) const {
  // No feed (notifications off), or redlock's: no list to be told on.
  if (handed_list_.empty() || failover_.replicas > 0 || r.wait.count() == 0) return milliseconds{0};
  return r.ttl;
}

// The message says the release granted us the name, for its lease from when the release ran;
// it came from our process's list, which only those who may write the lock's keys can push
// to, so it is taken without reading the record back. When the release ran is not known
// here, only that it read the ticket our last attempt wrote (the message names that
// attempt's token: each attempt writes a new one), so it ran after that attempt was sent, and
// the lease counts from that send. A message naming an earlier attempt is stale (the attempt
// after it came after the release, found the record ours and took it over; or the lease
// lapsed meanwhile and someone else holds the name). A lease half gone by then (a long
// stall) is left to the next attempt, which takes the record over if it is still ours.
std::optional<Attempt> RedisDriver::take_handover(AcquireRequest& r) {
  if (!r.fair || !r.place || !feed_) return std::nullopt;
  auto handed = feed_->take_handover(r.name, r.owner);
  auto& ticket = static_cast<Ticket&>(*r.place);
  if (!handed || handed->token != ticket.token) return std::nullopt;
  const auto lease = std::min(handed->lease, handover_lease(r));
  const auto left = std::chrono::duration_cast<milliseconds>(ticket.sent + lease - Clock::now());
  if (left < lease / 2) return std::nullopt;
  ticket.held = false;  // the release took it off the queue
  return keyed_grant(*this, r, handed->fence, left);
}

Attempt RedisDriver::attempt(AcquireRequest& r) {
  if (auto handed = take_handover(r)) return std::move(*handed);  // no connection needed
  auto c = pool_.get();
  // A grant too few replicas have is given back at once (else its TTL frees it).
  auto replicated = [&](const Script& undo, const std::vector<std::string>& args) {
    confirm_replicated(*c, failover_, r.ttl, [&](Connection& on) { on.eval(undo, {r.name}, args); });
  };
  if (r.mode == Mode::exclusive && r.permits == 1) {
    // The plain record (redis-py's key). Attempt "-": nothing undoes a single server's grant.
    // Fence floor "": the server's clock. Fair: the name's queue too, how long a busy answer
    // keeps our ticket (0 when this attempt is a try or the acquire's last: the wait ends
    // with it, so the script gives the ticket up and a try writes nothing), and the lease a
    // release may hand us over with (0: none).
    std::vector<std::string> on{r.name, keys::fence(r.name)};
    std::string token;
    std::vector<std::string> args{r.owner, std::to_string(r.ttl.count()), feed_ ? "1" : "0",
                                  now_ms_text(), "-", "", std::to_string(std::min(writer_mark, r.wait).count())};
    if (r.fair) {
      on.insert(on.end(), {keys::queue(r.name), keys::alive(r.name)});
      args.push_back(std::to_string(r.wait.count() > 0 ? ticket_life.count() : 0));
      token = next_token();
      const auto lease = handover_lease(r);
      args.push_back(lease.count() > 0 ? std::to_string(lease.count()) + " " + token + " " + handed_list_ : "0");
    }
    const auto sent = Clock::now();
    auto reply = c->eval(acquire_script(), on, args);
    refuse_mismatch(*reply, r);
    auto a = parse_answer(*reply, r.ttl);
    if (!a.granted) {
      auto busy = Attempt::busy(a.remaining);
      if (r.fair && r.wait.count() > 0) {
        busy.place = r.place ? std::move(r.place) : std::make_unique<Ticket>(pool_, r.name, r.owner);
        auto& ticket = static_cast<Ticket&>(*busy.place);
        ticket.token = token;
        ticket.sent = sent;
      } else if (r.place)
        static_cast<Ticket&>(*r.place).held = false;
      return busy;
    }
    replicated(free_script(), {r.owner, "fence", std::to_string(a.fence), keys::channel});
    if (r.place) static_cast<Ticket&>(*r.place).held = false;  // the grant removed it
    return keyed_grant(*this, r, a.fence, a.remaining);
  }
  auto reply = c->eval(shaped_acquire_script(), {r.name, keys::fence(r.name)},
                       {r.owner, std::to_string(r.ttl.count()), feed_ ? "1" : "0", now_ms_text(),
                        r.mode == Mode::shared ? "s" : "x", std::to_string(r.permits)});
  refuse_mismatch(*reply, r);
  auto a = parse_answer(*reply, r.ttl);
  if (!a.granted) return Attempt::busy(a.remaining);
  replicated(shaped_release_script(), {r.owner, std::to_string(a.fence), keys::channel});
  return Attempt{std::make_unique<ShapedGrant>(pool_, failover_, r.name, r.owner, a.fence), a.fence, a.remaining,
                 nullptr};
}

Renewal RedisDriver::renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                           int holds) {
  auto c = pool_.get();
  auto reply = c->eval(renew_script(), {name},
                       {owner, std::to_string(fence), std::to_string(ttl.count()), std::to_string(holds)});
  if (reply->type == REDIS_REPLY_NIL) return Renewal{false, milliseconds{0}};
  if (ttl.count() > 0) confirm_replicated(*c, failover_, ttl);  // a count given back needs no copy
  return Renewal{true, milliseconds{as_int(*reply)}};
}

std::vector<Renewal> RedisDriver::renew(const std::vector<Item>& items) {
  auto args = [](const Item& i) {
    return std::vector<std::string>{i.key->owner, std::to_string(i.key->fence), std::to_string(i.ttl.count()),
                                    std::to_string(i.holds)};
  };
  auto c = pool_.get();
  for (const auto& i : items) c->append_eval(renew_script(), true, {i.key->name}, args(i));
  std::vector<Reply> replies;
  replies.reserve(items.size());
  for (std::size_t k = 0; k < items.size(); ++k) replies.push_back(c->read());
  std::vector<Renewal> out;
  out.reserve(items.size());
  auto shortest = milliseconds::max();  // the WAIT's bound, as for the shortest lease alone
  for (std::size_t k = 0; k < items.size(); ++k) {
    // An error answer (NOSCRIPT: a restarted server) is asked again alone, which loads the
    // script or throws the error; a renewal is safe to repeat.
    if (is_error(*replies[k])) replies[k] = c->eval(renew_script(), {items[k].key->name}, args(items[k]));
    if (replies[k]->type == REDIS_REPLY_NIL) {
      out.push_back(Renewal{false, milliseconds{0}});
      continue;
    }
    out.push_back(Renewal{true, milliseconds{as_int(*replies[k])}});
    if (items[k].ttl.count() > 0) shortest = std::min(shortest, items[k].ttl);
  }
  if (shortest != milliseconds::max()) confirm_replicated(*c, failover_, shortest);
  return out;
}

bool RedisDriver::release(const std::string& name, const std::string& owner, std::uint64_t fence) {
  auto c = pool_.get();
  auto reply = c->eval(free_script(), {name, keys::queue(name), keys::alive(name), keys::fence(name)},
                       {owner, "fence", std::to_string(fence), keys::channel});
  return as_int(*reply) != 0;
}

bool RedisDriver::release_after(const std::string& name, const std::string& owner, std::uint64_t fence,
                                milliseconds keep) {
  auto c = pool_.get();
  auto reply = c->eval(keep_script(), {name}, {owner, std::to_string(fence), std::to_string(keep.count())});
  return as_int(*reply) != 0;
}

}  // namespace dblock::detail::redis
