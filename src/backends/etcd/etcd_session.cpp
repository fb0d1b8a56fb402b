#include "backends/etcd/etcd_session.hpp"

#include <algorithm>

#include "backends/etcd/etcd_keys.hpp"
#include "core/owner.hpp"

namespace dblock::detail::etcd {

namespace {

// A lease id of our own choosing: positive, never 0 (which asks the server to choose).
std::int64_t random_lease_id() {
  std::int64_t id;
  do id = static_cast<std::int64_t>(random64() >> 1);
  while (id == 0);
  return id;
}

}  // namespace

Session::Session(std::shared_ptr<Cluster> cluster, seconds ttl, bool shared)
    : cluster_(std::move(cluster)), id_(random_lease_id()), shared_(shared) {
  refreshed_ = Clock::now();
  ttl_ = cluster_->grant(id_, ttl);
}

Session::~Session() {
  if (!gone_) cluster_->revoke_quietly(id_);  // deletes whatever key is still under it
}

std::string Session::key(const std::string& prefix) const { return prefix + lease_hex(id_); }

std::string Session::shaped_key(const std::string& prefix, KeyShape shape) const {
  return prefix + shaped_suffix(id_, shape, random64());
}

bool Session::refresh() {
  std::lock_guard lk(mutex_);
  if (gone_) return false;
  while (!unwanted_.empty()) {  // a failure throws, and nothing keeps the lease alive
    delete_key(*cluster_, unwanted_.back().key, unwanted_.back().revision);
    unwanted_.pop_back();
  }
  auto sent = Clock::now();
  auto left = cluster_->keep_alive(id_);
  if (left.count() <= 0) {
    gone_ = true;
    return false;
  }
  ttl_ = left;
  refreshed_ = sent;
  return true;
}

bool Session::fresh(Clock::duration max_age) {
  {
    std::lock_guard lk(mutex_);
    if (gone_) return false;
    if (Clock::now() < refreshed_ + max_age && unwanted_.empty()) return true;
  }
  return refresh();
}

bool Session::refresh_due() const { return Clock::now() >= refresh_due_at(); }

Clock::time_point Session::refresh_due_at() const {
  std::lock_guard lk(mutex_);
  return refreshed_ + milliseconds(ttl_) / 3;  // in ms: a 1 s TTL's third is not 0
}

Clock::time_point Session::expiry() const {
  std::lock_guard lk(mutex_);
  return refreshed_ + ttl_;
}

bool Session::gone() const {
  std::lock_guard lk(mutex_);
  return gone_;
}

void Session::mark_gone() {
  std::lock_guard lk(mutex_);
  gone_ = true;
}

void Session::give_up(const std::string& key, std::int64_t revision) noexcept {
  std::lock_guard lk(mutex_);
  if (gone_) return;  // the key went with the lease
  if (!shared_) {     // the lock's own lease: revoking it deletes the key
    cluster_->revoke_quietly(id_);
    gone_ = true;
    return;
  }
  try {
    delete_key(*cluster_, key, revision);
  } catch (...) {
    try {
      unwanted_.push_back({key, revision});
    } catch (...) {  // out of memory: nothing left but to stop keeping the lease alive
      gone_ = true;
    }
  }
}

void Session::claim(const std::string& key) {
  std::lock_guard lk(mutex_);
  unwanted_.erase(std::remove_if(unwanted_.begin(), unwanted_.end(), [&](const Unwanted& u) { return u.key == key; }),
                  unwanted_.end());
}

bool delete_key(Cluster& cluster, const std::string& key, std::int64_t revision) {
  pb::TxnRequest t;
  if (revision > 0) {  // only that key, not a later one of the same name
    auto* cmp = t.add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::CREATE);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_create_revision(revision);
  }
  t.add_success()->mutable_request_delete_range()->set_key(key);
  return cluster.txn(t).succeeded();
}

}  // namespace dblock::detail::etcd
