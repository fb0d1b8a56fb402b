#include "support/redis_db.hpp"

#include <hiredis/hiredis.h>

#include "backends/redis/redis_connection.hpp"

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <random>

namespace dblock::test {

std::string redis_raw(const dblock::detail::HostPort& hp, const std::vector<std::string>& argv, int db) {
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout(hp.host.c_str(), hp.port, tv);
  if (!c || c->err) {
    if (c) redisFree(c);
    return "";
  }
  auto command = [&](const std::vector<std::string>& args) {
    std::vector<const char*> p;
    std::vector<size_t> len;
    for (const auto& a : args) p.push_back(a.c_str()), len.push_back(a.size());
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), p.data(), len.data()));
    std::string out;
    if (r) {
      if (r->type == REDIS_REPLY_INTEGER)
        out = std::to_string(r->integer);
      else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->str)  // CONFIG GET's pair
        out.assign(r->element[1]->str, r->element[1]->len);
      else if (r->str)
        out.assign(r->str, r->len);
      freeReplyObject(r);
    }
    return out;
  };
  std::string out;
  if (db == 0 || command({"SELECT", std::to_string(db)}) == "OK") out = command(argv);
  redisFree(c);
  return out;
}

std::string redis_raw(const dblock::detail::Url& url, const dblock::detail::HostPort& hp,
                      const std::vector<std::string>& argv, int db) {
  auto tls = dblock::detail::redis::tls_of(url);
  if (!tls) return redis_raw(hp, argv, db);
  dblock::detail::redis::Target t;
  t.host = hp.host;
  t.port = hp.port;
  t.db = db;
  t.tls = tls;
  t.connect_timeout = t.command_timeout = std::chrono::seconds(2);
  t.where = "test server";
  try {
    dblock::detail::redis::Connection c(t);
    auto r = c.raw(argv);
    if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->str)  // CONFIG GET's pair
      return std::string(r->element[1]->str, r->element[1]->len);
    return r->str ? std::string(r->str, r->len) : std::string();
  } catch (const std::exception&) {
    return "";
  }
}

dblock::detail::HostPort sentinel_master(const dblock::detail::Url& url) {
  for (const auto& s : url.hosts) {
    timeval tv{2, 0};
    redisContext* c = redisConnectWithTimeout(s.host.c_str(), s.port ? s.port : 26379, tv);
    if (!c || c->err) {
      if (c) redisFree(c);
      continue;
    }
    auto* r =
        static_cast<redisReply*>(redisCommand(c, "SENTINEL get-master-addr-by-name %s", url.path.c_str()));
    dblock::detail::HostPort hp;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
      hp.host.assign(r->element[0]->str, r->element[0]->len);
      hp.port = std::stoi(std::string(r->element[1]->str, r->element[1]->len));
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    if (hp.port) return hp;
  }
  FAIL("no Sentinel of " << url.redacted() << " names a master '" << url.path << "'");
  return {};
}

namespace {
// The servers whose databases a test URL uses: its nodes, or the master its Sentinels name.
std::vector<dblock::detail::HostPort> data_servers(const dblock::detail::Url& url) {
  if (url.scheme == "redis-sentinel") return {sentinel_master(url)};
  return url.hosts;
}
}  // namespace

std::string with_fresh_redis_db(const std::string& url) {
  auto parsed = dblock::detail::parse_url(url);
  const bool sentinel = parsed.scheme == "redis-sentinel";
  REQUIRE(parsed.path.empty() == !sentinel);
  parsed.hosts = data_servers(parsed);
  REQUIRE_FALSE(parsed.hosts.empty());
  auto databases = redis_raw(parsed, parsed.hosts[0], {"CONFIG", "GET", "databases"});
  INFO("CONFIG GET databases on the first server: '" << databases << "'");
  REQUIRE(!databases.empty());
  const int n = std::stoi(databases);
  REQUIRE(n > 1);
  // Database 0 is left to the benchmark and to people trying things by hand.
  const int db = 1 + static_cast<int>(std::random_device{}() % static_cast<unsigned>(n - 1));
  for (const auto& hp : parsed.hosts) REQUIRE(redis_raw(parsed, hp, {"FLUSHDB"}, db) == "OK");
  if (sentinel) return url + (url.find('?') == std::string::npos ? "?db=" : "&db=") + std::to_string(db);
  auto query = std::min(url.find('?'), url.size());  // the database goes in the path, before any query
  return url.substr(0, query) + "/" + std::to_string(db) + url.substr(query);
}

void drop_redis_db(const std::string& url) noexcept {
  try {
    auto parsed = dblock::detail::parse_url(url);
    const int db = std::stoi(parsed.scheme == "redis-sentinel" ? parsed.query.at("db") : parsed.path);
    parsed.query.erase("db");
    for (const auto& hp : data_servers(parsed)) redis_raw(parsed, hp, {"FLUSHDB"}, db);
  } catch (...) {  // best effort: a test's leftovers, in a database nobody else picks soon
  }
}

}  // namespace dblock::test
