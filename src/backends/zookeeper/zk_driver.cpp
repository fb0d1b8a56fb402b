#include "backends/zookeeper/zk_driver.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>

#include "backends/zookeeper/zk_paths.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::zk {

namespace {

std::string basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// A busy answer after waiting inside the driver: the core may call again at once (its
// backoff never sleeps much past a holder's "remaining").
constexpr Attempt busy{false, 0, milliseconds{1}};

}  // namespace

std::shared_ptr<Driver::Node> Driver::find(const Key& key) {
  std::lock_guard lk(mutex_);
  auto it = nodes_.find(key);
  return it == nodes_.end() ? nullptr : it->second;
}

void Driver::forget(const Key& key, const std::shared_ptr<Node>& node) {
  std::lock_guard lk(mutex_);
  if (auto it = nodes_.find(key); it != nodes_.end() && it->second == node) nodes_.erase(it);
}

int Driver::remove(const Node& node) noexcept {
  auto& s = *node.session;
  // A release that ends a job right after a server restart must not leave its node to the
  // session timeout: every other contender would wait that long for nothing.
  const auto until = Clock::now() + s.timeout();
  try {
    for (bool retried = false;; retried = true) {
      if (s.dead()) return ZNONODE;  // the server dropped the session, and the node with it
      int rc = s.remove(node.path);
      // A repeated delete that finds no node: the first one went through before the loss.
      if (rc == ZOK || (rc == ZNONODE && retried)) return ZOK;
      if (rc != ZCONNECTIONLOSS) return rc;
      auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
      if (left <= milliseconds{0} || !s.wait_connected(left)) break;
    }
  } catch (...) {
  }
  pool_->retire(node.session);
  return ZCONNECTIONLOSS;
}

std::shared_ptr<Driver::Node> Driver::create(const std::shared_ptr<Session>& s, const std::string& dir,
                                             const std::string& owner, std::vector<std::string>* children,
                                             bool* listed) {
  const std::string prefix = random_prefix() + std::string(lock_marker);
  *listed = false;
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto node = std::make_shared<Node>();
    node->session = s;
    struct Stat st {};
    // The listing that tells whether we are first rides along (one round trip, not two);
    // an uncontended acquire thus costs what a bare create does.
    int rc = s->create_and_list(dir + "/" + prefix, owner, ZOO_EPHEMERAL_SEQUENTIAL, &node->path, &st, dir,
                                children, listed);
    if (rc == ZOK) {
      node->czxid = static_cast<std::uint64_t>(st.czxid);
      return node;
    }
    if (rc == ZNONODE) {  // the first lock of this name: make /root/N (and /root) first
      s->ensure_path(dir);
      continue;
    }
    if (rc != ZCONNECTIONLOSS) throw_error(rc, "create " + dir + "/" + prefix);
    // The create may have happened without its answer reaching us: look for our prefix, as
    // Kazoo (and Curator) do, before creating again.
    if (!s->wait_connected(pool_->connect_timeout)) {
      pool_->retire(s);  // a node of ours may exist in it: let it go with the session
      throw UnavailableError("zookeeper: " + pool_->hosts + ": connection lost while creating a lock node");
    }
    std::vector<std::string> found;
    s->children(dir, &found);
    for (const auto& c : found)
      if (c.compare(0, prefix.size(), prefix) == 0 && s->exists(dir + "/" + c, &st) == ZOK) {
        node->path = dir + "/" + c;
        node->czxid = static_cast<std::uint64_t>(st.czxid);
        return node;
      }
  }
  throw UnavailableError("zookeeper: " + pool_->hosts + ": cannot create a lock node under " + dir);
}

Attempt Driver::try_acquire(const AcquireRequest& r) {
  const std::string dir = pool_->root + "/" + node_name(r.name);
  const auto entered = Clock::now();
  const auto until = entered + std::max(r.wait, milliseconds{0});
  const Key key{r.name, r.owner};

  auto node = find(key);
  if (node && node->session->dead()) {  // its session expired: the node went with it
    forget(key, node);
    node.reset();
  }
  bool granted = false;
  if (node) {
    std::lock_guard lk(mutex_);
    granted = node->granted;
  }
  if (node && granted) {
    // Re-entry, while our node still exists (an operator may have deleted it: then the old
    // grant is lost and this is a new acquire). A disconnection throws: the session may
    // still come back with the node.
    if (node->session->exists(node->path, nullptr) == ZOK) {
      std::lock_guard lk(mutex_);
      ++node->holds;
      return Attempt{true, node->czxid, node->session->timeout()};
    }
    forget(key, node);
    node.reset();
  }

  for (int recreated = 0;; ) {
    std::vector<std::string> children;
    bool listed = false;  // children already read with the create
    auto sent = Clock::now();
    if (!node) {
      node = create(pool_->session(r.ttl), dir, r.owner, &children, &listed);
      std::lock_guard lk(mutex_);
      nodes_[key] = node;
    }
    const auto& s = node->session;
    if (!listed) {
      if (!s->connected() && !s->wait_connected(pool_->connect_timeout) && !s->dead())
        throw UnavailableError("zookeeper: " + pool_->hosts + ": disconnected, and not back within the connect timeout");
      sent = Clock::now();
      if (!s->dead()) s->children(dir, &children);
    }
    auto list = contenders(children);
    auto self = basename(node->path);
    auto me = std::find_if(list.begin(), list.end(), [&](const Contender& c) { return c.node == self; });
    if (me == list.end()) {
      // Our node is gone: deleted by an operator, or with an expired session. Queue again
      // (a few times; something that keeps deleting it is not a wait).
      forget(key, node);
      node.reset();
      if (++recreated > 3)
        throw UnavailableError("zookeeper: our lock node under " + dir + " keeps disappearing");
      continue;
    }
    if (me == list.begin()) {
      std::lock_guard lk(mutex_);
      node->granted = true;
      node->holds = 1;
      // The session (and so the lock) lasts at least its timeout past the request that
      // showed us first; the core measures from when it called us, hence the time waited.
      auto waited = std::chrono::duration_cast<milliseconds>(sent - entered);
      return Attempt{true, node->czxid, s->timeout() + waited};
    }
    if (r.wait.count() <= 0) {  // a try-lock: our node goes at once
      forget(key, node);
      remove(*node);
      return Attempt{};
    }
    if (Clock::now() >= until) return busy;  // the node stays queued for the core's next call
    // Watch only the predecessor: its deletion wakes exactly us. If it is already gone the
    // watch is not set and we look again at once.
    auto predecessor = dir + "/" + std::prev(me)->node;
    if (auto token = s->watch(predecessor)) s->wait(predecessor, *token, until);
  }
}

Renewal Driver::renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds) {
  const Key key{name, owner};
  auto node = find(key);
  if (!node) return Renewal{};
  {
    std::lock_guard lk(mutex_);
    if (!node->granted || node->czxid != fence) return Renewal{};
  }
  if (node->session->dead()) {  // expired: ZooKeeper deleted the node, the lock is gone
    forget(key, node);
    return Renewal{};
  }
  // Disconnected: not known yet. The session may come back (with the node) within its
  // timeout; the watchdog keeps the local deadline and declares the loss if it passes.
  if (!node->session->connected())
    throw UnavailableError("zookeeper: " + pool_->hosts + ": disconnected; the session may still recover");
  if (node->session->exists(node->path, nullptr) == ZNONODE) {
    forget(key, node);
    return Renewal{};
  }
  return Renewal{true, node->session->timeout()};
}

bool Driver::release(const std::string& name, const std::string& owner, std::uint64_t fence) {
  std::shared_ptr<Node> node;
  {
    std::lock_guard lk(mutex_);
    auto it = nodes_.find({name, owner});
    if (it == nodes_.end() || !it->second->granted || it->second->czxid != fence) return false;
    node = it->second;
    if (--node->holds > 0) return true;
    nodes_.erase(it);
  }
  if (node->session->dead()) return false;
  // ZNONODE: deleted behind our back, lost. ZCONNECTIONLOSS: the session was retired and the
  // node goes with it.
  return remove(*node) != ZNONODE;
}

void Driver::abandon(const std::string& name, const std::string& owner) noexcept {
  std::shared_ptr<Node> node;
  {
    std::lock_guard lk(mutex_);
    auto it = nodes_.find({name, owner});
    if (it == nodes_.end() || it->second->granted) return;
    node = it->second;
    nodes_.erase(it);
  }
  remove(*node);
}

void Driver::lost(const std::string& name, const std::string& owner, std::uint64_t fence) noexcept {
  std::shared_ptr<Node> node;
  {
    std::lock_guard lk(mutex_);
    auto it = nodes_.find({name, owner});
    if (it == nodes_.end() || it->second->czxid != fence) return;
    node = it->second;
    nodes_.erase(it);
  }
  // The holder was told it lost the lock; the node must not block the others any longer.
  remove(*node);
}

int Driver::holds(const std::string& name, std::uint64_t fence) {
  std::lock_guard lk(mutex_);
  for (const auto& [key, node] : nodes_)
    if (key.first == name && node->granted && node->czxid == fence) return node->holds;
  return 0;
}

}  // namespace dblock::detail::zk
