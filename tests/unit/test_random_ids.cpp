// Random ids (src/core/owner.hpp): a Client's Client rows, ZooKeeper node prefixes and etcd
// leases are told apart by them alone, across every process of a fleet.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <set>
#include <string>

#include "core/owner.hpp"

using dblock::detail::random64;
using dblock::detail::random_hex128;

TEST_CASE("random_hex128 gives 32 lowercase hex digits, none twice", "[ids]") {
  std::set<std::string> seen;
  for (int i = 0; i < 10'000; ++i) {
    auto id = random_hex128();
    REQUIRE(id.size() == 32);
    REQUIRE(id.find_first_not_of("0123456789abcdef") == std::string::npos);
    REQUIRE(seen.insert(std::move(id)).second);
  }
}

// A forked child that kept its parent's generator would hand out the parent's next ids.
TEST_CASE("a forked child's random ids are not its parent's", "[ids]") {
  (void)random64();  // the parent's generator is seeded
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const std::uint64_t next = random64();
    const bool sent = write(pipe_fds[1], &next, sizeof next) == static_cast<ssize_t>(sizeof next);
    _exit(sent ? 0 : 1);
  }
  std::uint64_t childs = 0;
  const auto got = read(pipe_fds[0], &childs, sizeof childs);
  int status = 0;
  waitpid(child, &status, 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  REQUIRE(got == static_cast<ssize_t>(sizeof childs));
  CHECK(childs != random64());  // what the parent draws next: the child's would equal it
}
