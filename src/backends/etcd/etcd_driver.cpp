#include "backends/etcd/etcd_driver.hpp"

#include <algorithm>
#include <random>

#include "backends/etcd/etcd_keys.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::etcd {

namespace {

// A lease id of our own choosing: positive, never 0 (which asks the server to choose).
std::int64_t random_lease_id() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::int64_t id;
  do id = static_cast<std::int64_t>(rng() >> 1);
  while (id == 0);
  return id;
}

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
  if (before > 0) r.set_max_create_revision(before - 1);
  return r;
}

}  // namespace

seconds lease_ttl(milliseconds ttl) {
  return std::max(seconds{1}, std::chrono::ceil<seconds>(ttl));
}

// One contender key of ours and the lease it lives under. Revoking the lease deletes the key,
// so the destructor gives the place up (the key goes, and the waiter behind it is woken), unless
// the lease is already known to be gone.
struct Driver::Contender final : QueuePlace {
  Contender(std::shared_ptr<Cluster> c, std::int64_t id) : cluster(std::move(c)), lease(id) {}
  ~Contender() override {
    if (!gone) cluster->revoke_quietly(lease);
  }
  // Keeps the lease alive: false when it is gone (expired or revoked), and the key with it.
  bool refresh() {
    auto sent = Clock::now();
    auto left = cluster->keep_alive(lease);
    if (left.count() <= 0) {
      gone = true;
      return false;
    }
    ttl = left;
    refreshed = sent;
    return true;
  }
  bool refresh_due() const { return Clock::now() >= refreshed + ttl / 3; }
  // The lease lives at least until then: its TTL counts from when the server saw the request
  // that granted or refreshed it, which was after we sent it.
  Clock::time_point expiry() const { return refreshed + ttl; }

  std::shared_ptr<Cluster> cluster;
  std::int64_t lease;
  std::string key;
  std::int64_t revision = 0;  // the key's create revision: the fence once it is first
  seconds ttl{0};             // as the server granted it
  Clock::time_point refreshed;
  bool gone = false;
};

// A granted key: the lock lasts while the key (and so its lease) does.
class Driver::Held final : public GrantHandle {
 public:
  explicit Held(std::unique_ptr<Contender> c) : c_(std::move(c)) {}

  Renewal renew(milliseconds ttl, int) override {
    if (!c_) return Renewal{};
    // A hold given back: the key keeps no count (the Client lists its own), nothing to send.
    if (ttl.count() == 0) return Renewal{true, ttl};
    if (!c_->refresh()) return Renewal{};  // expired: etcd deleted the key, the lock is gone
    // The lease lives, but the key may not: deleted by an operator (`dblock release --force`,
    // etcdctl del). Still ours only with the same create revision.
    auto r = c_->cluster->range(key_range(c_->key));
    if (r.kvs_size() == 0 || r.kvs(0).create_revision() != c_->revision) return Renewal{};
    return Renewal{true, c_->ttl};
  }

  bool release() override {
    if (!c_) return false;
    // Deleting the key wakes the next waiter; only our key, with our create revision.
    pb::TxnRequest t;
    auto* cmp = t.add_compare();
    cmp->set_key(c_->key);
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_create_revision(c_->revision);
    t.add_success()->mutable_request_delete_range()->set_key(c_->key);
    bool ours = c_->cluster->txn(t).succeeded();  // a transient error throws, and the core retries
    c_.reset();                                   // the lease goes too
    return ours;
  }

  // The holder was told it lost the lock; its key must not block the others any longer.
  void lost() noexcept override { c_.reset(); }

 private:
  std::unique_ptr<Contender> c_;
};

std::unique_ptr<Driver::Contender> Driver::enter(const std::string& prefix, const std::string& owner,
                                                 milliseconds ttl, bool* first) {
  auto c = std::make_unique<Contender>(cluster_, random_lease_id());
  c->refreshed = Clock::now();
  try {
    c->ttl = cluster_->grant(c->lease, lease_ttl(ttl));
  } catch (...) {
    c->gone = true;  // never granted, or granted without its answer: a lease with no key expires alone
    throw;
  }
  c->key = prefix + lease_hex(c->lease);
  // concurrency.Mutex's transaction: put our key unless it exists (a repeated attempt), and
  // read the name's first key in the same round trip. A failure leaves c to revoke the lease.
  pb::TxnRequest t;
  auto* cmp = t.add_compare();
  cmp->set_key(c->key);
  cmp->set_target(pb::Compare::CREATE);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_create_revision(0);
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(c->key);
  put->set_value(owner);
  put->set_lease(c->lease);
  *t.add_success() = range_op(by_creation(prefix, pb::RangeRequest::ASCEND));
  *t.add_failure() = range_op(key_range(c->key));
  *t.add_failure() = range_op(by_creation(prefix, pb::RangeRequest::ASCEND));
  auto resp = cluster_->txn(t);
  if (resp.succeeded()) {
    c->revision = resp.header().revision();
  } else {
    const auto& mine = resp.responses(0).response_range();
    if (mine.kvs_size() == 0) throw InternalError("etcd: our lock key " + c->key + " vanished as it was made");
    c->revision = mine.kvs(0).create_revision();
  }
  const auto& head = resp.responses(1).response_range();
  *first = head.kvs_size() == 0 || head.kvs(0).create_revision() == c->revision;
  return c;
}

Attempt Driver::try_acquire(AcquireRequest& r) {
  const std::string prefix = lock_prefix(root_, r.name);
  const auto entered = Clock::now();
  const auto until = entered + std::max(r.wait, milliseconds{0});

  // Our key holds the lock: the grant. The core counts the lease from when it called us; it
  // lasts at least until expiry().
  auto granted = [&](std::unique_ptr<Contender> held) {
    auto fence = static_cast<std::uint64_t>(held->revision);
    auto left = std::chrono::duration_cast<milliseconds>(held->expiry() - entered);
    return Attempt{std::make_unique<Held>(std::move(held)), fence, left, nullptr};
  };

  // Our key from the previous attempt of this acquire (this driver's own QueuePlace).
  std::unique_ptr<Contender> c(static_cast<Contender*>(r.place.release()));
  for (int reentered = 0;;) {
    if (!c) {
      bool first = false;
      c = enter(prefix, r.owner, r.ttl, &first);
      if (first) return granted(std::move(c));
      if (r.wait.count() <= 0) return Attempt::busy(milliseconds{0});  // a try-lock: our key goes at once
    }
    if (c->refresh_due() && !c->refresh()) {  // our lease expired while we waited: queue again
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
      // not a wait). The lease may still live: the Contender revokes it.
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
    auto wake = std::min(until, c->refreshed + c->ttl / 3);
    cluster_->wait_deleted(before.kvs(0).key(), seen.header().revision() + 1, wake);
  }
}

}  // namespace dblock::detail::etcd
