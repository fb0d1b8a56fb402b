// ZooKeeper's paths and node names (src/backends/zookeeper/zk_paths.hpp): pure code, tested
// here even when the ZooKeeper bridge is not built (tests/CMakeLists.txt adds the source).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

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

namespace {
// A contender list in sequence order from a pattern: 'w' a writer (__lock__), 'r' a reader.
std::vector<zk::Contender> queue_of(const std::string& pattern) {
  std::vector<std::string> children;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    auto seq = std::to_string(1000 + i);
    children.push_back("0123456789abcdef0123456789abcdef" + std::string(pattern[i] == 'r' ? "__rlock__" : "__lock__") +
                       std::string(10 - seq.size(), '0') + seq);
  }
  std::reverse(children.begin(), children.end());  // ZooKeeper lists children in no order
  return zk::contenders(children);
}
}  // namespace

TEST_CASE("zk contenders: readers and writers are told apart by Kazoo's markers", "[zookeeper][shapes]") {
  auto r = zk::parse_contender("abc__rlock__0000000007");
  REQUIRE(r);
  CHECK(r->shared);
  CHECK(r->sequence == 7);
  auto w = zk::parse_contender("abc__lock__0000000008");
  REQUIRE(w);
  CHECK_FALSE(w->shared);
  // The marker right before the sequence decides, whatever the prefix holds.
  auto odd = zk::parse_contender("x__lock__y__rlock__0000000009");
  REQUIRE(odd);
  CHECK(odd->shared);
  CHECK_FALSE(zk::parse_contender("abc__rlock__000000001"));  // 9 digits: not a contender
  CHECK_FALSE(zk::parse_contender("leases"));
}

TEST_CASE("zk::blocker: a writer waits for its predecessor, a reader for the nearest writer before it",
          "[zookeeper][shapes]") {
  // Each case: the pattern, then per contender the index it waits for (npos: it holds).
  const auto none = zk::npos;
  struct Case {
    std::string pattern;
    std::vector<std::size_t> waits_for;
  };
  for (const auto& c : std::vector<Case>{
           {"w", {none}},
           {"r", {none}},
           {"rrr", {none, none, none}},                    // readers together
           {"rw", {none, 0}},                              // a writer waits for a reader
           {"rrw", {none, none, 1}},                       // ... for the last one before it only
           {"rwr", {none, 0, 1}},                          // a reader behind a waiting writer waits for it
           {"rwrr", {none, 0, 1, 1}},                      // readers behind one writer all watch it
           {"wrrw", {none, 0, 0, 2}},
           {"rrwrrwr", {none, none, 1, 2, 2, 4, 5}},
           {"ww", {none, 0}},
       }) {
    INFO(c.pattern);
    auto list = queue_of(c.pattern);
    REQUIRE(list.size() == c.pattern.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      INFO(i);
      CHECK(list[i].shared == (c.pattern[i] == 'r'));  // sorted back into sequence order
      CHECK(zk::blocker(list, i) == c.waits_for[i]);
    }
  }
}

TEST_CASE("zk::holders: the first writer, or every reader before the first writer", "[zookeeper][shapes]") {
  auto names = [](const std::vector<zk::Contender>& v) {
    std::string s;
    for (const auto& c : v) s += c.shared ? 'r' : 'w';
    return s;
  };
  CHECK(names(zk::holders(queue_of(""))).empty());
  CHECK(names(zk::holders(queue_of("wrr"))) == "w");
  CHECK(names(zk::holders(queue_of("ww"))) == "w");
  CHECK(names(zk::holders(queue_of("rrwr"))) == "rr");
  CHECK(names(zk::holders(queue_of("rrr"))) == "rrr");
  auto list = queue_of("rrwr");
  auto held = zk::holders(list);
  REQUIRE(held.size() == 2);
  CHECK(held[0].node == list[0].node);
  CHECK(held[1].node == list[1].node);
}

TEST_CASE("zk::is_lease: a semaphore's lease is 32 hex digits alone, as Kazoo names it", "[zookeeper][shapes]") {
  CHECK(zk::is_lease("0123456789abcdef0123456789abcdef"));
  CHECK(zk::is_lease(zk::random_prefix()));
  CHECK_FALSE(zk::is_lease(zk::random_prefix() + "__lock__0000000001"));
  CHECK_FALSE(zk::is_lease(zk::random_prefix() + "__rlock__0000000001"));
  CHECK_FALSE(zk::is_lease("0123456789ABCDEF0123456789ABCDEF"));  // uuid4().hex is lowercase
  CHECK_FALSE(zk::is_lease("0123456789abcdef0123456789abcde"));
  CHECK_FALSE(zk::is_lease(""));
}
