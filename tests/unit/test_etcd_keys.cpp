// etcd's key layout (src/backends/etcd/etcd_keys.hpp): pure code, tested here even when the
// etcd bridge is not built (tests/CMakeLists.txt adds the source).
#include <catch2/catch.hpp>

#include "backends/etcd/etcd_keys.hpp"
#include "dblock/errors.hpp"

namespace etcd = dblock::detail::etcd;

TEST_CASE("etcd key prefixes come from the URL path and refuse empty components", "[etcd]") {
  CHECK(etcd::key_root("dblock") == "/dblock");
  CHECK(etcd::key_root("a/b") == "/a/b");
  CHECK_THROWS_AS(etcd::key_root(""), dblock::UsageError);
  CHECK_THROWS_AS(etcd::key_root("a//b"), dblock::UsageError);
  CHECK_THROWS_AS(etcd::key_root("/a"), dblock::UsageError);
  CHECK_THROWS_AS(etcd::key_root("a/"), dblock::UsageError);
}

TEST_CASE("etcd lock keys are concurrency.Mutex's: <prefix>/<name>/<lease %x>", "[etcd]") {
  CHECK(etcd::lock_prefix("/dblock", "job") == "/dblock/job/");
  CHECK_THROWS_AS(etcd::lock_prefix("/dblock", "a/b"), dblock::UsageError);
  CHECK(etcd::lease_hex(0x694d7a3c1b2e0f10) == "694d7a3c1b2e0f10");
  CHECK(etcd::lease_hex(0x0a) == "a");  // no leading zeros, as Go's %x
  CHECK(etcd::lease_hex(1) == "1");
  CHECK(etcd::lock_name_of("/dblock", "/dblock/job/694d7a3c1b2e0f10") == std::optional<std::string>("job"));
  CHECK(etcd::lock_name_of("/dblock", "/dblock/🔒 lock/a") == std::optional<std::string>("🔒 lock"));
  CHECK_FALSE(etcd::lock_name_of("/dblock", "/dblock/job/"));
  CHECK_FALSE(etcd::lock_name_of("/dblock", "/dblock/job"));
  CHECK_FALSE(etcd::lock_name_of("/dblock", "/dblock//a"));
  CHECK_FALSE(etcd::lock_name_of("/dblock", "/dblockx/job/a"));
  CHECK_FALSE(etcd::lock_name_of("/dblock", "/dblock/a/b/c"));
  CHECK_FALSE(etcd::lock_name_of("/dblock", "/dblock/job/XYZ"));
}

TEST_CASE("etcd prefix range ends are clientv3.GetPrefixRangeEnd's", "[etcd]") {
  CHECK(etcd::prefix_end("/a/") == "/a0");
  CHECK(etcd::prefix_end("a\xff") == "b");
  CHECK(etcd::prefix_end("\xff\xff") == std::string(1, '\0'));
}
