// parse_url and Url::redacted (src/core/url.hpp).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/url.hpp"
#include "dblock/errors.hpp"

using dblock::UsageError;
using dblock::detail::parse_url;
using dblock::detail::Url;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::size_t count_of(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

// The message of the UsageError parse_url throws for `text` (empty when it parses).
std::string error_of(const char* text) {
  try {
    parse_url(text);
  } catch (const dblock::UsageError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("parse_url: sqlite:PATH takes a relative path literally", "[url]") {
  auto u = parse_url("sqlite:dblock.db");
  CHECK(u.scheme == "sqlite");
  CHECK(u.path == "dblock.db");
  CHECK(u.hosts.empty());
  CHECK(u.password.empty());

  CHECK(parse_url("sqlite:./data/locks.db").path == "./data/locks.db");
  CHECK(parse_url("SQLite:x.db").scheme == "sqlite");
}

TEST_CASE("parse_url: sqlite:PATH takes an absolute path literally", "[url]") {
  auto u = parse_url("sqlite:/var/lib/dblock/locks.db");
  CHECK(u.scheme == "sqlite");
  CHECK(u.path == "/var/lib/dblock/locks.db");
}

TEST_CASE("parse_url: sqlite:///abs/path gives /abs/path", "[url]") {
  auto u = parse_url("sqlite:///abs/path");
  CHECK(u.scheme == "sqlite");
  CHECK(u.path == "/abs/path");
  CHECK(u.hosts.empty());
}

TEST_CASE("parse_url: a sqlite URL with a host is rejected", "[url]") {
  CHECK_THROWS_AS(parse_url("sqlite://host/x"), UsageError);
  CHECK_THROWS_AS(parse_url("sqlite://host"), UsageError);
  CHECK_THROWS_AS(parse_url("sqlite://"), UsageError);
}

TEST_CASE("parse_url: sqlite: without a path is rejected", "[url]") {
  CHECK_THROWS_AS(parse_url("sqlite:"), UsageError);
}

TEST_CASE("parse_url: postgresql URL with user, encoded password, host, port, path and query", "[url]") {
  auto u = parse_url("postgresql://user:p%40ss@host:5433/db?sslmode=disable");
  CHECK(u.scheme == "postgresql");
  CHECK(u.user == "user");
  CHECK(u.password == "p@ss");
  REQUIRE(u.hosts.size() == 1);
  CHECK(u.hosts[0].host == "host");
  CHECK(u.hosts[0].port == 5433);
  CHECK(u.path == "db");
  CHECK(u.query.size() == 1);
  CHECK(u.query.at("sslmode") == "disable");
  CHECK(u.original == "postgresql://user:p%40ss@host:5433/db?sslmode=disable");
}

TEST_CASE("parse_url: a host without a port gets port 0 (the backend's default)", "[url]") {
  auto u = parse_url("redis://cache.local");
  REQUIRE(u.hosts.size() == 1);
  CHECK(u.hosts[0].host == "cache.local");
  CHECK(u.hosts[0].port == 0);
  CHECK(u.user.empty());
  CHECK(u.password.empty());
  CHECK(u.path.empty());
  CHECK(u.query.empty());
}

TEST_CASE("parse_url: several comma-separated hosts keep their order and ports", "[url]") {
  auto u = parse_url("redlock://a:1,b:2,c:3");
  CHECK(u.scheme == "redlock");
  REQUIRE(u.hosts.size() == 3);
  CHECK(u.hosts[0].host == "a");
  CHECK(u.hosts[0].port == 1);
  CHECK(u.hosts[1].host == "b");
  CHECK(u.hosts[1].port == 2);
  CHECK(u.hosts[2].host == "c");
  CHECK(u.hosts[2].port == 3);
}

TEST_CASE("parse_url: bracketed IPv6 host with a port", "[url]") {
  auto u = parse_url("redis://[::1]:6379");
  REQUIRE(u.hosts.size() == 1);
  CHECK(u.hosts[0].host == "::1");
  CHECK(u.hosts[0].port == 6379);

  auto v = parse_url("redis://[fe80::1]");
  REQUIRE(v.hosts.size() == 1);
  CHECK(v.hosts[0].host == "fe80::1");
  CHECK(v.hosts[0].port == 0);
}

TEST_CASE("parse_url: ports 1 and 65535 are accepted", "[url]") {
  CHECK(parse_url("redis://h:1").hosts.at(0).port == 1);
  CHECK(parse_url("redis://h:65535").hosts.at(0).port == 65535);
}

TEST_CASE("parse_url: a port outside 1..65535 or not a number is rejected", "[url]") {
  for (const char* text : {"redis://h:0", "redis://h:70000", "redis://h:65536", "redis://h:abc", "redis://h:-1",
                           "redis://h:12a", "redis://h:9999999999", "redlock://a:1,b:0", "redis://[::1]:0",
                           "redis://[::1]:x"}) {
    INFO(text);
    CHECK_THROWS_AS(parse_url(text), UsageError);
  }
}

TEST_CASE("parse_url: an empty host is rejected", "[url]") {
  for (const char* text : {"postgresql://:5432/db", "postgresql://user:pw@/db", "postgresql:///db", "redis://",
                           "redis://[]:6379", "redlock://a:1,,b:2", "redlock://a:1,", "redlock://,a:1"}) {
    INFO(text);
    CHECK_THROWS_AS(parse_url(text), UsageError);
  }
}

TEST_CASE("parse_url: a bad percent escape is rejected", "[url]") {
  for (const char* text : {"postgresql://u:p%4@h/db", "postgresql://u:p%zz@h/db", "postgresql://u:p%@h/db",
                           "postgresql://u%G1:pw@h/db", "postgresql://h/d%", "postgresql://h/db?x=%2"}) {
    INFO(text);
    CHECK_THROWS_AS(parse_url(text), UsageError);
  }
}

TEST_CASE("parse_url: a missing scheme is rejected", "[url]") {
  for (const char* text : {"nocolon", "://host", ":x", "", "host/db"}) {
    INFO(text);
    CHECK_THROWS_AS(parse_url(text), UsageError);
  }
}

TEST_CASE("parse_url: a server URL without // is rejected", "[url]") {
  CHECK_THROWS_AS(parse_url("postgresql:host/db"), UsageError);
  CHECK_THROWS_AS(parse_url("redis:/host"), UsageError);
}

TEST_CASE("Url::redacted hides the password and shows ****", "[url]") {
  struct Case {
    std::string url, password, encoded;
  };
  std::vector<Case> cases{
      {"postgresql://user:p%40ss@host:5433/db?sslmode=disable", "p@ss", "p%40ss"},
      {"postgresql://user:hunter2@host/db", "hunter2", "hunter2"},
      {"redis://:s3cr3t@cache:6379", "s3cr3t", "s3cr3t"},
      {"redlock://u:pw9x@a:1,b:2,c:3", "pw9x", "pw9x"},
      {"redis://u:topsecret@[::1]:6379?x=1", "topsecret", "topsecret"},
      {"mysql://u:pa@ss@host/db", "pa@ss", "pa@ss"},  // raw '@' in the password
      {"mysql://u:pa:ss@host/db", "pa:ss", "pa:ss"},  // raw ':' in the password
  };
  for (const auto& c : cases) {
    INFO(c.url);
    auto u = parse_url(c.url);
    REQUIRE(u.password == c.password);
    auto r = u.redacted();
    INFO(r);
    CHECK_FALSE(contains(r, c.password));
    CHECK_FALSE(contains(r, c.encoded));
    CHECK(contains(r, "****"));
    CHECK(r.rfind(u.scheme + "://", 0) == 0);
  }
}

TEST_CASE("Url::redacted keeps the rest of the URL intact", "[url]") {
  CHECK(parse_url("postgresql://user:p%40ss@host:5433/db?sslmode=disable").redacted() ==
        "postgresql://user:****@host:5433/db?sslmode=disable");
  CHECK(parse_url("redis://:s3cr3t@cache:6379").redacted() == "redis://:****@cache:6379");
}

TEST_CASE("Url::redacted removes the password even when the same text appears elsewhere in the URL", "[url]") {
  // The password "secret" is also the user name, part of the host, the path and a query value.
  // Only the password field may be replaced; every other occurrence is not the password.
  const std::string text = "postgresql://secret:secret@secret.example.com:5432/secret?app=secret";
  auto u = parse_url(text);
  REQUIRE(u.user == "secret");
  REQUIRE(u.password == "secret");
  auto r = u.redacted();
  CHECK(r == "postgresql://secret:****@secret.example.com:5432/secret?app=secret");
  CHECK(count_of(r, "secret") == count_of(text, "secret") - 1);

  // The password is a prefix of the user name: a naive find-and-replace would hit the user.
  auto v = parse_url("postgresql://secretary:secret@host/db");
  REQUIRE(v.password == "secret");
  CHECK(v.redacted() == "postgresql://secretary:****@host/db");
  CHECK_FALSE(contains(v.redacted(), ":secret@"));
}

TEST_CASE("Url::redacted hides every query parameter whose name holds password", "[url]") {
  CHECK(parse_url("postgresql://u@h/db?sslmode=require&password=s3cr3t&application_name=x").redacted() ==
        "postgresql://u@h/db?sslmode=require&password=****&application_name=x");
  CHECK(parse_url("postgresql://u:pw@h/db?sslpassword=k3y&sslmode=verify-full").redacted() ==
        "postgresql://u:****@h/db?sslpassword=****&sslmode=verify-full");
  // Any case, and percent-encoded names too.
  CHECK(parse_url("postgresql://h/db?PassWord=a&pass%77ord=b&passwd=c").redacted() ==
        "postgresql://h/db?PassWord=****&pass%77ord=****&passwd=c");
}

TEST_CASE("Url::redacted is the URL unchanged when there is no password", "[url]") {
  CHECK(parse_url("redis://user@cache:6379").redacted() == "redis://user@cache:6379");
  CHECK(parse_url("sqlite:x.db").redacted() == "sqlite:x.db");
}

// parse_url promises never to echo a password in its errors (the sqlite "has no host" and
// "expected scheme://host" messages once quoted the URL as given).
TEST_CASE("parse_url: error messages never contain the password", "[url][regression]") {
  for (const char* text : {"sqlite://admin:s3cr3tpw@host/x.db", "postgresql:admin:s3cr3tpw@host/db",
                           "postgresql:/admin:s3cr3tpw@host/db", "postgresql://admin:s3cr3tpw@/db",
                           "postgresql://admin:s3cr3tpw@host:0/db", "redlock://admin:s3cr3tpw@a:1,"}) {
    INFO(text);
    std::string message = error_of(text);
    INFO(message);
    CHECK_FALSE(message.empty());
    CHECK_FALSE(contains(message, "s3cr3tpw"));
  }
}

// Found by tests/fuzz/fuzz_url: with the scheme left out, the "expected scheme:" message
// quoted the whole text, password included.
TEST_CASE("parse_url: a URL without a scheme is not echoed in the error", "[url][regression][fuzz]") {
  for (const char* text : {"://admin:hunter2@db.example.com/app", ":admin:hunter2@db"}) {
    INFO(text);
    std::string message = error_of(text);
    CHECK(contains(message, "no scheme"));
    CHECK_FALSE(contains(message, "hunter2"));
  }
  // Without any ':' there is no password, and the text still helps the user.
  CHECK_THROWS_WITH(parse_url("dblock.db"), Catch::Contains("'dblock.db'"));
}
