#include "backends/etcd/etcd_driver.hpp"

#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include "backends/etcd/etcd_keys.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::etcd {

namespace {

pb::RequestOp range_op(pb::RangeRequest r) {
  pb::RequestOp op;
  *op.mutable_request_range() = std::move(r);
  return op;
}

pb::RangeRequest key_range(const std::string& key) {
  pb::RangeRequest r;
  r.set_key(key);
  return r;
}

// The first `limit` keys under `prefix` by create revision (WithFirstCreate / WithLastCreate),
// optionally only those created before `before`.
pb::RangeRequest by_creation(const std::string& prefix, pb::RangeRequest::SortOrder order, std::int64_t before = 0) {
  pb::RangeRequest r;
  r.set_key(prefix);
  r.set_range_end(prefix_end(prefix));
  r.set_sort_target(pb::RangeRequest::CREATE);
  r.set_sort_order(order);
  r.set_limit(1);
  r.set_keys_only(true);  // only its key and create revision are used
  if (before > 0) r.set_max_create_revision(before - 1);
  return r;
}

// Every key under `prefix` created before revision `before` (0: every key), oldest first:
// what a reader or a semaphore contender must know of the keys below its own.
pb::RangeRequest all_before(const std::string& prefix, std::int64_t before) {
  pb::RangeRequest r;
  r.set_key(prefix);
  r.set_range_end(prefix_end(prefix));
  r.set_sort_target(pb::RangeRequest::CREATE);
  r.set_sort_order(pb::RangeRequest::ASCEND);
  r.set_keys_only(true);
  if (before > 0) r.set_max_create_revision(before - 1);
  return r;
}

std::string describe(KeyShape s) {
  switch (s.kind) {
    case KeyShape::reader:
      return "a read/write lock";
    case KeyShape::permit:
      return "a semaphore of " + std::to_string(s.permits) + " permits";
    default:
      return "a lock";
  }
}

// Two programs disagree about what the name is: an error, not a wait (our key goes as this
// unwinds).
[[noreturn]] void mismatch(const std::string& name, KeyShape found, KeyShape asked) {
  throw UsageError("etcd: lock '" + name + "' is held as " + describe(found) + ", not as " + describe(asked) +
                   ": take it in the same shape (a semaphore with the same permits)");
}

// The attempt's wait (the core's slice of the caller's) ended with our key still queued: it
// keeps its place for the core's next call.
Attempt still_queued(std::unique_ptr<QueuePlace> key) {
  auto a = Attempt::busy(milliseconds{1});
  a.place = std::move(key);
  return a;
}

}  // namespace

seconds lease_ttl(milliseconds ttl) {
  return std::max(seconds{1}, std::chrono::ceil<seconds>(ttl));
}

// One contender key of ours under its session's lease. Destroying it gives the key up (the
// waiter behind it is woken), unless it is gone already.
struct Driver::Contender final : QueuePlace {
  Contender(std::shared_ptr<Session> s, std::string k) : session(std::move(s)), key(std::move(k)) {}
  ~Contender() override {
    if (!gone) session->give_up(key, revision);
  }
  std::shared_ptr<Session> session;
  std::string key;
  std::int64_t revision = 0;  // the key's create revision: the fence once it is first
  bool gone = false;  // deleted already (released), or never put
};

// A granted key: the lock lasts while the key (and so its session's lease) does. Its
// renewals go through the driver's batch, alone or with the Client's other grants.
class Driver::Held final : public GrantHandle {
 public:
  Held(Driver& driver, std::unique_ptr<Contender> c) : driver_(driver), c_(std::move(c)) { key_.held = this; }

  Renewal renew(milliseconds ttl, int holds) override {
    return driver_.renew({RenewalBatch::Item{&key_, ttl, holds}}).front();
  }

  bool release() override {
    if (!c_) return false;
    // Deleting the key wakes the next waiter; only our key, with our create revision. A
    // transient error throws, and the core retries.
    bool ours = delete_key(c_->session->cluster(), c_->key, c_->revision);
    c_->gone = true;
    c_.reset();  // a lock's own lease goes too
    return ours;
  }

  // The holder was told it lost the lock; its key must not block the others any longer.
  void lost() noexcept override { c_.reset(); }

  Batched batched() noexcept override { return {&driver_, &key_}; }

  // What a batch item's key points to: the grant it renews.
  struct Key final : GrantKey {
    Held* held = nullptr;
  };
  static Held& of(const RenewalBatch::Item& item) { return *static_cast<const Key*>(item.key)->held; }
  Contender* contender() const noexcept { return c_.get(); }

 private:
  Driver& driver_;  // the core that owns the driver outlives every grant
  std::unique_ptr<Contender> c_;
  Key key_;
};

std::vector<Renewal> Driver::renew(const std::vector<Item>& items) {
  const auto sent = Clock::now();
  std::vector<Renewal> answers(items.size());
  std::vector<std::size_t> to_read;  // the items whose key is read again
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto* c = Held::of(items[i]).contender();
    if (!c) continue;  // released or lost: not ours
    // A hold given back: the key keeps no count (the Client lists its own), nothing to send.
    if (items[i].ttl.count() == 0) {
      answers[i] = Renewal{true, items[i].ttl};
      continue;
    }
    // A shared lease kept alive a moment ago (for another item, or another grant) needs no
    // second keep-alive. Expired: etcd deleted the key, the lock is gone.
    if (!c->session->fresh(items[i].ttl / 6)) continue;
    // The lease lives, but the key may not: deleted by an operator (`dblock release --force`,
    // etcdctl del). Still ours only with the same create revision.
    to_read.push_back(i);
  }
  // etcd refuses a Txn of more than --max-txn-ops operations (128 by default).
  constexpr std::size_t most = 128;
  for (std::size_t from = 0; from < to_read.size(); from += most) {
    const auto to = std::min(to_read.size(), from + most);
    pb::TxnRequest t;
    for (auto k = from; k < to; ++k) *t.add_success() = range_op(key_range(Held::of(items[to_read[k]]).contender()->key));
    auto resp = cluster_->txn(t);
    for (auto k = from; k < to; ++k) {
      const auto& kvs = resp.responses(static_cast<int>(k - from)).response_range();
      auto* c = Held::of(items[to_read[k]]).contender();
      if (kvs.kvs_size() == 0 || kvs.kvs(0).create_revision() != c->revision) continue;
      answers[to_read[k]] = Renewal{true, std::chrono::duration_cast<milliseconds>(c->session->expiry() - sent)};
    }
  }
  return answers;
}

std::shared_ptr<Session> Driver::session(milliseconds ttl, bool renewed) {
  if (!renewed) return std::make_shared<Session>(cluster_, lease_ttl(ttl), false);
  std::lock_guard lk(sessions_mutex_);
  auto& s = sessions_[lease_ttl(ttl)];
  // Kept alive within the last third of its TTL, so that a grant under it lives at least
  // two thirds of its TTL: its first renewal comes after a third.
  if (!s || !s->fresh(milliseconds(lease_ttl(ttl)) / 3)) s = std::make_shared<Session>(cluster_, lease_ttl(ttl), true);
  return s;
}

std::unique_ptr<Driver::Contender> Driver::enter(const std::string& key,
                                                 const std::string& owner, std::shared_ptr<Session> s,
                                                 const pb::RangeRequest& look, pb::TxnResponse* seen) {
  s->claim(key);
  for (int leftovers = 0;; ++leftovers) {
    auto c = std::make_unique<Contender>(s, key);
    // concurrency.Mutex's transaction: put our key unless it exists, and read the name's keys
    // in the same round trip. Should the answer not come back, c gives the key up.
    pb::TxnRequest t;
    auto* cmp = t.add_compare();
    cmp->set_key(c->key);
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_create_revision(0);
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(c->key);
    put->set_value(owner);
    put->set_lease(s->id());
    *t.add_success() = range_op(look);
    *t.add_failure() = range_op(key_range(c->key));
    if (!cluster_->txn_under_lease(t, seen)) {  // the lease expired: nothing was put
      s->mark_gone();
      return nullptr;
    }
    if (!seen->succeeded()) {
      // A key of ours is there already: a leftover of an earlier acquire of this Client (its
      // answer lost, its release failed). Handing it back would reuse its fence; delete it
      // and put a new one.
      c->gone = true;  // nothing of this attempt's to give up
      if (leftovers >= 2) throw InternalError("etcd: our lock key " + c->key + " keeps coming back");
      const auto& mine = seen->responses(0).response_range();
      if (mine.kvs_size() > 0) delete_key(*cluster_, c->key, mine.kvs(0).create_revision());
      continue;
    }
    c->revision = seen->header().revision();
    return c;
  }
}

Attempt Driver::try_acquire(AcquireRequest& r) {
  if (r.mode == Mode::shared || r.permits > 1) return try_acquire_shaped(r);
  const std::string prefix = lock_prefix(root_, r.name);
  const auto entered = Clock::now();
  const auto until = entered + std::max(r.wait, milliseconds{0});
  // The name's first key is its holders' shape: a semaphore's, and we are not one. A
  // semaphore's contender further up (one that will find out itself) is waited for like any.
  auto check = [&](const mvccpb::KeyValue& head) {
    auto shape = key_shape(head.key());
    if (shape.kind == KeyShape::permit) mismatch(r.name, shape, KeyShape{});
  };

  // Our key holds the lock: the grant. The core counts the lease from when it called us; it
  // lasts at least until expiry().
  auto granted = [&](std::unique_ptr<Contender> held) {
    auto fence = static_cast<std::uint64_t>(held->revision);
    auto left = std::chrono::duration_cast<milliseconds>(held->session->expiry() - entered);
    return Attempt{std::make_unique<Held>(*this, std::move(held)), fence, left, nullptr};
  };

  // Our key from the previous attempt of this acquire (this driver's own QueuePlace).
  std::unique_ptr<Contender> c(static_cast<Contender*>(r.place.release()));
  for (int reentered = 0;;) {
    if (!c) {
      auto s = session(r.ttl, r.renewed);
      pb::TxnResponse resp;
      c = enter(s->key(prefix), r.owner, s, by_creation(prefix, pb::RangeRequest::ASCEND), &resp);
      if (!c) {  // the shared lease expired just now: the next session() grants a new one
        if (++reentered > 3)
          throw UnavailableError("etcd: " + cluster_->endpoints() + ": our lease under " + prefix + " keeps expiring");
        continue;
      }
      const auto& head = resp.responses(1).response_range();
      if (head.kvs_size() == 0 || head.kvs(0).create_revision() == c->revision) return granted(std::move(c));
      check(head.kvs(0));
      if (r.wait.count() <= 0) return Attempt::busy(milliseconds{0});  // a try-lock: our key goes at once
    }
    // Is our key still there, and which key was created just before it?
    pb::TxnResponse seen;
    const auto looked = look(*c, by_creation(prefix, pb::RangeRequest::DESCEND, c->revision), until, &seen);
    if (looked == Look::again) continue;
    if (looked == Look::later) return still_queued(std::move(c));
    if (looked == Look::expired) {  // our lease expired while we waited: queue again
      c.reset();
      if (++reentered > 3)
        throw UnavailableError("etcd: " + cluster_->endpoints() + ": our lease under " + prefix + " keeps expiring");
      continue;
    }
    const auto& mine = seen.responses(0).response_range();
    if (mine.kvs_size() == 0 || mine.kvs(0).create_revision() != c->revision) {
      // Deleted by an operator: queue again (a few times; something that keeps deleting it is
      // not a wait).
      c.reset();
      if (++reentered > 3) throw UnavailableError("etcd: our lock key under " + prefix + " keeps disappearing");
      continue;
    }
    const auto& before = seen.responses(1).response_range();
    if (before.kvs_size() == 0) return granted(std::move(c));  // every key made before ours is gone
    if (key_shape(before.kvs(0).key()).kind == KeyShape::permit) {  // rare: is the name a semaphore?
      auto head = cluster_->range(by_creation(prefix, pb::RangeRequest::ASCEND));
      if (head.kvs_size() > 0) check(head.kvs(0));
    }
    if (r.wait.count() <= 0) return Attempt::busy(milliseconds{0});
    if (Clock::now() >= until || r.cancelled()) return still_queued(std::move(c));
    // Watch only the predecessor's deletion; one since the revision we looked at is reported at
    // once (Cluster::wait_deleted). Woken at least when our lease needs its next keep-alive.
    auto wake = std::min(until, c->session->refresh_due_at());
    cluster_->wait_deleted(before.kvs(0).key(), before.kvs(0).create_revision(), seen.header().revision() + 1, wake,
                           r.cancel);
  }
}

// A waiter's keep-alive or look that fails on a transient error (the server restarting, the
// connection being made again) is tried again while the wait lasts and the waiter's lease may
// still be alive: its key keeps its place in the queue through an outage shorter than the
// lease's TTL, as a holder keeps its lock. Each try waits for the reconnection itself.
Driver::Look Driver::look(Contender& c, const pb::RangeRequest& before, Clock::time_point until,
                          pb::TxnResponse* seen) {
  constexpr milliseconds pause{200};
  try {
    // A waiter keeps its lease alive (a shared one, for the Client's other locks too).
    if (c.session->refresh_due() && !c.session->refresh()) return Look::expired;
    pb::TxnRequest t;  // both at one revision
    *t.add_success() = range_op(key_range(c.key));
    *t.add_success() = range_op(before);
    *seen = cluster_->txn(t);
    return Look::seen;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::unavailable && e.kind() != ErrorKind::timeout) throw;
    if (Clock::now() + pause >= c.session->expiry()) throw;
    // An outage that outlasts the core's slice of the wait is not the end of the wait: the
    // core calls again while the caller's deadline allows (an outage that outlasts that ends
    // the acquire as busy, as any wait that runs out).
    if (Clock::now() + pause >= until) return Look::later;
    std::this_thread::sleep_for(pause);
    return Look::again;
  }
}

bool Driver::announce(Contender& c, const std::string& owner) {
  // The same key, value and lease written again: a put event for the watcher behind us, and
  // only while the key is still ours.
  pb::TxnRequest t;
  auto* cmp = t.add_compare();
  cmp->set_key(c.key);
  cmp->set_target(pb::Compare::CREATE);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_create_revision(c.revision);
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(c.key);
  put->set_value(owner);
  put->set_lease(c.session->id());
  pb::TxnResponse resp;
  if (!cluster_->txn_under_lease(t, &resp)) {
    c.session->mark_gone();
    return false;
  }
  return resp.succeeded();
}

Attempt Driver::try_acquire_shaped(AcquireRequest& r) {
  const std::string prefix = lock_prefix(root_, r.name);
  const auto entered = Clock::now();
  const auto until = entered + std::max(r.wait, milliseconds{0});
  const KeyShape asked = r.mode == Mode::shared ? KeyShape{KeyShape::reader, 0} : KeyShape{KeyShape::permit, r.permits};

  auto granted = [&](std::unique_ptr<Contender> held) {
    auto fence = static_cast<std::uint64_t>(held->revision);
    auto left = std::chrono::duration_cast<milliseconds>(held->session->expiry() - entered);
    return Attempt{std::make_unique<Held>(*this, std::move(held)), fence, left, nullptr};
  };

  std::unique_ptr<Contender> c(static_cast<Contender*>(r.place.release()));
  bool waited = c != nullptr;  // a semaphore contender that waited announces its grant
  for (int reentered = 0;;) {
    // The keys below ours, oldest first, read at one revision with (or after) ours.
    std::vector<const mvccpb::KeyValue*> below;
    pb::TxnResponse seen;
    if (!c) {
      auto s = session(r.ttl, r.renewed);
      // Read in the same Txn as the put: every key there is below ours, or ours.
      c = enter(s->shaped_key(prefix, asked), r.owner, s, all_before(prefix, 0), &seen);
      if (!c) {
        if (++reentered > 3)
          throw UnavailableError("etcd: " + cluster_->endpoints() + ": our lease under " + prefix + " keeps expiring");
        continue;
      }
      for (const auto& kv : seen.responses(1).response_range().kvs())
        if (kv.create_revision() < c->revision) below.push_back(&kv);
    } else {
      const auto looked = look(*c, all_before(prefix, c->revision), until, &seen);
      if (looked == Look::again) continue;
      if (looked == Look::later) return still_queued(std::move(c));
      if (looked == Look::expired) {
        c.reset();
        if (++reentered > 3)
          throw UnavailableError("etcd: " + cluster_->endpoints() + ": our lease under " + prefix + " keeps expiring");
        continue;
      }
      const auto& mine = seen.responses(0).response_range();
      if (mine.kvs_size() == 0 || mine.kvs(0).create_revision() != c->revision) {
        c.reset();  // deleted by an operator: queue again, a few times
        if (++reentered > 3) throw UnavailableError("etcd: our lock key under " + prefix + " keeps disappearing");
        continue;
      }
      for (const auto& kv : seen.responses(1).response_range().kvs()) below.push_back(&kv);
    }
    const std::int64_t at = seen.header().revision();

    // What we wait for, if anything: a key's deletion (puts too: its put), or any deletion
    // under the prefix.
    std::string watch_key, watch_end;
    std::int64_t watch_created = 0;  // the watched key's create revision (wait_deleted)
    bool puts = false;
    std::function<bool()> missed;
    // The name's first key is the shape its holders have: another one is an error. A key of
    // another shape further up is a contender that finds out itself (or etcdctl's, which
    // waits): it is waited for like any other.
    if (!below.empty()) {
      auto head = key_shape(below.front()->key());
      if (asked.kind == KeyShape::reader ? head.kind == KeyShape::permit : !(head == asked))
        mismatch(r.name, head, asked);
    }
    if (asked.kind == KeyShape::reader) {
      // Readers hold beside readers; any other key below (a writer: dblock's exclusive one,
      // etcdctl's, or one we cannot read) excludes us, and we wait for the nearest one.
      const mvccpb::KeyValue* writer = nullptr;
      for (const auto* kv : below)
        if (key_shape(kv->key()).kind != KeyShape::reader) writer = kv;
      if (!writer) return granted(std::move(c));
      watch_key = writer->key();
      watch_created = writer->create_revision();
    } else {
      // The first N keys hold. Keys are only ever added above every existing one, so the keys
      // below ours only go: once fewer than N, they stay so, and at any revision only the
      // first N keys can have seen that.
      const std::size_t n = below.size();
      if (n < r.permits) {
        if (waited && !announce(*c, r.owner)) {  // our key went meanwhile (or its lease): queue again
          c->gone = true;
          c.reset();
          if (++reentered > 3) throw UnavailableError("etcd: our lock key under " + prefix + " keeps disappearing");
          continue;
        }
        return granted(std::move(c));
      }
      if (n == r.permits) {
        // The first waiter: any of the N holders' deletions lets it in, so it watches the
        // name's deletions (it alone: the waiters behind it watch the key before their own).
        watch_key = prefix;
        watch_end = prefix_end(prefix);
        const std::int64_t rev = c->revision;
        missed = [this, prefix, rev, n] { return cluster_->count(all_before(prefix, rev)) < n; };
      } else {
        // Behind another waiter: we can hold only after it does, and it announces that with a
        // put of its key (or goes, deleted).
        watch_key = below.back()->key();
        puts = true;
        missed = [this, watch_key, at] {
          auto got = cluster_->range(key_range(watch_key));
          return got.kvs_size() == 0 || got.kvs(0).mod_revision() > at;
        };
      }
    }
    if (r.wait.count() <= 0) return Attempt::busy(milliseconds{0});  // a try-lock: our key goes at once
    if (Clock::now() >= until || r.cancelled()) return still_queued(std::move(c));
    waited = true;
    auto wake = std::min(until, c->session->refresh_due_at());
    if (!missed) cluster_->wait_deleted(watch_key, watch_created, at + 1, wake, r.cancel);
    else cluster_->wait_event(watch_key, watch_end, puts, at + 1, wake, r.cancel, missed);
  }
}

}  // namespace dblock::detail::etcd
