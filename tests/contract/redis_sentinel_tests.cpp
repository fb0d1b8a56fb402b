// What only redis-sentinel:// adds to the redis strategy (whose promises the contract suite's
// SentinelLock fixture checks): its URL, finding the master through the Sentinels, and the
// replicas=N option. Failovers are tests/faults/failover_tests.cpp's.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "contract/fixtures.hpp"
#include "core/url.hpp"
#include "support/redis_db.hpp"

using namespace std::chrono_literals;

namespace {

std::string sentinel_url() { return dblock::test::server_url("DBLOCK_TEST_REDIS_SENTINEL_URL"); }

// The error's message, which must be one line, and its kind.
std::pair<std::string, dblock::ErrorKind> open_error(const std::string& url, const dblock::ClientOptions& o = {}) {
  try {
    dblock::Client::open(url, o);
  } catch (const dblock::Error& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    return {what, e.kind()};
  }
  FAIL("no error for " << url);
  return {};
}

}  // namespace

TEST_CASE("redis-sentinel: bad URLs are one-line usage errors", "[redis-sentinel]") {
  struct Case {
    const char* url;
    const char* says;
  };
  for (auto c : {Case{"redis-sentinel://127.0.0.1:26379", "the master's name is missing"},
                 Case{"redis-sentinel://127.0.0.1:26379/", "the master's name is missing"},
                 Case{"redis-sentinel:///dblock", "no host"},
                 Case{"redis-sentinel://127.0.0.1:0/dblock", "port must be a number"},
                 Case{"redis-sentinel://127.0.0.1:70000/dblock", "port must be a number"},
                 Case{"redis-sentinel://127.0.0.1:26379/dblock/3", "is not a master name"},
                 Case{"redis-sentinel://127.0.0.1:26379/dblock?db=x", "db must be a number"},
                 Case{"redis-sentinel://127.0.0.1:26379/dblock?replicas=-1", "replicas must be a number"},
                 Case{"redis-sentinel://127.0.0.1:26379/dblock?timeout=1s", "unknown redis-sentinel URL parameter"},
                 Case{"redis-sentinel://127.0.0.1:26379/dblock?sentinel-user=u", "sentinel-user needs sentinel-password"},
                 Case{"redis-sentinel://127.0.0.1:26379/dblock?sentinel-password=", "sentinel-password is empty"},
                 Case{"redis-sentinel://127.0.0.1:26379/dblock?sentinel-password=secret&x=1", "unknown redis-sentinel URL parameter"},
                 Case{"redis-sentinel://:secret@127.0.0.1:26379", "the master's name is missing"}}) {
    INFO(c.url);
    auto [what, kind] = open_error(c.url);
    CHECK(kind == dblock::ErrorKind::usage);
    CHECK_THAT(what, Catch::Contains(c.says));
    CHECK_THAT(what, !Catch::Contains("secret"));
  }
}

TEST_CASE("redis-sentinel: strategy redlock is refused; redis works on the master", "[redis-sentinel]") {
  auto c = dblock::Client::open(dblock::test::with_fresh_redis_db(sentinel_url()));
  CHECK(c->backend() == "redis-sentinel");
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::redlock;
  try {
    (void)c->lock("x", o).try_acquire();
    FAIL("redlock was not refused");
  } catch (const dblock::UsageError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("independent nodes"));
  }
  o.strategy = dblock::Strategy::redis;
  auto l = c->lock("x", o).try_acquire();
  REQUIRE(l);
  CHECK(l->fence() > 0);
}

TEST_CASE("redis-sentinel: a dead Sentinel is skipped; an unknown master is unavailable", "[redis-sentinel]") {
  auto url = dblock::detail::parse_url(sentinel_url());
  // Port 1: nothing listens there, so the connect is refused at once.
  auto with_dead = "redis-sentinel://127.0.0.1:1," + url.original.substr(url.original.find("//") + 2);
  auto c = dblock::Client::open(dblock::test::with_fresh_redis_db(with_dead));
  CHECK(c->lock("x").try_acquire());
  auto unknown = url.original.substr(0, url.original.rfind('/')) + "/no-such-master";
  auto [what, kind] = open_error(unknown);
  CHECK(kind == dblock::ErrorKind::unavailable);
  CHECK_THAT(what, Catch::Contains("monitors no master named 'no-such-master'"));
}

// More replicas than the topology has: WAIT never gets them, so no grant is answered, and the
// grant each try made is given back (the name stays free).
TEST_CASE("redis-sentinel: with replicas=N a grant only counts once N replicas have it", "[redis-sentinel]") {
  const auto url = dblock::test::with_fresh_redis_db(sentinel_url());
  dblock::ClientOptions o;
  o.statement_timeout = 1s;  // how long an attempt keeps trying; WAIT waits half of it
  auto two = dblock::Client::open(url + "&replicas=2", o);
  const auto start = std::chrono::steady_clock::now();
  try {
    (void)two->lock("w").try_acquire();
    FAIL("granted without the replicas asked for");
  } catch (const dblock::UnavailableError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("replicas=2"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  auto one = dblock::Client::open(url + "&replicas=1", o);
  auto l = one->lock("w").try_acquire();  // free: the failed grants were given back
  REQUIRE(l);
  l->release();
}

// Measured, not asserted: the median uncontended acquire + release cycle on the master
// directly (redis://), through the Sentinels, and with replicas=1 (each grant then also
// waits for the replica's acknowledgement of its WAIT). Printed for docs/ARCHITECTURE.md.
TEST_CASE("redis-sentinel: what following the master and replicas=1 cost, uncontended", "[redis-sentinel]") {
  const auto url = dblock::test::with_fresh_redis_db(sentinel_url());
  const auto parsed = dblock::detail::parse_url(url);
  const auto master = dblock::test::sentinel_master(parsed);
  const auto direct = "redis://" + master.host + ":" + std::to_string(master.port) + "/" + parsed.query.at("db");
  auto median_us = [](const std::string& u) {
    auto c = dblock::Client::open(u);
    auto lock = c->lock("cycle");
    std::vector<long long> us;
    for (int i = 0; i < 400; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto l = lock.try_acquire();
      REQUIRE(l);
      l->release();
      const auto took = std::chrono::steady_clock::now() - t0;
      us.push_back(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  // Interleaved twice, so that a slow stretch of the shared machine does not land on one only.
  for (int pass = 1; pass <= 2; ++pass) {
    const auto d = median_us(direct), s = median_us(url), w = median_us(url + "&replicas=1");
    std::printf("pass %d: p50 acquire+release: redis:// %lld us, redis-sentinel:// %lld us, replicas=1 %lld us\n",
                pass, d, s, w);
  }
}
