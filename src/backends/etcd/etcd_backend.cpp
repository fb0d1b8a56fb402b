// etcd[s]://[user:password@]host:port[,host:port...]/prefix[?ssl-ca=&ssl-cert=&ssl-key=]: the
// Backend around the etcd strategy.
#include "backends/etcd/etcd_backend.hpp"

#include <map>

#include "backends/etcd/etcd_driver.hpp"
#include "backends/etcd/etcd_keys.hpp"
#include "core/pem_file.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail {

namespace {

using etcd::Cluster;
namespace pb = etcd::pb;

class EtcdBackend : public Backend {
 public:
  EtcdBackend(std::shared_ptr<Cluster> cluster, std::string root, bool tls)
      : cluster_(std::move(cluster)), root_(std::move(root)), tls_(tls) {}

  std::string_view name() const noexcept override { return "etcd"; }
  std::vector<Strategy> strategies() const override { return {Strategy::etcd}; }
  // Readers' and semaphore contenders' keys beside the writers' under the name's prefix
  // (docs/ARCHITECTURE.md, "Lock shapes").
  Shapes shapes(Strategy) const override { return Shapes{true, true}; }

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
    all.set_sort_target(pb::RangeRequest::CREATE);
    all.set_sort_order(pb::RangeRequest::ASCEND);
    auto resp = cluster_->range(all);
    // Per name, its contenders in creation order; the first ones hold it (etcd::holder_count).
    std::map<std::string, std::vector<std::pair<const mvccpb::KeyValue*, etcd::KeyShape>>> names;
    for (const auto& kv : resp.kvs())
      if (auto parsed = etcd::parse_lock_key(root_, kv.key())) names[parsed->first].emplace_back(&kv, parsed->second);
    std::vector<LeaseInfo> out;
    for (const auto& [name, keys] : names) {
      std::vector<etcd::KeyShape> shapes;
      for (const auto& k : keys) shapes.push_back(k.second);
      for (auto i : etcd::holders(shapes)) {
        const auto* kv = keys[i].first;
        LeaseInfo info;
        info.name = name;
        info.owner = kv->value();  // empty for an etcdctl holder, which puts no value
        info.fence = static_cast<std::uint64_t>(kv->create_revision());
        info.holds = 1;  // held in the holder's process: a Client lists its own grants' counts
        info.mode = keys[i].second.kind == etcd::KeyShape::reader ? Mode::shared : Mode::exclusive;
        // etcd keeps no time on keys: both times are when the holder's lease runs out if it
        // stops renewing (its time left, from now on this machine's clock).
        auto left = kv->lease() ? cluster_->time_to_live(kv->lease()) : std::chrono::seconds{0};
        info.acquired_at = info.expires_at = std::chrono::system_clock::now() + left;
        out.push_back(std::move(info));
      }
    }
    return out;
  }

  // Deletes the holders' keys (the writer's, every reader's that holds, or a semaphore's
  // holders'); their owners learn at their next renewal that they lost the lock.
  bool force_release(const std::string& name) override {
    auto prefix = etcd::lock_prefix(root_, name);
    for (int tries = 0; tries < 3; ++tries) {
      pb::RangeRequest keys;
      keys.set_key(prefix);
      keys.set_range_end(etcd::prefix_end(prefix));
      keys.set_sort_target(pb::RangeRequest::CREATE);
      keys.set_sort_order(pb::RangeRequest::ASCEND);
      keys.set_keys_only(true);
      auto resp = cluster_->range(keys);
      if (resp.kvs_size() == 0) return false;
      std::vector<etcd::KeyShape> shapes;
      for (const auto& kv : resp.kvs()) shapes.push_back(etcd::key_shape(kv.key()));
      bool deleted = false;
      for (auto i : etcd::holders(shapes)) {
        const auto& kv = resp.kvs(static_cast<int>(i));
        pb::TxnRequest t;  // that key, not one made again under the same name meanwhile
        auto* cmp = t.add_compare();
        cmp->set_key(kv.key());
        cmp->set_target(pb::Compare::CREATE);
        cmp->set_result(pb::Compare::EQUAL);
        cmp->set_create_revision(kv.create_revision());
        t.add_success()->mutable_request_delete_range()->set_key(kv.key());
        if (cluster_->txn(t).succeeded()) deleted = true;
      }
      if (deleted) return true;
      // else they just went: look again
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
  // gRPC's TLS always checks the certificate's chain (to ssl-ca, or the system's roots) and
  // its name (the first endpoint's host); it does not tell the protocol version.
  std::optional<Transport> transport() override {
    if (!tls_) return Transport{};
    return Transport{"TLS", true, true};
  }

 private:
  std::shared_ptr<Cluster> cluster_;
  const std::string root_;
  const bool tls_;
};

// etcds://... (or etcd+https://) is TLS, and so is etcd://... with any ssl-* parameter; a user
// needs a password. Nothing else is known, and nothing is ignored.
etcd::Security security_of(const Url& url) {
  etcd::Security s;
  s.tls = url.scheme != "etcd";
  for (const auto& [key, value] : url.query) {
    if (key == "ssl-ca") s.ca = read_pem_file("etcd", key, value);
    else if (key == "ssl-cert") s.cert = read_pem_file("etcd", key, value);
    else if (key == "ssl-key") s.key = read_pem_file("etcd", key, value);
    else throw UsageError("unknown etcd URL parameter '" + key + "' (known: ssl-ca, ssl-cert, ssl-key)");
    s.tls = true;
  }
  if (s.cert.empty() != s.key.empty()) throw UsageError("bad etcd URL: ssl-cert and ssl-key go together");
  if (url.user.empty() != url.password.empty())
    throw UsageError("bad etcd URL: etcd's authentication needs a user and a password (etcd://user:password@...)");
  s.user = url.user;
  s.password = url.password;
  return s;
}

}  // namespace

std::unique_ptr<Backend> open_etcd(const Url& url, const ClientOptions& options) {
  auto root = etcd::key_root(url.path);
  if (url.hosts.empty()) throw UsageError("bad etcd URL: no endpoint (etcd://host:port/prefix)");
  auto security = security_of(url);
  std::vector<etcd::Endpoint> endpoints;
  for (const auto& h : url.hosts) {
    if (h.port == 0) throw UsageError("bad etcd URL: endpoint " + h.host + " has no port (etcd://host:2379/prefix)");
    endpoints.push_back({h.host, h.port});
  }
  // An unreachable cluster fails here, within connect_timeout.
  const bool tls = security.tls;
  auto cluster = std::make_shared<Cluster>(endpoints, options.connect_timeout, options.statement_timeout,
                                           std::move(security));
  return std::make_unique<EtcdBackend>(std::move(cluster), std::move(root), tls);
}

}  // namespace dblock::detail
