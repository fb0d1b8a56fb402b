#include "backends/etcd/etcd_driver.hpp"

#include <algorithm>

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

// A granted key: the lock lasts while the key (and so its session's lease) does.
class Driver::Held final : public GrantHandle {
 public:
  explicit Held(std::unique_ptr<Contender> c) : c_(std::move(c)) {}

  Renewal renew(milliseconds ttl, int) override {
    if (!c_) return Renewal{};
    // A hold given back: the key keeps no count (the Client lists its own), nothing to send.
    if (ttl.count() == 0) return Renewal{true, ttl};
    auto sent = Clock::now();
    // A shared lease another grant kept alive a moment ago needs no second keep-alive.
    if (!c_->session->fresh(ttl / 6)) return Renewal{};  // expired: etcd deleted the key, the lock is gone
    // The lease lives, but the key may not: deleted by an operator (`dblock release --force`,
    // etcdctl del). Still ours only with the same create revision.
    auto r = c_->session->cluster().range(key_range(c_->key));
    if (r.kvs_size() == 0 || r.kvs(0).create_revision() != c_->revision) return Renewal{};
    return Renewal{true, std::chrono::duration_cast<milliseconds>(c_->session->expiry() - sent)};
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

 private:
  std::unique_ptr<Contender> c_;
};

std::shared_ptr<Session> Driver::session(milliseconds ttl, bool renewed) {
  if (!renewed) return std::make_shared<Session>(cluster_, lease_ttl(ttl), false);
  std::lock_guard lk(sessions_mutex_);
  auto& s = sessions_[lease_ttl(ttl)];
  // Kept alive within the last third of its TTL, so that a grant under it lives at least
  // two thirds of its TTL: its first renewal comes after a third.
  if (!s || !s->fresh(milliseconds(lease_ttl(ttl)) / 3)) s = std::make_shared<Session>(cluster_, lease_ttl(ttl), true);
  return s;
}

std::unique_ptr<Driver::Contender> Driver::enter(const std::string& prefix, const std::string& owner,
                                                 std::shared_ptr<Session> s, bool* first) {
  s->claim(s->key(prefix));
  for (int leftovers = 0;; ++leftovers) {
    auto c = std::make_unique<Contender>(s, s->key(prefix));
    // concurrency.Mutex's transaction: put our key unless it exists, and read the name's first
    // key in the same round trip. Should the answer not come back, c gives the key up.
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
    *t.add_success() = range_op(by_creation(prefix, pb::RangeRequest::ASCEND));
    *t.add_failure() = range_op(key_range(c->key));
    pb::TxnResponse resp;
    if (!cluster_->txn_under_lease(t, &resp)) {  // the lease expired: nothing was put
      s->mark_gone();
      return nullptr;
    }
    if (!resp.succeeded()) {
      // A key of ours is there already: a leftover of an earlier acquire of this Client (its
      // answer lost, its release failed). Handing it back would reuse its fence; delete it
      // and put a new one.
      c->gone = true;  // nothing of this attempt's to give up
      if (leftovers >= 2) throw InternalError("etcd: our lock key " + c->key + " keeps coming back");
      const auto& mine = resp.responses(0).response_range();
      if (mine.kvs_size() > 0) delete_key(*cluster_, c->key, mine.kvs(0).create_revision());
      continue;
    }
    c->revision = resp.header().revision();
    const auto& head = resp.responses(1).response_range();
    *first = head.kvs_size() == 0 || head.kvs(0).create_revision() == c->revision;
    return c;
  }
}

Attempt Driver::try_acquire(AcquireRequest& r) {
  const std::string prefix = lock_prefix(root_, r.name);
  const auto entered = Clock::now();
  const auto until = entered + std::max(r.wait, milliseconds{0});

  // Our key holds the lock: the grant. The core counts the lease from when it called us; it
  // lasts at least until expiry().
  auto granted = [&](std::unique_ptr<Contender> held) {
    auto fence = static_cast<std::uint64_t>(held->revision);
    auto left = std::chrono::duration_cast<milliseconds>(held->session->expiry() - entered);
    return Attempt{std::make_unique<Held>(std::move(held)), fence, left, nullptr};
  };

  // Our key from the previous attempt of this acquire (this driver's own QueuePlace).
  std::unique_ptr<Contender> c(static_cast<Contender*>(r.place.release()));
  for (int reentered = 0;;) {
    if (!c) {
      bool first = false;
      c = enter(prefix, r.owner, session(r.ttl, r.renewed), &first);
      if (!c) {  // the shared lease expired just now: the next session() grants a new one
        if (++reentered > 3)
          throw UnavailableError("etcd: " + cluster_->endpoints() + ": our lease under " + prefix + " keeps expiring");
        continue;
      }
      if (first) return granted(std::move(c));
      if (r.wait.count() <= 0) return Attempt::busy(milliseconds{0});  // a try-lock: our key goes at once
    }
    // A waiter keeps its lease alive (a shared one, for the Client's other locks too).
    if (c->session->refresh_due() && !c->session->refresh()) {  // it expired while we waited: queue again
      c.reset();
      if (++reentered > 3)
        throw UnavailableError("etcd: " + cluster_->endpoints() + ": our lease under " + prefix + " keeps expiring");
      continue;
    }
    // Is our key still there, and which key was created just before it? Both at one revision.
    pb::TxnRequest look;
    *look.add_success() = range_op(key_range(c->key));
    *look.add_success() = range_op(by_creation(prefix, pb::RangeRequest::DESCEND, c->revision));
    auto seen = cluster_->txn(look);
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
    if (r.wait.count() <= 0) return Attempt::busy(milliseconds{0});
    if (Clock::now() >= until) {  // the key stays queued for the core's next call
      auto a = Attempt::busy(milliseconds{1});
      a.place = std::move(c);
      return a;
    }
    // Watch only the predecessor's deletion; one since the revision we looked at is reported at
    // once (Cluster::wait_deleted). Woken at least when our lease needs its next keep-alive.
    auto wake = std::min(until, c->session->refresh_due_at());
    cluster_->wait_deleted(before.kvs(0).key(), seen.header().revision() + 1, wake);
  }
}

}  // namespace dblock::detail::etcd
