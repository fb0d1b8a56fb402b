// dblock-bench on Redis and Redlock: the redis and redlock strategies next to bare hiredis
// round trips to the same servers: `select1` = PING (the one-round-trip floor; named like the
// SQL backends' SELECT 1 so that the report's `x select1` column compares alike), and
// `set-nx-px+del` = SET k v NX PX 30000 then DEL k, the two commands a plain Redis lock cannot
// avoid, and `fenced-floor`: the least script work a *fenced* lock must do (SET NX PX + INCR
// in one EVALSHA, compare + DEL in another), so the report separates the protocol's cost from
// the library's. For redlock each baseline goes to every node at once (pipelined on one
// connection per node, replies read after all were sent, until a majority answered: the
// protocol needs no more, and the library waits for no more either), as the strategy does; a redlock
// grant whose nodes' counters are in step needs no fence write-back round (docs/ARCHITECTURE.md,
// "Redis and Redlock": fences across majorities), so its floor is the same two rounds.
#include <hiredis/hiredis.h>
#include <poll.h>

#include <functional>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "bench/backends/registry.hpp"
#include "bench/floors/floor.hpp"
#include "bench/floors/redis_floor.hpp"
#include "bench/scenarios/peers.hpp"
#include "bench/support/util.hpp"
#include "backends/redis/redis_connection.hpp"  // the tls floor: the library's connection over TLS
#include "backends/redis/redis_tls.hpp"
#include "core/url.hpp"  // the library's own URL parser: the baselines reach the same servers

namespace dblock_bench {

std::optional<std::string> redis_skip_reason() {
  if (!env_url("DBLOCK_TEST_REDIS_URL"))
    return std::string("DBLOCK_TEST_REDIS_URL is not set (eval \"$(scripts/services env redis)\")");
  return std::nullopt;
}

std::optional<std::string> redlock_skip_reason() {
  if (!env_url("DBLOCK_TEST_REDLOCK_URL"))
    return std::string("DBLOCK_TEST_REDLOCK_URL is not set (eval \"$(scripts/services env redlock)\")");
  return std::nullopt;
}

namespace {

struct Free {
  void operator()(redisContext* c) const { redisFree(c); }
  void operator()(redisReply* r) const { freeReplyObject(r); }
};

// Bare hiredis connections to the URL's servers (one for redis, one per node for redlock).
class Nodes {
 public:
  explicit Nodes(const std::string& url) {
    auto u = dblock::detail::parse_url(url);
    for (const auto& hp : u.hosts) {
      std::unique_ptr<redisContext, Free> c(redisConnect(hp.host.empty() ? "127.0.0.1" : hp.host.c_str(), hp.port ? hp.port : 6379));
      if (!c || c->err) throw std::runtime_error("redis baseline: cannot connect: " + std::string(c ? c->errstr : "?"));
      if (!u.password.empty()) send_all({u.user.empty() ? std::vector<std::string>{"AUTH", u.password}
                                                        : std::vector<std::string>{"AUTH", u.user, u.password}}, c.get());
      nodes_.push_back(std::move(c));
    }
    owed_.assign(nodes_.size(), 0);
  }
  // Sends the commands to every node (all of them before reading), then reads the replies in
  // the order they arrive until a majority of the nodes has answered them all, as the
  // library's Redlock does for a release; the others' replies are read (and dropped) ahead
  // of the next call's. Returns the replies' integers (or 1 for OK / PONG, 0 for nil) of
  // the first node to answer them all. One node: every reply, in order.
  std::vector<long long> all(const std::vector<std::vector<std::string>>& cmds) {
    const std::size_t n = nodes_.size(), majority = n / 2 + 1;
    for (auto& c : nodes_)
      for (const auto& cmd : cmds) append(c.get(), cmd);
    for (auto& c : nodes_) {
      int done = 0;
      while (!done)
        if (redisBufferWrite(c.get(), &done) != REDIS_OK) throw std::runtime_error("redis baseline: write failed");
    }
    std::vector<std::size_t> need(n);
    for (std::size_t i = 0; i < n; ++i) need[i] = owed_[i] + cmds.size();
    std::vector<std::vector<long long>> got(n);
    std::size_t answered = 0, first = n;
    std::vector<pollfd> fds;
    while (answered < majority) {
      for (std::size_t i = 0; i < n && answered < majority; ++i) {
        void* r = nullptr;
        while (need[i] > 0 && redisGetReplyFromReader(nodes_[i].get(), &r) == REDIS_OK && r) {
          auto v = value(static_cast<redisReply*>(r));
          r = nullptr;
          if (--need[i] < cmds.size()) got[i].push_back(v);  // this call's (the owed ones come first)
          if (need[i] == 0 && answered++ == 0) first = i;
        }
      }
      if (answered >= majority) break;
      fds.clear();
      for (std::size_t i = 0; i < n; ++i) fds.push_back(pollfd{nodes_[i]->fd, static_cast<short>(need[i] ? POLLIN : 0), 0});
      if (::poll(fds.data(), fds.size(), 5000) <= 0) throw std::runtime_error("redis baseline: no answer in 5 s");
      for (std::size_t i = 0; i < n; ++i)
        if (fds[i].revents && redisBufferRead(nodes_[i].get()) != REDIS_OK)
          throw std::runtime_error("redis baseline: read failed");
    }
    for (std::size_t i = 0; i < n; ++i) owed_[i] = need[i];
    return got[first];
  }
  // Loads a Lua script on every node; its SHA1 (the same everywhere).
  std::string load(const std::string& text) {
    drain();
    std::string sha;
    for (auto& c : nodes_) {
      std::unique_ptr<redisReply, Free> r(static_cast<redisReply*>(redisCommand(c.get(), "SCRIPT LOAD %s", text.c_str())));
      if (!r || r->type != REDIS_REPLY_STRING) throw std::runtime_error("redis baseline: SCRIPT LOAD failed");
      sha.assign(r->str, r->len);
    }
    return sha;
  }
  // The first node's answer to a command whose reply is a string or an array of strings,
  // joined with newlines (INFO, CONFIG GET).
  std::string text(const std::vector<std::string>& cmd) {
    drain();
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : cmd) argv.push_back(a.c_str()), lens.push_back(a.size());
    std::unique_ptr<redisReply, Free> r(static_cast<redisReply*>(
        redisCommandArgv(nodes_.front().get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
    if (!r) return {};
    if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) return std::string(r->str, r->len);
    std::string out;
    if (r->type == REDIS_REPLY_ARRAY)
      for (std::size_t i = 0; i < r->elements; ++i)
        if (r->element[i]->type == REDIS_REPLY_STRING)
          out += (i ? "\n" : "") + std::string(r->element[i]->str, r->element[i]->len);
    return out;
  }
  std::size_t size() const { return nodes_.size(); }
  std::vector<std::string> keys(const std::string& pattern) {  // every node's keys matching
    drain();
    std::vector<std::string> out;
    for (auto& c : nodes_) {
      std::unique_ptr<redisReply, Free> r(static_cast<redisReply*>(redisCommand(c.get(), "KEYS %s", pattern.c_str())));
      if (r && r->type == REDIS_REPLY_ARRAY)
        for (std::size_t i = 0; i < r->elements; ++i) out.emplace_back(r->element[i]->str, r->element[i]->len);
    }
    return out;
  }
  void del_everywhere(const std::vector<std::string>& keys) {
    for (const auto& k : keys) all({{"DEL", k}});
  }

 private:
  static void append(redisContext* c, const std::vector<std::string>& cmd) {
    std::vector<const char*> p;
    std::vector<size_t> len;
    for (const auto& a : cmd) p.push_back(a.c_str()), len.push_back(a.size());
    redisAppendCommandArgv(c, static_cast<int>(cmd.size()), p.data(), len.data());
  }
  static long long read(redisContext* c) {
    void* out = nullptr;
    if (redisGetReply(c, &out) != REDIS_OK || !out) throw std::runtime_error("redis baseline: read failed");
    return value(static_cast<redisReply*>(out));
  }
  static long long value(redisReply* reply) {  // takes ownership
    std::unique_ptr<redisReply, Free> r(reply);
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("redis baseline: " + std::string(r->str, r->len));
    if (r->type == REDIS_REPLY_INTEGER) return r->integer;
    return r->type == REDIS_REPLY_NIL ? 0 : 1;
  }
  void drain() {  // the replies all() left unread, before a blocking command
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      for (; owed_[i] > 0; --owed_[i]) read(nodes_[i].get());
  }
  void send_all(const std::vector<std::vector<std::string>>& cmds, redisContext* c) {
    for (const auto& cmd : cmds) append(c, cmd);
    for (std::size_t i = 0; i < cmds.size(); ++i) read(c);
  }
  std::vector<std::unique_ptr<redisContext, Free>> nodes_;
  std::vector<std::size_t> owed_;  // per node: replies all() did not wait for
};

BackendReport run_keyed(const std::string& backend, const char* var, dblock::Strategy strategy, const Options& opt) {
  const std::string url = env_url(var);
  dblock::ClientOptions client_options;
  ScratchTable table(backend, [&](const std::string& name) {  // the run's keys, deleted at the end
    Nodes n(url);
    n.del_everywhere(n.keys(name + ":*"));
    n.del_everywhere(n.keys("dblock_locks:fence:bench-*"));  // the locks' counters (one per name, not per table)
    n.del_everywhere({"bench-bare-set-nx", "bench-bare-fenced", "bench-bare-fenced:fence"});
  });
  auto first = dblock::Client::open(url, client_options);
  fmt::print(stderr, "dblock-bench: {}: at {}\n", backend, first->url());

  Nodes nodes(url);
  auto check = [&](bool ok, const char* what) {
    if (!ok) throw std::runtime_error(fmt::format("{} baseline {}", backend, what));
  };
  auto ping = [&] { check(nodes.all({{"PING"}}).at(0) == 1, "select1: PING did not answer PONG"); };
  auto set_del = [&] {
    auto r = nodes.all({{"SET", "bench-bare-set-nx", "x", "NX", "PX", "30000"}});
    check(r.at(0) == 1, "set-nx-px+del: SET NX on a free key did not answer OK");
    check(nodes.all({{"DEL", "bench-bare-set-nx"}}).at(0) == 1, "set-nx-px+del: DEL found no key");
  };

  // What a fenced lock cannot avoid, in the fewest scripts: a grant must SET NX PX *and*
  // take the next fence atomically, a release must compare its token before DEL; both need
  // a script (or MULTI after WATCH: more round trips).
  const std::string take_sha = nodes.load(
      "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end "
      "return 0");
  const std::string free_sha = nodes.load(
      "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0");
  const bool redlock = backend == "redlock";
  auto fenced = [&] {
    auto f = nodes.all({{"EVALSHA", take_sha, "2", "bench-bare-fenced", "bench-bare-fenced:fence", "x", "30000"}});
    check(f.at(0) > 0, "fenced-floor: the take script did not grant a free key");
    check(nodes.all({{"EVALSHA", free_sha, "1", "bench-bare-fenced", "x"}}).at(0) == 1,
          "fenced-floor: the free script found no key");
  };

  BackendReport rep;
  {
    // "redis_version:7.0.15" in INFO's text; CONFIG GET answers its name, then its value.
    const std::string info = nodes.text({"INFO", "server"});
    std::string version = "?";
    if (auto at = info.find("redis_version:"); at != std::string::npos)
      version = info.substr(at + 14, info.find_first_of("\r\n", at) - at - 14);
    auto setting = [&](const std::string& name) {
      auto t = nodes.text({"CONFIG", "GET", name});
      auto nl = t.find('\n');
      return nl == std::string::npos ? std::string("?") : t.substr(nl + 1);
    };
    rep.server = fmt::format("{}Redis {}, hiredis {}.{}.{}; appendonly={}, appendfsync={}{}",
                             redlock ? fmt::format("{} nodes, ", nodes.size()) : "", version, HIREDIS_MAJOR,
                             HIREDIS_MINOR, HIREDIS_PATCH, setting("appendonly"), setting("appendfsync"),
                             redlock ? " (the first node's)" : "");
  }
  rep.notes.push_back(fmt::format(
      "{0}: {1} at {2}, hiredis {3}.{4}.{5}; the run's keys ({6}:* and the counters of its locks) deleted at the end. "
      "Baselines (bare hiredis{7}): "
      "`select1` = PING (1 round trip), `set-nx-px+del` = `SET k v NX PX 30000` + `DEL k` (2 round trips); the "
      "{0} strategy is one EVALSHA to acquire and one to release{8}",
      backend, backend == "redis" ? "server" : "nodes", first->url(), HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH,
      table.name(),
      backend == "redis" ? ""
                         : ", each command to every node at once, its answers read until a majority of the nodes "
                           "answered, as the library does",
      backend == "redis" ? ""
                         : ", each to every node at once (a third round, the fence write-back, only when the "
                           "granting nodes' counters disagree)"));
  ServerRun run;
  run.backend = backend;
  run.url = url;
  run.client_options = client_options;
  run.first = first;
  run.strategies = {strategy};
  run.baselines = {{"select1", ping, {}}, {"set-nx-px+del", set_del, {}}, {"fenced-floor", fenced, {}}};
  run.compared_with = {{backend, {"set-nx-px+del", "fenced-floor"}}, {"fenced-floor", {"set-nx-px+del"}}};
  rep.notes.push_back(fmt::format(
      "{0} baselines beyond the issue's `set-nx-px+del`: `fenced-floor` = the least a fenced lock must send: EVALSHA "
      "of `SET NX PX` + `INCR` (one atomic step), then EVALSHA of GET-compare + `DEL` (2 round trips, 2 scripts{1}); "
      "{0} vs `set-nx-px+del / fenced-floor` separates the cost of scripting (the protocol) from the library's own "
      "(grant record, re-entry, listing{2})",
      backend, redlock ? ", each to every node at once" : "", redlock ? ", majority counting" : ""));
  if (!redlock && opt.wants_scenario("handoff"))
    run.floors.push_back({"bare-pubsub-handoff", {backend}, [url, prefix = table.name()](std::size_t w, std::size_t n) {
                            return run_redis_floor_handoff(url, prefix, w, n);
                          }});
  auto report = run_server(std::move(run), opt);
  if (!redlock && opt.wants_scenario("handoff")) {
    rep.notes.push_back(
        "redis `bare-pubsub-handoff`, the hand-off floor: 8 threads on hiredis, each on a connection of its own, "
        "contend for one key with the least a fenced lock sends: the grant one EVALSHA (`SET key owner NX PX 30000` "
        "and, when that took it, `INCR` of a fence counter: dblock's acquire script makes the same round trip, with "
        "a record for a value and its fence never below the server's clock), the release one EVALSHA (GET-compare "
        "the owner, `DEL`, `PUBLISH`, as dblock's release script, which publishes only when a waiter flagged the "
        "grant), and nothing else of dblock's; one subscribed connection wakes the longest waiting thread per "
        "message (dblock's one subscriber per process wakes one watch per name), which tries once more; no "
        "barging, latency from the release call to the next grant, as in `handoff`. The redis `handoff` row: "
        "ratio to it first");
  }
  rep.rows = std::move(report.rows);
  rep.notes.insert(rep.notes.end(), report.notes.begin(), report.notes.end());
  const Peer peer =
      redlock ? Peer{"@sesamecare-oss/redlock", "redlock.js", PeerRuntime::node,
                     "new Redlock(one ioredis client per node).acquire([name], 30000), lock.release(), at "
                     "its defaults: a refused attempt polls again after 200 +- 100 ms, 10 times, then "
                     "acquire() throws and is called again, until 60 s have passed; an attempt keeps the "
                     "nodes it got until its acquire() throws"}
              : Peer{"redis-py", "redis_py_lock.py", PeerRuntime::python,
                     "redis.Redis.from_url(url).lock(name, timeout=30).acquire(blocking_timeout=60), the "
                     "rest at its defaults: a waiter polls every 0.1 s"};
  auto peers = run_peer_scenario(backend, url, {strategy}, peer, opt);
  rep.rows.insert(rep.rows.end(), peers.rows.begin(), peers.rows.end());
  rep.notes.insert(rep.notes.end(), peers.notes.begin(), peers.notes.end());
  return rep;
}

}  // namespace

std::function<void()> redis_bare_cycle(const std::string& url, const std::string& /*table*/) {
  namespace r = dblock::detail::redis;
  auto u = dblock::detail::parse_url(url);
  if (u.hosts.empty()) throw std::runtime_error("redis: no server in " + u.redacted());
  r::Target t;
  t.host = u.hosts[0].host.empty() ? "127.0.0.1" : u.hosts[0].host;
  t.port = u.hosts[0].port ? u.hosts[0].port : 6379;
  t.user = u.user;
  t.password = u.password;
  t.where = u.redacted();
  // The URL's transport as the library reads it (rediss://, or ssl-* parameters), on the
  // library's own connection class: hiredis' reader over OpenSSL, as a lock's connection.
  auto tls_only = u;
  for (auto it = tls_only.query.begin(); it != tls_only.query.end();)
    it = it->first.rfind("ssl-", 0) == 0 ? std::next(it) : tls_only.query.erase(it);
  t.tls = r::tls_of(tls_only);
  auto c = std::make_shared<r::Connection>(t);
  return [c] {  // set-nx-px+del: two round trips, as an uncontended lock's grant and release
    auto set = c->command({"SET", "bench-tls-bare", "x", "NX", "PX", "30000"});
    if (set->type != REDIS_REPLY_STATUS) throw std::runtime_error("redis bare: SET NX found the key");
    c->command({"DEL", "bench-tls-bare"});
  };
}

BackendReport run_redis(const Options& opt) {
  return run_keyed("redis", "DBLOCK_TEST_REDIS_URL", dblock::Strategy::redis, opt);
}
BackendReport run_redlock(const Options& opt) {
  return run_keyed("redlock", "DBLOCK_TEST_REDLOCK_URL", dblock::Strategy::redlock, opt);
}

}  // namespace dblock_bench
