// ZooKeeper's paths and node names (src/backends/zookeeper/zk_paths.hpp): pure code, tested
// here even when the ZooKeeper bridge is not built (tests/CMakeLists.txt adds the source).
#include <catch2/catch.hpp>

#include <string>

#include "backends/zookeeper/zk_paths.hpp"
#include "dblock/errors.hpp"

namespace zk = dblock::detail::zk;
using dblock::UsageError;

// Found by tests/fuzz/fuzz_name: the decoder took overlong forms, surrogates and code points
// past U+10FFFF as characters, so root_path accepted bytes that are not UTF-8.
TEST_CASE("zk::root_path refuses malformed UTF-8: overlongs, surrogates, past U+10FFFF",
          "[zookeeper][regression][fuzz]") {
  for (const char* bad : {"a\xe0\x80\xaf" "b",   // overlong '/'
                          "a\xc1\xbf",           // overlong U+007F
                          "a\xf0\x80\x80\xaf",   // 4-byte overlong '/'
                          "a\xed\xa0\x80",       // surrogate U+D800
                          "a\xf4\x90\x80\x80",   // U+110000
                          "a\xf7\xbf\xbf\xbf"}) {
    INFO(bad);
    CHECK_THROWS_AS(zk::root_path(bad), UsageError);
    CHECK_THROWS_AS(zk::node_name(bad), UsageError);
  }
  // Well-formed text still passes, 2-, 3- and 4-byte forms alike.
  CHECK(zk::root_path("locks/\xc3\xa9t\xc3\xa9/\xe2\x82\xac") == "/locks/\xc3\xa9t\xc3\xa9/\xe2\x82\xac");
  CHECK(zk::node_name("\xf0\x9f\x94\x92") == "%F0%9F%94%92");
}

TEST_CASE("zk::node_name and zk::lock_name are inverses", "[zookeeper]") {
  for (const char* name : {"plain", "100%", "%25", "\xf0\x9f\x94\x92 lock", "a%F0b", "\xe2\x82\xac"})
    CHECK(zk::lock_name(zk::node_name(name)) == name);
}
