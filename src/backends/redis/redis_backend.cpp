// The redis and redlock backends: URL parsing, and what is not a lock attempt (list, force
// release). Redis expires keys itself, so there is nothing to sweep and no schema to migrate.
#include "backends/redis/redis_backend.hpp"

#include <algorithm>
#include <map>

#include "backends/redis/redis_driver.hpp"
#include "backends/redis/redis_sentinel.hpp"
#include "backends/redis/redis_settings.hpp"
#include "backends/redis/redlock_driver.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail {

namespace redis {
namespace {

Target base_target(const Url& url, const ClientOptions& o) {
  Target t;
  t.tls = tls_of(url);
  t.user = url.user;
  t.password = url.password;
  t.connect_timeout = o.connect_timeout;
  t.command_timeout = o.statement_timeout;
  if (!url.path.empty()) {
    bool digits = url.path.size() <= 4 &&
                  std::all_of(url.path.begin(), url.path.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits)
      throw UsageError(url.scheme + " URL: the path is a database number (redis://host:port/0), not '" + url.path +
                       "'");
    t.db = std::stoi(url.path);
  }
  return t;
}

Target node_target(Target t, const HostPort& hp, const std::string& scheme) {
  t.host = hp.host.empty() ? "127.0.0.1" : hp.host;
  t.port = hp.port ? hp.port : 6379;
  t.where = scheme + "://" + t.host + ":" + std::to_string(t.port);  // never the password
  return t;
}

// Describes the leases held now on one server. Every name ever granted has a fence
// counter, so SCANning the counters finds every lease (and names no longer held, whose
// describe answers nil); the describes of one SCAN batch go out pipelined, as EVAL of the
// text, which cannot meet NOSCRIPT.
std::vector<LeaseInfo> list_on(Connection& c) {
  std::vector<LeaseInfo> out;
  std::string cursor = "0";
  const auto& prefix = keys::fence_prefix;
  auto ms = [](std::int64_t v) { return std::chrono::system_clock::time_point(milliseconds{v}); };
  do {
    auto r = c.command({"SCAN", cursor, "MATCH", prefix + "*", "COUNT", "1000"});
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) throw InternalError("redis: unexpected SCAN answer");
    cursor.assign(r->element[0]->str, r->element[0]->len);
    const auto& found = *r->element[1];
    std::vector<std::string> names;
    for (std::size_t i = 0; i < found.elements; ++i)
      names.emplace_back(std::string(found.element[i]->str, found.element[i]->len).substr(prefix.size()));
    for (const auto& name : names) c.append_eval(describe_script(), false, {name}, {});
    std::vector<Reply> described;  // all read before any is checked: none left on the connection
    for (std::size_t i = 0; i < names.size(); ++i) described.push_back(c.read());
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto& d = described[i];
      if (is_error(*d)) c.fail_reply(*d);
      if (d->type != REDIS_REPLY_ARRAY || d->elements < 1) continue;  // not held now
      auto now = as_int(*d->element[0]);
      for (std::size_t j = 1; j < d->elements; ++j) {  // one per holder: a record, or a hash's holders
        const auto& h = *d->element[j];
        if (h.type != REDIS_REPLY_ARRAY || h.elements != 6) continue;
        LeaseInfo li;
        li.name = names[i];
        li.owner.assign(h.element[0]->str, h.element[0]->len);
        li.fence = static_cast<std::uint64_t>(as_int(*h.element[1]));
        li.holds = static_cast<std::uint32_t>(as_int(*h.element[2]));
        li.acquired_at = ms(as_int(*h.element[3]));
        li.expires_at = ms(now + std::max<std::int64_t>(0, as_int(*h.element[4])));
        li.mode = std::string(h.element[5]->str, h.element[5]->len) == "s" ? Mode::shared : Mode::exclusive;
        out.push_back(std::move(li));
      }
    }
  } while (cursor != "0");
  std::sort(out.begin(), out.end(), [](const LeaseInfo& a, const LeaseInfo& b) {
    return a.name != b.name ? a.name < b.name : a.fence < b.fence;
  });
  return out;
}

class RedisBackend final : public Backend {
 public:
  RedisBackend(Target t, const ClientOptions& o, Failover failover = {})
      : pool_(opener(t), pool_limits(t, o.pool_size)),
        feed_(o.notifications ? shared_release_feed(std::vector<Target>{t}, keys::channel, true) : nullptr),
        failover_(failover),
        name_(t.sentinels ? "redis-sentinel" : "redis") {
    pool_.get();  // connect now: an unreachable server or refused credentials fail here
  }
  std::string_view name() const noexcept override { return name_; }
  std::vector<Strategy> strategies() const override { return {Strategy::redis}; }
  // Read/write locks and semaphores on a hash of holders (redis_scripts.hpp); Redlock offers
  // neither (docs/ARCHITECTURE.md, "Lock shapes").
  Shapes shapes(Strategy s) const override { return s == Strategy::redis ? Shapes{true, true} : Shapes{}; }
  void check_name(const std::string& name) const override { keys::check_name(name); }
  std::unique_ptr<LockDriver> make_driver(Strategy s) override {
    if (s == Strategy::redlock && name_ == "redis-sentinel")
      throw UsageError("strategy redlock needs independent nodes (redlock://host:port,...): a Sentinel-managed "
                       "master and its replicas are one copy of the data; use strategy redis here");
    if (s != Strategy::redis)
      throw UsageError("the " + name_ + " backend offers strategy redis only, not " +
                       std::string(to_string(s)));
    return std::make_unique<RedisDriver>(pool_, feed_.get(), failover_);
  }
  std::vector<std::string> migrate() override { return {}; }  // no schema: keys are made as needed
  std::size_t sweep(std::size_t) override { return 0; }       // the server expires keys itself
  std::vector<LeaseInfo> list() override {
    auto c = pool_.get();
    return list_on(*c);
  }
  bool force_release(const std::string& name) override {
    auto c = pool_.get();
    auto reply = c->eval(force_release_script(), {name, keys::queue(name), keys::alive(name)}, {keys::channel});
    return as_int(*reply) == 1;
  }
  std::vector<SettingCheck> check_settings() override {
    auto c = pool_.get();
    return read_settings(*c);
  }
  // The TLS version a pooled connection negotiated; OpenSSL checked the chain and the name.
  std::optional<Transport> transport() override {
    auto c = pool_.get();
    auto version = c->tls_version();
    return Transport{version, !version.empty(), !version.empty()};
  }

 private:
  ConnectionPool pool_;
  std::shared_ptr<RedisFeed> feed_;  // shared with the process's other Clients on this server
  const Failover failover_;
  const std::string name_;
};

class RedlockBackend final : public Backend {
 public:
  RedlockBackend(std::vector<Target> nodes, const ClientOptions& o)
      : nodes_(nodes, o.pool_size),
        statement_timeout_(o.statement_timeout),
        feed_(o.notifications ? shared_release_feed(nodes, keys::channel, false) : nullptr) {
    nodes_.connect_all();
  }
  std::string_view name() const noexcept override { return "redlock"; }
  std::vector<Strategy> strategies() const override { return {Strategy::redlock}; }
  void check_name(const std::string& name) const override { keys::check_name(name); }
  std::unique_ptr<LockDriver> make_driver(Strategy s) override {
    if (s != Strategy::redlock)
      throw UsageError("the redlock backend offers strategy redlock only, not " + std::string(to_string(s)));
    return std::make_unique<RedlockDriver>(nodes_, feed_ ? &feed_->feed : nullptr, statement_timeout_);
  }
  std::vector<std::string> migrate() override { return {}; }
  std::size_t sweep(std::size_t) override { return 0; }
  // A lease is listed when a majority of the nodes that answer agree on its owner.
  std::vector<LeaseInfo> list() override {
    std::map<std::pair<std::string, std::string>, std::vector<LeaseInfo>> seen;
    std::size_t answered = 0;
    for (const auto& t : nodes_.targets()) {
      try {
        Connection c(t);
        for (auto& li : list_on(c)) seen[{li.name, li.owner}].push_back(std::move(li));
        ++answered;
      } catch (const Error&) {
      }
    }
    if (answered < nodes_.majority()) throw UnavailableError("redlock: fewer than a majority of the nodes answered");
    std::vector<LeaseInfo> out;
    for (auto& [key, v] : seen) {
      if (v.size() < nodes_.majority()) continue;
      LeaseInfo li = v.front();
      for (const auto& x : v) {
        li.fence = std::max(li.fence, x.fence);
        li.holds = std::max(li.holds, x.holds);
        li.acquired_at = std::min(li.acquired_at, x.acquired_at);
        li.expires_at = std::min(li.expires_at, x.expires_at);
      }
      out.push_back(std::move(li));
    }
    return out;
  }
  bool force_release(const std::string& name) override {
    auto answers =
        nodes_.eval_all(force_release_script(), {name}, {keys::channel}, statement_timeout_);
    return std::any_of(answers.begin(), answers.end(),
                       [](const NodeAnswer& a) { return a.ok() && as_int(*a.reply) == 1; });
  }
  std::optional<Transport> transport() override {  // every node alike: TLS checks the chain and the name
    const bool tls = nodes_.targets().front().tls != nullptr;
    return Transport{tls ? "TLS" : "", tls, tls};
  }
  // Every node on its own, named: one node that loses its keys lets a second client win
  // a majority with the nodes the first one did not need. A node down is `unknown`.
  std::vector<SettingCheck> check_settings() override {
    std::vector<SettingCheck> out;
    for (const auto& t : nodes_.targets()) {
      const auto prefix = t.host + ":" + std::to_string(t.port) + " ";
      std::vector<SettingCheck> node;
      try {
        Connection c(t);
        node = read_settings(c, prefix);
      } catch (const Error& e) {
        node = unreachable_settings(prefix, std::string("could not be read: ") + e.what());
      }
      out.insert(out.end(), node.begin(), node.end());
    }
    return out;
  }

 private:
  Nodes nodes_;
  milliseconds statement_timeout_;
  std::shared_ptr<RedisFeed> feed_;  // shared with the process's other Clients on these nodes
};

}  // namespace
}  // namespace redis

std::unique_ptr<Backend> open_redis(const Url& url, const ClientOptions& options) {
  if (url.hosts.size() > 1)
    throw UsageError("a redis URL names one server, not " + std::to_string(url.hosts.size()) +
                     " (for several independent nodes use redlock://host:port,host:port,...)");
  auto t = redis::base_target(url, options);
  t = redis::node_target(t, url.hosts.empty() ? HostPort{} : url.hosts[0], "redis");
  t.where = url.redacted();
  return std::make_unique<redis::RedisBackend>(t, options);
}

std::unique_ptr<Backend> open_redis_sentinel(const Url& url, const ClientOptions& options) {
  const std::string usage =
      "a redis-sentinel URL names the Sentinels and the master's name: "
      "redis-sentinel://[[user]:password@]host:port[,host:port...]/mastername"
      "[?db=N&replicas=N&sentinel-user=U&sentinel-password=P]";
  if (url.hosts.empty() || (url.hosts.size() == 1 && url.hosts[0].host.empty()))
    throw UsageError(usage + ", not no Sentinel");
  if (url.path.empty()) throw UsageError(usage + ": the master's name is missing");
  if (url.path.find('/') != std::string::npos)
    throw UsageError(usage + ": '" + url.path + "' is not a master name (the database goes in ?db=N)");
  auto number = [&](const std::string& key, int max) {
    const auto& v = url.query.at(key);
    bool digits = !v.empty() && v.size() <= 4 &&
                  std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoi(v) > max)
      throw UsageError("redis-sentinel URL: " + key + " must be a number from 0 to " + std::to_string(max) +
                       ", not '" + v + "'");
    return std::stoi(v);
  };
  Url plain = url;  // the redis:// options (TLS), without the ones read here
  const char* own[] = {"db", "replicas", "sentinel-user", "sentinel-password"};
  for (const char* key : own) plain.query.erase(key);
  plain.path.clear();
  redis::Failover failover;
  for (const auto& kv : url.query)
    if (std::find(std::begin(own), std::end(own), kv.first) == std::end(own) && kv.first.rfind("ssl-", 0) != 0)
      throw UsageError("unknown redis-sentinel URL parameter '" + kv.first +
                       "' (known: db, replicas, sentinel-user, sentinel-password, ssl-ca, ssl-cert, ssl-key)");
  if (url.query.count("sentinel-user") && !url.query.count("sentinel-password"))
    throw UsageError("redis-sentinel URL: sentinel-user needs sentinel-password");
  auto t = redis::base_target(plain, options);
  if (url.query.count("db")) t.db = number("db", 9999);
  if (url.query.count("replicas")) failover.replicas = number("replicas", 100);
  // A failover takes a few seconds (the Sentinels' down-after-milliseconds, their election,
  // the promotion): an attempt looks for the new master for up to one statement timeout.
  failover.retry_for = options.statement_timeout;
  failover.wait_timeout = std::max(milliseconds{1}, options.statement_timeout / 2);
  auto sentinels = std::make_shared<redis::Sentinels>();
  sentinels->master = url.path;
  if (url.query.count("sentinel-password")) {
    sentinels->password = url.query.at("sentinel-password");
    if (sentinels->password.empty()) throw UsageError("redis-sentinel URL: sentinel-password is empty");
    if (url.query.count("sentinel-user")) sentinels->user = url.query.at("sentinel-user");
  }
  for (const auto& hp : url.hosts)
    sentinels->addresses.push_back(HostPort{hp.host, hp.port ? hp.port : 26379});
  t.sentinels = std::move(sentinels);
  t.host.clear();
  t.port = 0;
  t.where = url.redacted();
  return std::make_unique<redis::RedisBackend>(t, options, failover);
}

std::unique_ptr<Backend> open_redlock(const Url& url, const ClientOptions& options) {
  if (url.hosts.empty() || url.hosts.size() % 2 == 0 || (url.hosts.size() == 1 && url.hosts[0].host.empty()))
    throw UsageError(
        "a redlock URL names an odd number of independent nodes (redlock://host:port,host:port,host:port), not " +
        std::to_string(url.hosts.size() == 1 && url.hosts[0].host.empty() ? 0 : url.hosts.size()));
  auto base = redis::base_target(url, options);
  std::vector<redis::Target> nodes;
  for (const auto& hp : url.hosts) nodes.push_back(redis::node_target(base, hp, "redlock"));
  return std::make_unique<redis::RedlockBackend>(std::move(nodes), options);
}

}  // namespace dblock::detail
