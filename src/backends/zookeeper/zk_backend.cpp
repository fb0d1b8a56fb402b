// zookeeper://[user:password@]host:port[,host:port...]/root: the Backend around the zookeeper strategy.
#include "backends/zookeeper/zk_backend.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>

#include "backends/zookeeper/zk_driver.hpp"
#include "backends/zookeeper/zk_paths.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail {

namespace {

using zk::Sessions;

// The session for list, force_release and migrate: the one locks with the default TTL use.
const milliseconds default_ttl = LockOptions{}.ttl;

class ZkBackend : public Backend {
 public:
  explicit ZkBackend(std::shared_ptr<Sessions> sessions) : sessions_(std::move(sessions)) {}

  std::string_view name() const noexcept override { return "zookeeper"; }
  std::vector<Strategy> strategies() const override { return {Strategy::zookeeper}; }
  // Read/write locks on Kazoo's WriteLock/ReadLock nodes, semaphores in Kazoo's Semaphore
  // layout (docs/ARCHITECTURE.md, "Lock shapes").
  Shapes shapes(Strategy) const override { return Shapes{true, true}; }

  std::unique_ptr<LockDriver> make_driver(Strategy strategy) override {
    if (strategy != Strategy::zookeeper)
      throw UsageError("the zookeeper backend offers the zookeeper strategy only, not " +
                       std::string(to_string(strategy)));
    return std::make_unique<zk::Driver>(sessions_);
  }

  // Nothing to apply: the tree needs only its root, created here (and on first use anyway).
  std::vector<std::string> migrate() override {
    sessions_->session(default_ttl)->ensure_path(sessions_->root);
    return {};
  }

  // ZooKeeper removes a dead holder's ephemeral node itself, when its session expires.
  std::size_t sweep(std::size_t) override { return 0; }

  std::vector<LeaseInfo> list() override {
    auto s = sessions_->session(default_ttl);
    std::vector<LeaseInfo> out;
    std::vector<std::string> names;
    if (s->children(sessions_->root, &names) == ZNONODE) return out;
    for (const auto& name : names) {
      std::vector<std::string> children;
      if (s->children(sessions_->root + "/" + name, &children) == ZNONODE) continue;
      // The holders: the first writer, or the readers before the first writer. A node gone
      // between the listing and its read is left out (its successor may hold by now, and the
      // next list shows it). A semaphore's node (max_leases as its data) has leases instead:
      // every child holds one.
      auto held = zk::holders(zk::contenders(children));
      if (held.empty() && !children.empty() && is_semaphore(*s, sessions_->root + "/" + name))
        for (const auto& c : children) held.push_back(zk::Contender{c, 0, false});
      for (const auto& c : held) {
        LeaseInfo info;
        struct Stat st {};
        if (s->get(sessions_->root + "/" + name + "/" + c.node, &info.owner, &st) == ZNONODE) continue;
        info.name = zk::lock_name(name);
        info.fence = static_cast<std::uint64_t>(st.czxid);
        info.holds = 1;  // held in the holder's process: a Client lists its own grants' counts
        info.mode = c.shared ? Mode::shared : Mode::exclusive;
        // A session lock has no expiry of its own: both times are the node's creation time
        // on the server's clock (it lasts as long as its holder's session).
        info.acquired_at = info.expires_at = std::chrono::system_clock::time_point(milliseconds{st.ctime});
        out.push_back(std::move(info));
      }
    }
    return out;
  }

  // Deletes the holders' nodes (one writer's, or every reader's that holds); their sessions
  // learn at their next renewal that they lost the lock. When the holders all went by
  // themselves meanwhile, looks again: the next ones hold by now.
  bool force_release(const std::string& name) override {
    auto dir = sessions_->root + "/" + zk::node_name(name);
    auto s = sessions_->session(default_ttl);
    for (int round = 0; round < 3; ++round) {
      std::vector<std::string> children;
      if (s->children(dir, &children) == ZNONODE) return false;
      auto held = zk::holders(zk::contenders(children));
      if (held.empty() && !children.empty() && is_semaphore(*s, dir))  // every lease
        for (const auto& c : children) held.push_back(zk::Contender{c, 0, false});
      if (held.empty()) return false;
      bool removed = false;
      for (const auto& c : held) {
        int rc = s->remove(dir + "/" + c.node);
        if (rc == ZOK) removed = true;
        if (rc == ZCONNECTIONLOSS) zk::throw_error(rc, "delete " + dir + "/" + c.node);
        // else it just went
      }
      if (removed) return true;
    }
    return false;
  }

  // The client protocol reads no server configuration (the `conf` four-letter word, where
  // enabled, leaves forceSync out), so the one setting that matters is named, not read.
  std::vector<SettingCheck> check_settings() override {
    return {{"forceSync", "", Verdict::unknown,
             "not readable over the client protocol: keep forceSync=yes (the default), or a crash of a quorum's "
             "machines can lose acknowledged lock nodes and reuse their zxids (fences)"}};
  }
  // Debian's C client has no TLS.
  std::optional<Transport> transport() override { return Transport{}; }

 private:
  // Whether `dir` is a semaphore's node: its data is a number (Kazoo's max_leases).
  static bool is_semaphore(zk::Session& s, const std::string& dir) {
    std::string data;
    if (s.get(dir, &data, nullptr) != ZOK) return false;
    auto first = data.find_first_not_of(" \t\n"), last = data.find_last_not_of(" \t\n");
    return first != std::string::npos &&
           std::all_of(data.begin() + first, data.begin() + last + 1, [](char c) { return c >= '0' && c <= '9'; });
  }

  std::shared_ptr<Sessions> sessions_;
};

// zookeeper://[user:password@]host:port[,...]/root. No parameter is known: one is refused, never
// ignored, and TLS cannot be offered at all.
std::string digest_of(const Url& url) {
  for (const auto& [key, value] : url.query) {
    if (key.rfind("ssl", 0) == 0 || key.rfind("tls", 0) == 0 || key == "secure")
      throw UsageError("zookeeper: no TLS: Debian's ZooKeeper C client is built without it (parameter '" + key +
                       "'); use digest authentication on a trusted network, or a TLS tunnel");
    throw UsageError("unknown zookeeper URL parameter '" + key + "' (none are known)");
  }
  if (url.user.empty() && url.password.empty()) return {};
  if (url.user.empty() || url.password.empty() || url.user.find(':') != std::string::npos)
    throw UsageError("bad zookeeper URL: digest authentication needs a user (without ':') and a password");
  return url.user + ":" + url.password;
}

}  // namespace

std::unique_ptr<Backend> open_zookeeper(const Url& url, const ClientOptions& options) {
  auto root = zk::root_path(url.path);
  if (url.hosts.empty()) throw UsageError("bad zookeeper URL: no host (zookeeper://host:port/root)");
  auto digest = digest_of(url);
  std::string hosts;
  for (const auto& h : url.hosts) {
    if (!hosts.empty()) hosts += ',';
    hosts += h.host + ":" + std::to_string(h.port ? h.port : 2181);
  }
  auto sessions = std::make_shared<Sessions>(hosts, root, options.connect_timeout, std::move(digest));
  sessions->session(default_ttl);  // an unreachable server fails here, within connect_timeout
  return std::make_unique<ZkBackend>(std::move(sessions));
}

}  // namespace dblock::detail
