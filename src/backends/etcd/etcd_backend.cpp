// etcd://host:port[,host:port...]/prefix: the Backend around the etcd strategy.
#include "backends/etcd/etcd_backend.hpp"

#include <map>

#include "backends/etcd/etcd_driver.hpp"
#include "backends/etcd/etcd_keys.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail {

namespace {

using etcd::Cluster;
namespace pb = etcd::pb;

class EtcdBackend : public Backend {
 public:
  EtcdBackend(std::shared_ptr<Cluster> cluster, std::string root) : cluster_(std::move(cluster)), root_(std::move(root)) {}

  std::string_view name() const noexcept override { return "etcd"; }
  std::vector<Strategy> strategies() const override { return {Strategy::etcd}; }

  std::unique_ptr<LockDriver> make_driver(Strategy strategy) override {
    if (strategy != Strategy::etcd)
      throw UsageError("the etcd backend offers the etcd strategy only, not " + std::string(to_string(strategy)));
    return std::make_unique<etcd::Driver>(cluster_, root_);
  }

  void check_name(const std::string& name) const override { etcd::check_name(name); }

  // Nothing to apply: etcd has no schema, and keys need no parent.
  std::vector<std::string> migrate() override { return {}; }

  // etcd deletes a dead holder's key itself, when its lease expires.
  std::size_t sweep(std::size_t) override { return 0; }

  std::vector<LeaseInfo> list() override {
    pb::RangeRequest all;
    all.set_key(root_ + "/");
    all.set_range_end(etcd::prefix_end(root_ + "/"));
    auto resp = cluster_->range(all);
    // Per name, the key with the lowest create revision holds it.
    std::map<std::string, const mvccpb::KeyValue*> holders;
    for (const auto& kv : resp.kvs()) {
      auto name = etcd::lock_name_of(root_, kv.key());
      if (!name) continue;
      auto& h = holders[*name];
      if (!h || kv.create_revision() < h->create_revision()) h = &kv;
    }
    std::vector<LeaseInfo> out;
    for (const auto& [name, kv] : holders) {
      LeaseInfo info;
      info.name = name;
      info.owner = kv->value();  // empty for an etcdctl holder, which puts no value
      info.fence = static_cast<std::uint64_t>(kv->create_revision());
      info.holds = 1;  // held in the holder's process: a Client lists its own grants' counts
      // etcd keeps no time on keys: both times are when the holder's lease runs out if it
      // stops renewing (its time left, from now on this machine's clock).
      auto left = kv->lease() ? cluster_->time_to_live(kv->lease()) : std::chrono::seconds{0};
      info.acquired_at = info.expires_at = std::chrono::system_clock::now() + left;
      out.push_back(std::move(info));
    }
    return out;
  }

  // Deletes the holder's key; its owner learns at its next renewal that it lost the lock.
  bool force_release(const std::string& name) override {
    auto prefix = etcd::lock_prefix(root_, name);
    for (int tries = 0; tries < 3; ++tries) {
      pb::RangeRequest first;
      first.set_key(prefix);
      first.set_range_end(etcd::prefix_end(prefix));
      first.set_sort_target(pb::RangeRequest::CREATE);
      first.set_sort_order(pb::RangeRequest::ASCEND);
      first.set_limit(1);
      auto resp = cluster_->range(first);
      if (resp.kvs_size() == 0) return false;
      const auto& kv = resp.kvs(0);
      pb::TxnRequest t;  // that key, not one made again under the same name meanwhile
      auto* cmp = t.add_compare();
      cmp->set_key(kv.key());
      cmp->set_target(pb::Compare::CREATE);
      cmp->set_result(pb::Compare::EQUAL);
      cmp->set_create_revision(kv.create_revision());
      t.add_success()->mutable_request_delete_range()->set_key(kv.key());
      if (cluster_->txn(t).succeeded()) return true;
      // else it just went: look again
    }
    return false;
  }

  // etcd syncs every write to its log before it answers (3.4 has no switch to turn that off),
  // so what can still bring a fence back is not a setting: restoring an older snapshot
  // restores its revisions, and the keys created after it are made again with the same
  // create revisions (docs/ARCHITECTURE.md, "etcd"). Named, as it cannot be read.
  std::vector<SettingCheck> check_settings() override {
    return {{"snapshot-restore", "", Verdict::unknown,
             "not readable over the client API: after restoring an older snapshot, revisions (fences) already handed "
             "out are handed out again; move every fenced resource past the restored revision first"}};
  }

 private:
  std::shared_ptr<Cluster> cluster_;
  const std::string root_;
};

}  // namespace

std::unique_ptr<Backend> open_etcd(const Url& url, const ClientOptions& options) {
  auto root = etcd::key_root(url.path);
  if (url.hosts.empty()) throw UsageError("bad etcd URL: no endpoint (etcd://host:port/prefix)");
  if (!url.user.empty() || !url.password.empty())
    throw UsageError("bad etcd URL: etcd authentication is not supported yet (no user or password in the URL)");
  std::vector<etcd::Endpoint> endpoints;
  for (const auto& h : url.hosts) {
    if (h.port == 0) throw UsageError("bad etcd URL: endpoint " + h.host + " has no port (etcd://host:2379/prefix)");
    endpoints.push_back({h.host, h.port});
  }
  // An unreachable cluster fails here, within connect_timeout.
  auto cluster = std::make_shared<Cluster>(endpoints, options.connect_timeout, options.statement_timeout);
  return std::make_unique<EtcdBackend>(std::move(cluster), std::move(root));
}

}  // namespace dblock::detail
