#include "backends/zookeeper/zk_driver.hpp"

#include <zookeeper/zookeeper.h>

#include <algorithm>

#include "backends/zookeeper/zk_paths.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::zk {

namespace {

std::string basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// A busy answer. After waiting inside the driver, 1 ms: the core may call again at once
// (its backoff never sleeps much past a holder's "remaining").
Attempt busy(milliseconds remaining) { return Attempt::busy(remaining); }

}  // namespace

// One contender node of ours. Deleted from the server when this object goes, unless it was
// never made (no path yet) or is already gone (deleted, or dropped with its session).
struct Driver::Node final : QueuePlace {
  Node(Driver& d, std::shared_ptr<Session> s) : driver(d), session(std::move(s)) {}
  ~Node() override {
    if (!gone && !path.empty()) driver.remove(*this);
  }
  Driver& driver;
  std::shared_ptr<Session> session;
  std::string path;  // the full path of the node
  std::uint64_t czxid = 0;
  bool gone = false;
};

// A granted node: the lock lasts while the node (and so its session) does.
class Driver::Held final : public GrantHandle {
 public:
  explicit Held(std::unique_ptr<Node> node) : node_(std::move(node)) {}

  Renewal renew(milliseconds ttl, int) override {
    if (!node_) return Renewal{};
    auto& s = *node_->session;
    if (s.dead()) return Renewal{};  // expired: ZooKeeper deleted the node, the lock is gone
    // A hold given back: the node keeps no count (the Client lists its own), so nothing to send.
    if (ttl.count() == 0) return Renewal{true, ttl};
    // Disconnected: not known yet. The session may come back (with the node) within its
    // timeout; the watchdog keeps the local deadline and declares the loss if it passes.
    if (!s.connected())
      throw UnavailableError("zookeeper: " + node_->driver.sessions_->hosts +
                             ": disconnected; the session may still recover");
    if (s.exists(node_->path, nullptr) == ZNONODE) return Renewal{};
    return Renewal{true, s.timeout()};
  }

  bool release() override {
    auto node = std::move(node_);
    if (!node) return false;
    node->gone = true;
    if (node->session->dead()) return false;
    // ZNONODE: deleted behind our back, lost. ZCONNECTIONLOSS: the session was retired and the
    // node goes with it.
    return node->driver.remove(*node) != ZNONODE;
  }

  // The holder was told it lost the lock; the node must not block the others any longer.
  void lost() noexcept override { node_.reset(); }

 private:
  std::unique_ptr<Node> node_;
};

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
  sessions_->retire(node.session);
  return ZCONNECTIONLOSS;
}

std::unique_ptr<Driver::Node> Driver::create(const std::shared_ptr<Session>& s, const std::string& dir,
                                             const std::string& owner, bool shared,
                                             std::vector<std::string>* children, bool* listed) {
  const std::string prefix = random_prefix() + std::string(shared ? read_marker : lock_marker);
  *listed = false;
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto node = std::make_unique<Node>(*this, s);
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
    if (!s->wait_connected(sessions_->connect_timeout)) {
      sessions_->retire(s);  // a node of ours may exist in it: let it go with the session
      throw UnavailableError("zookeeper: " + sessions_->hosts + ": connection lost while creating a lock node");
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
  throw UnavailableError("zookeeper: " + sessions_->hosts + ": cannot create a lock node under " + dir);
}

bool Driver::wait_turn(std::unique_ptr<Node>& node, const std::string& dir, const AcquireRequest& r, bool shared,
                       Clock::time_point until, Clock::time_point* sent) {
  if (node && node->session->dead()) {  // its session expired: the node went with it
    node->gone = true;
    node.reset();
  }
  for (int recreated = 0;; ) {
    std::vector<std::string> children;
    bool listed = false;  // children already read with the create
    *sent = Clock::now();
    if (!node) node = create(sessions_->session(r.ttl), dir, r.owner, shared, &children, &listed);
    const auto s = node->session;
    if (!listed) {
      if (!s->connected() && !s->wait_connected(sessions_->connect_timeout) && !s->dead())
        throw UnavailableError("zookeeper: " + sessions_->hosts +
                               ": disconnected, and not back within the connect timeout");
      *sent = Clock::now();
      if (!s->dead()) s->children(dir, &children);
    }
    // A semaphore's leases under the name: it is held as a semaphore, which a lock would not
    // see (its holders have no contender nodes). A different shape, like a different number
    // of permits, is an error, not a wait (our node goes as this unwinds).
    if (std::any_of(children.begin(), children.end(), is_lease))
      throw UsageError("zookeeper: " + dir + " is held as a semaphore (its leases are there): " +
                       "take it with the same permits, or not as a lock");
    auto list = contenders(children);
    auto self = basename(node->path);
    auto me = std::find_if(list.begin(), list.end(), [&](const Contender& c) { return c.node == self; });
    if (me == list.end()) {
      // Our node is gone: deleted by an operator, or with an expired session. Queue again
      // (a few times; something that keeps deleting it is not a wait).
      node->gone = true;
      node.reset();
      if (++recreated > 3)
        throw UnavailableError("zookeeper: our lock node under " + dir + " keeps disappearing");
      continue;
    }
    const auto blocking = blocker(list, static_cast<std::size_t>(me - list.begin()));
    if (blocking == npos) return true;  // a writer first, or a reader with no writer before it
    auto armed = WaitCancel::arm(r.cancel, [s] { s->wake_waiters(); });
    if (r.wait.count() <= 0 || Clock::now() >= until || r.cancelled()) return false;
    // Watch only the node we wait for (a writer: its predecessor; a reader: the nearest
    // writer before it): its deletion wakes us and the readers right behind it, nobody else.
    // If it is already gone the watch is not set and we look again at once.
    auto predecessor = dir + "/" + list[blocking].node;
    if (auto token = s->watch(predecessor)) s->wait(predecessor, *token, until, r.cancel);
  }
}

Attempt Driver::try_acquire(AcquireRequest& r) {
  if (r.permits > 1) return try_acquire_permit(r);
  const std::string dir = sessions_->root + "/" + node_name(r.name);
  const auto entered = Clock::now();
  const auto until = entered + std::max(r.wait, milliseconds{0});
  // Our node from the previous attempt of this acquire (this driver's own QueuePlace; the
  // same mode, since one acquire asks for one).
  std::unique_ptr<Node> node(static_cast<Node*>(r.place.release()));
  Clock::time_point sent;
  if (wait_turn(node, dir, r, r.mode == Mode::shared, until, &sent)) {
    // The session (and so the lock) lasts at least its timeout past the request that
    // showed us first; the core measures from when it called us, hence the time waited.
    auto waited = std::chrono::duration_cast<milliseconds>(sent - entered);
    auto fence = node->czxid;
    auto timeout = node->session->timeout();
    return Attempt{std::make_unique<Held>(std::move(node)), fence, timeout + waited, nullptr};
  }
  if (r.wait.count() <= 0) return busy(milliseconds{0});  // a try-lock: our node goes at once
  auto a = busy(milliseconds{1});                         // the node stays queued for the core's next call
  a.place = std::move(node);
  return a;
}

void Driver::ensure_semaphore(Session& s, const std::string& dir, std::uint32_t permits) {
  const std::string data = std::to_string(permits);
  for (int attempt = 0; attempt < 5; ++attempt) {
    int rc = s.create(dir, data, 0, nullptr, nullptr);
    if (rc == ZOK) return;
    if (rc == ZNONODE) {  // the root is missing
      s.ensure_path(sessions_->root);
      continue;
    }
    if (rc == ZCONNECTIONLOSS) {
      if (!s.wait_connected(sessions_->connect_timeout)) break;
      continue;  // created or not: the next create says (ZNODEEXISTS then reads our data)
    }
    // ZNODEEXISTS: the max_leases stored there must be ours. Data that is not a number is
    // not a semaphore's (an exclusive lock made the node): ignored, as Kazoo does.
    std::string stored;
    if (s.get(dir, &stored, nullptr) == ZNONODE) continue;
    auto first = stored.find_first_not_of(" \t\n");
    auto last = stored.find_last_not_of(" \t\n");
    if (first == std::string::npos) return;
    auto number = stored.substr(first, last - first + 1);
    if (number.size() > 9 || !std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return;
    if (std::stoul(number) != permits)
      throw UsageError("zookeeper: " + dir + " is a semaphore of " + number + " permits, not " + data +
                       " (Kazoo's Semaphore max_leases is stored there; delete the node to change it)");
    return;
  }
  throw UnavailableError("zookeeper: " + sessions_->hosts + ": cannot create the semaphore node " + dir);
}

std::unique_ptr<Driver::Node> Driver::create_lease(const std::shared_ptr<Session>& s, const std::string& dir,
                                                   const std::string& owner, std::uint32_t permits) {
  auto node = std::make_unique<Node>(*this, s);
  const std::string path = dir + "/" + random_prefix();  // Kazoo's lease: <uuid hex>, no sequence
  for (int attempt = 0; attempt < 5; ++attempt) {
    struct Stat st {};
    int rc = s->create(path, owner, ZOO_EPHEMERAL, &node->path, &st);
    if (rc == ZOK) {
      node->czxid = static_cast<std::uint64_t>(st.czxid);
      return node;
    }
    if (rc == ZNONODE) {  // the semaphore node went (deleted by hand): make it again
      ensure_semaphore(*s, dir, permits);
      continue;
    }
    if (rc != ZCONNECTIONLOSS && rc != ZNODEEXISTS) throw_error(rc, "create " + path);
    // The create may have happened without its answer reaching us (ZNODEEXISTS: a repeated
    // create found it): the path is ours alone, so it is ours if it exists.
    if (!s->wait_connected(sessions_->connect_timeout)) {
      sessions_->retire(s);
      throw UnavailableError("zookeeper: " + sessions_->hosts + ": connection lost while creating a lease node");
    }
    if (s->exists(path, &st) == ZOK) {
      node->path = path;
      node->czxid = static_cast<std::uint64_t>(st.czxid);
      return node;
    }
  }
  throw UnavailableError("zookeeper: " + sessions_->hosts + ": cannot create a lease node under " + dir);
}

Attempt Driver::try_acquire_permit(AcquireRequest& r) {
  const std::string dir = sessions_->root + "/" + node_name(r.name);
  const std::string gate_dir = dir + "-" + std::string(lock_marker);  // Kazoo's: path + "-__lock__"
  const auto entered = Clock::now();
  const auto until = entered + std::max(r.wait, milliseconds{0});
  // Our node in the gate's queue from the previous attempt of this acquire.
  std::unique_ptr<Node> gate(static_cast<Node*>(r.place.release()));
  if (!gate) ensure_semaphore(*sessions_->session(r.ttl), dir, r.permits);
  Clock::time_point sent;
  if (!wait_turn(gate, gate_dir, r, false, until, &sent)) {
    if (r.wait.count() <= 0) return busy(milliseconds{0});
    auto a = busy(milliseconds{1});
    a.place = std::move(gate);
    return a;
  }
  // We hold the gate: one contender at a time counts the leases and takes one, so N is
  // never exceeded, and the gate's queue makes the waiters first come first served. Only
  // the gate's holder watches the leases (no herd).
  const auto s = gate->session;
  for (;;) {
    std::vector<std::string> leases;
    std::uint64_t token = 0;
    sent = Clock::now();
    if (s->watch_children(dir, &leases, &token) == ZNONODE) {
      ensure_semaphore(*s, dir, r.permits);
      continue;
    }
    // Contender nodes of a lock under the name: it is held as a lock (or read/write lock),
    // whose nodes are not leases. An error, not a wait, as a mismatch of permits is (the
    // gate's node goes as this unwinds).
    if (std::any_of(leases.begin(), leases.end(), [](const std::string& c) { return !is_lease(c); })) {
      s->unwatch(dir);
      throw UsageError("zookeeper: " + dir + " is held as a lock, not as a semaphore of " +
                       std::to_string(r.permits) + " permits");
    }
    if (leases.size() < r.permits) {
      s->unwatch(dir);
      auto lease = create_lease(s, dir, r.owner, r.permits);
      gate.reset();  // the gate's next contender counts our lease
      auto waited = std::chrono::duration_cast<milliseconds>(sent - entered);
      auto fence = lease->czxid;
      return Attempt{std::make_unique<Held>(std::move(lease)), fence, s->timeout() + waited, nullptr};
    }
    auto armed = WaitCancel::arm(r.cancel, [s] { s->wake_waiters(); });
    if (r.wait.count() <= 0 || Clock::now() >= until || s->dead() || r.cancelled()) {
      s->unwatch(dir);
      if (r.wait.count() <= 0) return busy(milliseconds{0});
      auto a = busy(milliseconds{1});  // keeps the gate: we are next whenever a lease goes
      a.place = std::move(gate);
      return a;
    }
    s->wait(dir, token, until, r.cancel);
  }
}

}  // namespace dblock::detail::zk
