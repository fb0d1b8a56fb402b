// Connection::open_primary: the one place a redis-sentinel connection finds its server.
#include "backends/redis/redis_sentinel.hpp"

#include <algorithm>

#include "backends/redis/redis_connection.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::redis {

std::string Sentinels::key() const {
  std::string k = "sentinel " + master;
  for (const auto& a : addresses) k += ' ' + a.host + ':' + std::to_string(a.port);
  return k;
}

namespace {

// Sentinel `at`'s answer to SENTINEL get-master-addr-by-name. Sentinels with a password of
// their own (sentinel-password) are sent it first; otherwise one that answers NOAUTH is given
// the URL's credentials (one password for the whole deployment is common). The Sentinels speak
// TLS when the data nodes do, with the same certificates (as redis-cli's --tls applies to
// both): a deployment that encrypts one and not the other is not supported. Throws
// UnavailableError or TimeoutError, which name the Sentinel.
HostPort ask(const HostPort& at, const Sentinels& s, const Target& t, milliseconds timeout) {
  Target st;
  st.host = at.host;
  st.port = at.port;
  st.tls = t.tls;
  st.connect_timeout = timeout;
  st.command_timeout = timeout;
  st.where = "sentinel " + at.host + ":" + std::to_string(at.port);
  Connection c(st);
  auto authenticate = [&](const std::string& user, const std::string& password, const char* whose) {
    std::vector<std::string> auth{"AUTH"};
    if (!user.empty()) auth.push_back(user);
    auth.push_back(password);
    if (is_error(*c.raw(auth))) throw UnavailableError("redis: " + st.where + " refused " + whose);
  };
  if (!s.password.empty()) authenticate(s.user, s.password, "sentinel-password");
  const std::vector<std::string> question{"SENTINEL", "get-master-addr-by-name", s.master};
  auto r = c.raw(question);
  if (is_error(*r, "NOAUTH") && s.password.empty()) {
    if (t.password.empty())
      throw UnavailableError("redis: " + st.where + " asks for a password (give it as sentinel-password)");
    authenticate(t.user, t.password, "the URL's credentials (a Sentinel's own go in sentinel-password)");
    r = c.raw(question);
  }
  if (is_error(*r)) c.fail_reply(*r);
  if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ARRAY && r->elements == 0))
    throw UnavailableError("redis: " + st.where + " monitors no master named '" + s.master + "'");
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING)
    throw InternalError("redis: unexpected answer from " + st.where + " to SENTINEL get-master-addr-by-name");
  HostPort hp;
  hp.host.assign(r->element[0]->str, r->element[0]->len);
  hp.port = static_cast<int>(as_int(*r->element[1]));
  return hp;
}

}  // namespace

// A Sentinel can be stale (it has not yet seen a failover, or is cut off from the others), so
// the server it names must itself say it is the master; otherwise the next Sentinel is asked.
// Each Sentinel gets at most a second: they answer from memory.
void Connection::open_primary(const Target& t, milliseconds connect_timeout) {
  const auto& s = *t.sentinels;
  const auto ask_timeout = std::min(connect_timeout, milliseconds{1000});
  const std::size_t n = s.addresses.size(), first = s.preferred.load() % n;
  std::string why;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (first + k) % n;
    Target node = t;
    node.sentinels = nullptr;
    try {
      auto hp = ask(s.addresses[i], s, t, ask_timeout);
      node.host = hp.host;
      node.port = hp.port;
      where_ = t.where + " (primary " + hp.host + ":" + std::to_string(hp.port) + ")";
      open_node(node, connect_timeout);
      auto role = command({"ROLE"});
      if (role->type == REDIS_REPLY_ARRAY && role->elements > 0 && role->element[0]->type == REDIS_REPLY_STRING &&
          std::string(role->element[0]->str, role->element[0]->len) == "master") {
        s.preferred = i;
        follows_primary_ = true;
        asked_ = std::make_unique<Target>(t);
        master_host_ = hp.host;
        master_port_ = hp.port;
        confirmed_ = std::chrono::steady_clock::now();
        return;
      }
      why = "sentinel " + s.addresses[i].host + ":" + std::to_string(s.addresses[i].port) + " named " + hp.host +
            ":" + std::to_string(hp.port) + ", which is not a master";
    } catch (const Error& e) {
      why = e.what();
      if (why.rfind("redis: ", 0) == 0) why.erase(0, 7);
    }
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
  }
  where_ = t.where;
  // The last reason only: one line, and the others are usually the same.
  throw UnavailableError("redis: no master '" + s.master + "' found through " + t.where + ": " + why);
}

// One Sentinel (the one that last named a master that proved right) is asked: another name
// means a failover happened, and the connection goes. One that cannot answer, or has not yet
// heard of a failover, leaves it: the next check, or the server's own READONLY once the
// Sentinels reconfigure it, catches up.
bool Connection::master_still_here() noexcept {
  const auto now = std::chrono::steady_clock::now();
  if (!asked_ || now - confirmed_ < reconfirm_every) return true;
  confirmed_ = now;
  try {
    const auto& s = *asked_->sentinels;
    const auto ask_timeout = std::min(asked_->connect_timeout, milliseconds{1000});
    auto hp = ask(s.addresses[s.preferred.load() % s.addresses.size()], s, *asked_, ask_timeout);
    return hp.host == master_host_ && hp.port == master_port_;
  } catch (const std::exception&) {
    return true;
  }
}

}  // namespace dblock::detail::redis
