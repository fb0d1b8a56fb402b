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
    case ZAUTHFAILED:
    case ZNOAUTH:
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

Session::Session(const std::string& hosts, milliseconds session_timeout, milliseconds connect_timeout) {
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

int Session::create(const std::string& path, const std::string& data, int flags, std::string* created,
                    Stat* stat) {
  check_usable("create " + path);
  std::vector<char> buf(path.size() + 32);  // the server appends at most a 10-digit sequence
  struct Stat s {};
  int rc = unknown_outcome(zoo_create2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                                       &ZOO_OPEN_ACL_UNSAFE, flags, buf.data(), static_cast<int>(buf.size()),
                                       stat ? stat : &s));
  if (rc == ZOK && created) *created = buf.data();
  if (rc == ZOK || rc == ZNONODE || rc == ZNODEEXISTS || rc == ZCONNECTIONLOSS) return rc;
  throw_error(rc, "create " + path);
}

namespace {

// What the two completions of create_and_list report, on the C client's completion thread.
struct Pipelined {
  std::mutex mutex;
  std::condition_variable done;
  int pending = 2;
  int create_rc = ZSYSTEMERROR, list_rc = ZSYSTEMERROR;
  std::string created;
  struct Stat stat {};
  std::vector<std::string> names;

  void finish() {
    std::lock_guard lk(mutex);
    if (--pending == 0) done.notify_all();
  }
  static void on_create(int rc, const char* path, const struct Stat* st, const void* data) {
    auto* p = static_cast<Pipelined*>(const_cast<void*>(data));
    {
      std::lock_guard lk(p->mutex);
      p->create_rc = rc;
      if (rc == ZOK && path) p->created = path;
      if (rc == ZOK && st) p->stat = *st;
    }
    p->finish();
  }
  static void on_list(int rc, const struct String_vector* v, const void* data) {
    auto* p = static_cast<Pipelined*>(const_cast<void*>(data));
    {
      std::lock_guard lk(p->mutex);
      p->list_rc = rc;
      if (rc == ZOK && v) p->names.assign(v->data, v->data + v->count);
    }
    p->finish();
  }
};

}  // namespace

int Session::create_and_list(const std::string& path, const std::string& data, int flags, std::string* created,
                             Stat* stat, const std::string& dir, std::vector<std::string>* names, bool* listed) {
  check_usable("create " + path);
  *listed = false;
  Pipelined p;
  int rc = zoo_acreate2(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE, flags,
                        &Pipelined::on_create, &p);
  if (rc != ZOK) {  // not sent (closing, bad state): nothing will call back
    if (rc == ZCONNECTIONLOSS) return rc;
    throw_error(rc, "create " + path);
  }
  if (zoo_aget_children(zh_, dir.c_str(), 0, &Pipelined::on_list, &p) != ZOK) p.finish();  // only the create then
  {
    // Like the C client's own synchronous calls, no time limit: every request sent gets its
    // completion (ZCONNECTIONLOSS, ZOPERATIONTIMEOUT or ZCLOSING at worst).
    std::unique_lock lk(p.mutex);
    p.done.wait(lk, [&] { return p.pending == 0; });
  }
  if (p.create_rc == ZOK) {
    if (created) *created = p.created;
    if (stat) *stat = p.stat;
    if (p.list_rc == ZOK) {
      *names = std::move(p.names);
      *listed = true;
    }
  }
  rc = unknown_outcome(p.create_rc);
  if (rc == ZOK || rc == ZNONODE || rc == ZNODEEXISTS || rc == ZCONNECTIONLOSS) return rc;
  throw_error(rc, "create " + path);
}

int Session::remove(const std::string& path) {
  check_usable("delete " + path);
  int rc = unknown_outcome(zoo_delete(zh_, path.c_str(), -1));
  if (rc == ZOK || rc == ZNONODE || rc == ZNOTEMPTY || rc == ZCONNECTIONLOSS) return rc;
  throw_error(rc, "delete " + path);
}

int Session::exists(const std::string& path, Stat* stat) {
  check_usable("exists " + path);
  int rc = zoo_exists(zh_, path.c_str(), 0, stat);
  if (rc == ZOK || rc == ZNONODE) return rc;
  throw_error(rc, "exists " + path);
}

int Session::children(const std::string& path, std::vector<std::string>* names) {
  check_usable("list " + path);
  struct String_vector v {};
  int rc = zoo_get_children(zh_, path.c_str(), 0, &v);
  if (rc == ZNONODE) return rc;
  if (rc != ZOK) throw_error(rc, "list " + path);
  names->assign(v.data, v.data + v.count);
  deallocate_String_vector(&v);
  return rc;
}

int Session::get(const std::string& path, std::string* data, Stat* stat) {
  check_usable("get " + path);
  std::vector<char> buf(4096);  // owners are short; longer data (someone else's) is cut
  int len = static_cast<int>(buf.size());
  int rc = zoo_get(zh_, path.c_str(), 0, buf.data(), &len, stat);
  if (rc == ZNONODE) return rc;
  if (rc != ZOK) throw_error(rc, "get " + path);
  data->assign(buf.data(), len > 0 ? static_cast<std::size_t>(len) : 0);
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
  char byte;
  int len = 1;
  // A data watch, not an exists watch: on a node that is already gone it sets nothing
  // (an exists watch would stay for a creation that never comes).
  int rc = zoo_wget(zh_, path.c_str(), &Session::on_event, this, &byte, &len, nullptr);
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
  struct String_vector v {};
  int rc = zoo_wget_children(zh_, path.c_str(), &Session::on_event, this, &v);
  if (rc == ZOK) {
    names->assign(v.data, v.data + v.count);
    deallocate_String_vector(&v);
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

void Session::wait(const std::string& path, std::uint64_t token, Clock::time_point until) {
  std::unique_lock lk(mutex_);
  auto changes = state_changes_;
  changed_.wait_until(lk, until, [&] { return watched_[path].fired != token || state_changes_ != changes; });
  unwatch_locked(path);  // a watch still set after the last waiter left fires into nothing
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
