#include "backends/zookeeper/zk_session.hpp"

#include <zookeeper/zookeeper.h>

#include <cstring>
#include <set>

#include "dblock/errors.hpp"

namespace dblock::detail::zk {

namespace {

// Sessions alive in this process, for Session::credentials (tests expire sessions with it).
// Never destroyed: a Session may be freed by the Watchdog thread while the process runs its
// static destructors on exit (the CLI exits with the renewal thread alive), and must still
// find the registry then (TSan caught the use after free).
std::mutex& registry_mutex = *new std::mutex;
std::set<Session*>& registry = *new std::set<Session*>;

// The C client logs to stderr by default, several lines per failed connection attempt. The
// CLI promises one line of stderr, and errors reach the caller as exceptions anyway, so its
// log is dropped, and switched off (level 0, process-wide) so that nothing is even
// formatted: an error line formats the server's address into a static buffer that every
// handle's I/O thread shares, a data race TSan reports when two sessions fail at once.
void discard_log(const char*) {}

void quiet_client_log() {
  static std::once_flag once;
  std::call_once(once, [] { zoo_set_debug_level(static_cast<ZooLogLevel>(0)); });
}

// A request whose answer did not come back: ZCONNECTIONLOSS when the connection broke,
// ZOPERATIONTIMEOUT when it went silent past the client's timeout while the request waited
// (the C client fails every pending request with it before reconnecting). Either way the
// server may or may not have applied it, and a caller must treat both alike: a release that
// took the second for a hard error left its node behind (cli_zookeeper caught it).
int unknown_outcome(int rc) { return rc == ZOPERATIONTIMEOUT ? ZCONNECTIONLOSS : rc; }

}  // namespace

void throw_error(int rc, const std::string& what) {
  std::string m = "zookeeper: " + what + ": " + zerror(rc);
  switch (rc) {
    case ZBADARGUMENTS:
    case ZINVALIDACL:
    case ZNOCHILDRENFOREPHEMERALS:
      throw UsageError(m);
    case ZOPERATIONTIMEOUT:
      throw TimeoutError(m);
    case ZCONNECTIONLOSS:
    case ZSESSIONEXPIRED:
    case ZSESSIONMOVED:
    case ZINVALIDSTATE:
    case ZCLOSING:
    case ZNOAUTH:  // the node's ACL lets another identity in
      throw UnavailableError(m + " (the node belongs to another identity: check the URL's user and password)");
    case ZAUTHFAILED:
    case ZSESSIONCLOSEDREQUIRESASLAUTH:
    case ZSSLCONNECTIONERROR:
    case ZNOTREADONLY:
    case ZTHROTTLEDOP:
    case ZSYSTEMERROR:
      throw UnavailableError(m);
    default:
      throw InternalError(m);
  }
}

Session::Session(const std::string& hosts, milliseconds session_timeout, milliseconds connect_timeout,
                 const std::string& digest)
    : acl_(digest.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL) {
  quiet_client_log();
  // A session timeout beyond int range cannot be asked for; the server clamps anyway.
  auto asked = static_cast<int>(std::min<milliseconds::rep>(session_timeout.count(), 1 << 30));
  zh_ = zookeeper_init2(hosts.c_str(), &Session::on_event, asked, nullptr, this, 0, &discard_log);
  if (!zh_) throw UnavailableError("zookeeper: cannot start a client for " + hosts + ": " + std::strerror(errno));
  if (!wait_connected(connect_timeout)) {
    bool refused = dead();
    zookeeper_close(zh_);
    zh_ = nullptr;
    throw UnavailableError("zookeeper: " + hosts +
                           (refused ? ": the server refused the session"
                                    : ": no session within the connect timeout (" +
                                          std::to_string(connect_timeout.count()) + " ms)"));
  }
  // Digest authentication fails only on a malformed identity (the server accepts any user and
  // password, and a wrong one is another identity, refused by the nodes' ACLs instead).
  if (!digest.empty()) {
    if (int rc = authenticate(digest); rc != ZOK) {
      zookeeper_close(zh_);
      zh_ = nullptr;
      throw UnavailableError("zookeeper: " + hosts + ": digest authentication refused: " + zerror(rc));
    }
  }
  std::lock_guard lk(registry_mutex);
  registry.insert(this);
}

Session::~Session() {
  {
    std::lock_guard lk(registry_mutex);
    registry.erase(this);
  }
  // After zookeeper_close returns no callback runs any more, so `this` may go.
  if (zh_) zookeeper_close(zh_);
}

void Session::on_event(zhandle_t*, int type, int state, const char* path, void* context) {
  auto* self = static_cast<Session*>(context);
  {
    std::lock_guard lk(self->mutex_);
    if (type == ZOO_SESSION_EVENT) {
      self->state_ = state;
      ++self->state_changes_;
    } else if (path && *path) {
      // Only paths someone waits for are recorded (watch() registers them), so the map
      // cannot grow with watches nobody waits on any more.
      if (auto it = self->watched_.find(path); it != self->watched_.end()) ++it->second.fired;
    }
  }
  self->changed_.notify_all();
}

milliseconds Session::timeout() const { return milliseconds{zoo_recv_timeout(zh_)}; }

bool Session::connected() const {
  std::lock_guard lk(mutex_);
  return state_ == ZOO_CONNECTED_STATE;
}

bool Session::dead() const {
  std::lock_guard lk(mutex_);
  return state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE;
}

bool Session::wait_connected(milliseconds limit) {
  std::unique_lock lk(mutex_);
  changed_.wait_for(lk, limit, [&] {
    return state_ == ZOO_CONNECTED_STATE || state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE;
  });
  return state_ == ZOO_CONNECTED_STATE;
}

void Session::check_usable(const std::string& what) const {
  if (dead()) throw_error(ZSESSIONEXPIRED, what);
}

struct Session::Call {
  Session* session = nullptr;
  bool done = false;
  int rc = ZSYSTEMERROR;
  std::string text;  // the created path, or the node's data
  struct Stat stat {};
  std::vector<std::string> names;
};

// The completions of each kind of call: they record the answer, let the Call go from the
// session's list and wake the waiters, on the client's completion thread.
struct Completions {
  using Call = Session::Call;
  template <typename Fill>
  static void complete(const void* data, int rc, Fill fill) {
    auto* call = static_cast<Call*>(const_cast<void*>(data));
    Session* s = call->session;
    std::shared_ptr<Call> keep;  // the waiter may have given up: the last reference may be ours
    {
      std::lock_guard lk(s->mutex_);
      if (auto it = s->calls_.find(call); it != s->calls_.end()) {
        keep = std::move(it->second);
        s->calls_.erase(it);
      }
      call->rc = rc;
      if (rc == ZOK) fill(*call);
      call->done = true;
    }
    s->changed_.notify_all();
  }
  static void on_void(int rc, const void* data) {
    complete(data, rc, [](Call&) {});
  }
  static void on_stat(int rc, const struct Stat* st, const void* data) {
    complete(data, rc, [st](Call& c) {
      if (st) c.stat = *st;
    });
  }
  static void on_create(int rc, const char* path, const struct Stat* st, const void* data) {
    complete(data, rc, [path, st](Call& c) {
      if (path) c.text = path;
      if (st) c.stat = *st;
    });
  }
  static void on_data(int rc, const char* value, int len, const struct Stat* st, const void* data) {
    complete(data, rc, [value, len, st](Call& c) {
      if (value && len > 0) c.text.assign(value, static_cast<std::size_t>(len));
      if (st) c.stat = *st;
    });
  }
  static void on_list(int rc, const struct String_vector* v, const void* data) {
    complete(data, rc, [v](Call& c) {
      if (v) c.names.assign(v->data, v->data + v->count);
    });
  }
};

std::shared_ptr<Session::Call> Session::start() {
  auto call = std::make_shared<Call>();
  call->session = this;
  std::lock_guard lk(mutex_);
  calls_.emplace(call.get(), call);
  return call;
}

int Session::finish(const std::shared_ptr<Call>& call, int sent) {
  std::unique_lock lk(mutex_);
  if (sent != ZOK) {  // not sent (closing, a bad state): nothing will complete it
    calls_.erase(call.get());
    return sent;
  }
  changed_.wait(lk, [&] {
    return call->done || state_ == ZOO_EXPIRED_SESSION_STATE || state_ == ZOO_AUTH_FAILED_STATE;
  });
  if (call->done) return call->rc;
  // The session ended first: the answer may never come (the class comment). The Call stays
  // in calls_ for a completion that still comes, and goes with the handle.
  return state_ == ZOO_AUTH_FAILED_STATE ? ZAUTHFAILED : ZSESSIONEXPIRED;
}

int Session::authenticate(const std::string& digest) {
  auto call = start();
  return finish(call, zoo_add_auth(zh_, "digest", digest.data(), static_cast<int>(digest.size()),
                                   &Completions::on_void, call.get()));
}

int Session::create(const std::string& path, const std::string& data, int flags, std::string* created,
                    Stat* stat) {
  check_usable("create " + path);
  auto call = start();
  int rc = unknown_outcome(finish(call, zoo_acreate2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                                                     acl_, flags, &Completions::on_create, call.get())));
  if (rc == ZOK) {
    if (created) *created = call->text;
    if (stat) *stat = call->stat;
  }
  if (rc == ZOK || rc == ZNONODE || rc == ZNODEEXISTS || rc == ZCONNECTIONLOSS) return rc;
  throw_error(rc, "create " + path);
}

int Session::create_and_list(const std::string& path, const std::string& data, int flags, std::string* created,
                             Stat* stat, const std::string& dir, std::vector<std::string>* names, bool* listed) {
  check_usable("create " + path);
  *listed = false;
  auto create = start();
  int sent = zoo_acreate2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), acl_, flags,
                          &Completions::on_create, create.get());
  if (sent != ZOK) {
    int rc = finish(create, sent);
    if (rc == ZCONNECTIONLOSS) return rc;
    throw_error(rc, "create " + path);
  }
  auto list = start();
  int list_sent = zoo_aget_children(zh_, dir.c_str(), 0, &Completions::on_list, list.get());
  int rc = unknown_outcome(finish(create, sent));
  int list_rc = finish(list, list_sent);  // only the create, if the listing was not sent
  if (rc == ZOK) {
    if (created) *created = create->text;
    if (stat) *stat = create->stat;
    if (list_rc == ZOK) {
      *names = std::move(list->names);
      *listed = true;
    }
  }
  if (rc == ZOK || rc == ZNONODE || rc == ZNODEEXISTS || rc == ZCONNECTIONLOSS) return rc;
  throw_error(rc, "create " + path);
}

int Session::remove(const std::string& path) {
  check_usable("delete " + path);
  auto call = start();
  int rc = unknown_outcome(finish(call, zoo_adelete(zh_, path.c_str(), -1, &Completions::on_void, call.get())));
  if (rc == ZOK || rc == ZNONODE || rc == ZNOTEMPTY || rc == ZCONNECTIONLOSS) return rc;
  throw_error(rc, "delete " + path);
}

int Session::exists(const std::string& path, Stat* stat) {
  check_usable("exists " + path);
  auto call = start();
  int rc = finish(call, zoo_aexists(zh_, path.c_str(), 0, &Completions::on_stat, call.get()));
  if (rc == ZOK && stat) *stat = call->stat;
  if (rc == ZOK || rc == ZNONODE) return rc;
  throw_error(rc, "exists " + path);
}

int Session::children(const std::string& path, std::vector<std::string>* names) {
  check_usable("list " + path);
  auto call = start();
  int rc = finish(call, zoo_aget_children(zh_, path.c_str(), 0, &Completions::on_list, call.get()));
  if (rc == ZNONODE) return rc;
  if (rc != ZOK) throw_error(rc, "list " + path);
  *names = std::move(call->names);
  return rc;
}

int Session::get(const std::string& path, std::string* data, Stat* stat) {
  check_usable("get " + path);
  auto call = start();
  int rc = finish(call, zoo_aget(zh_, path.c_str(), 0, &Completions::on_data, call.get()));
  if (rc == ZNONODE) return rc;
  if (rc != ZOK) throw_error(rc, "get " + path);
  *data = std::move(call->text);
  if (stat) *stat = call->stat;
  return rc;
}

void Session::ensure_path(const std::string& path) {
  // Parents first: "/a/b/c" creates "/a", "/a/b", "/a/b/c" as needed.
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    auto prefix = path.substr(0, i);
    int rc = create(prefix, "", 0, nullptr, nullptr);
    if (rc == ZCONNECTIONLOSS) rc = exists(prefix, nullptr) == ZOK ? ZOK : ZCONNECTIONLOSS;
    if (rc != ZOK && rc != ZNODEEXISTS) throw_error(rc, "create " + prefix);
  }
}

std::optional<std::uint64_t> Session::watch(const std::string& path) {
  check_usable("watch " + path);
  std::uint64_t token;
  {
    std::lock_guard lk(mutex_);
    auto& w = watched_[path];  // registered before the watch is set, so its event is not missed
    ++w.waiters;
    token = w.fired;
  }
  // A data watch, not an exists watch: on a node that is already gone it sets nothing
  // (an exists watch would stay for a creation that never comes).
  auto call = start();
  int rc = finish(call, zoo_awget(zh_, path.c_str(), &Session::on_event, this, &Completions::on_data, call.get()));
  if (rc == ZOK) return token;
  {
    std::lock_guard lk(mutex_);
    unwatch_locked(path);
  }
  if (rc == ZNONODE) return std::nullopt;
  throw_error(rc, "watch " + path);
}

int Session::watch_children(const std::string& path, std::vector<std::string>* names, std::uint64_t* token) {
  check_usable("list " + path);
  {
    std::lock_guard lk(mutex_);
    auto& w = watched_[path];  // registered before the watch is set, so its event is not missed
    ++w.waiters;
    *token = w.fired;
  }
  auto call = start();
  int rc = finish(call, zoo_awget_children(zh_, path.c_str(), &Session::on_event, this, &Completions::on_list,
                                           call.get()));
  if (rc == ZOK) {
    *names = std::move(call->names);
    return rc;
  }
  unwatch(path);
  if (rc == ZNONODE) return rc;
  throw_error(rc, "list " + path);
}

void Session::unwatch(const std::string& path) {
  std::lock_guard lk(mutex_);
  unwatch_locked(path);
}

void Session::wait(const std::string& path, std::uint64_t token, Clock::time_point until,
                   const WaitCancel* cancel) {
  std::unique_lock lk(mutex_);
  auto changes = state_changes_;
  changed_.wait_until(lk, until, [&] {
    return watched_[path].fired != token || state_changes_ != changes || WaitCancel::cancelled(cancel);
  });
  unwatch_locked(path);  // a watch still set after the last waiter left fires into nothing
}

void Session::wake_waiters() {
  std::lock_guard lk(mutex_);  // a wait between its check and its sleep is not missed
  changed_.notify_all();
}

void Session::unwatch_locked(const std::string& path) {
  if (auto it = watched_.find(path); it != watched_.end() && --it->second.waiters <= 0) watched_.erase(it);
}

bool Session::credentials(std::int64_t session_id, std::string* password) {
  std::lock_guard lk(registry_mutex);
  for (Session* s : registry) {
    const clientid_t* id = zoo_client_id(s->zh_);
    if (id->client_id == session_id) {
      password->assign(id->passwd, sizeof id->passwd);
      return true;
    }
  }
  return false;
}

}  // namespace dblock::detail::zk
