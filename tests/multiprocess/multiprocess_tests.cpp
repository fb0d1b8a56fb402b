// Several processes x threads take one name through the library and do a read-modify-write
// of a counter file that only the lock protects; the counter must come out exact and the
// fences logged in grant order must strictly increase.
#include <catch2/catch.hpp>
#include <fstream>
#include <vector>

#include "contract/fixtures.hpp"  // the redis fixtures: a fresh key namespace
#include "dblock/dblock.hpp"
#include "support/process.hpp"
#include "support/servers.hpp"
#include "support/temp_dir.hpp"

namespace {

void hammer(const dblock::test::Namespace& ns, const std::string& strategy) {
  dblock::test::TempDir dir;
  const auto& url = ns.url;
  auto counter = dir.path() + "/counter", fences = dir.path() + "/fences";
  std::ofstream(counter) << 0 << "\n";
  constexpr int processes = 4, threads = 3, iterations = 25;
  std::vector<pid_t> pids;
  for (int p = 0; p < processes; ++p)
    pids.push_back(dblock::test::spawn({DBLOCK_HAMMER, "count", url, ns.options.table, strategy, "counter", std::to_string(iterations),
                                        std::to_string(threads), counter, fences}));
  for (auto pid : pids) CHECK(dblock::test::wait_exit(pid) == 0);
  long total = 0;
  std::ifstream(counter) >> total;
  CHECK(total == processes * threads * iterations);
  std::ifstream log(fences);
  std::uint64_t prev = 0, fence = 0;
  int lines = 0;
  while (log >> fence) {
    INFO("line " << lines);
    REQUIRE(fence > prev);
    prev = fence;
    ++lines;
  }
  CHECK(lines == processes * threads * iterations);
}

dblock::test::Namespace sqlite_file(const dblock::test::TempDir& dir) {
  return dblock::test::Namespace{"sqlite:" + dir.path() + "/locks.db", dblock::ClientOptions{}};
}

}  // namespace

TEST_CASE("4 processes x 3 threads keep an exact counter with increasing fences: sqlite insert", "[multiprocess]") {
  dblock::test::TempDir dir;
  hammer(sqlite_file(dir), "insert");
}

TEST_CASE("4 processes x 3 threads keep an exact counter with increasing fences: sqlite optimistic",
          "[multiprocess]") {
  dblock::test::TempDir dir;
  hammer(sqlite_file(dir), "optimistic");
}

#ifdef DBLOCK_TEST_POSTGRESQL
TEST_CASE("4 processes x 3 threads keep an exact counter with increasing fences: postgresql insert",
          "[multiprocess][postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  hammer(table.ns(), "insert");
}

TEST_CASE("4 processes x 3 threads keep an exact counter with increasing fences: postgresql optimistic",
          "[multiprocess][postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  hammer(table.ns(), "optimistic");
}
#endif

#ifdef DBLOCK_TEST_REDIS
TEST_CASE("4 processes x 3 threads keep an exact counter with increasing fences: redis", "[multiprocess][redis]") {
  dblock::test::RedisLock f;
  hammer(f.make(), "redis");
}

TEST_CASE("4 processes x 3 threads keep an exact counter with increasing fences: redlock", "[multiprocess][redis]") {
  dblock::test::Redlock f;
  hammer(f.make(), "redlock");
}
#endif
