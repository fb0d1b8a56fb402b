// Readers of a SQL lease lock share the name's row: a reader's grant must not wait for
// another reader's grant under way (a share lock on the row), or their commits queue one
// flush after the other (docs/ARCHITECTURE.md, "Lock shapes").
#pragma once

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "dblock/dblock.hpp"
#include "sql/connection.hpp"
#include "support/eventually.hpp"

namespace dblock::test {

// Opens a transaction on `other` (`begin`), takes a share lock on the name's row with it
// (`share_lock`), asks `lock` for a shared hold, and commits `other` after the grant or after
// 3 s, whichever comes first: the grant must have come first (an exclusive row lock would
// have waited for the commit). Returns the grant.
inline Lease acquire_shared_beside(detail::sqldb::Connection& other, const std::string& begin,
                                   const std::string& share_lock, Lock lock) {
  using namespace std::chrono_literals;
  other.run(begin);
  other.run(share_lock);
  std::optional<Lease> lease;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    lease = lock.try_acquire_shared(5s);
    done = true;
  });
  const bool beside = eventually([&] { return done.load(); }, 3s);
  other.run("COMMIT");
  reader.join();
  CHECK(beside);
  REQUIRE(lease);
  return std::move(*lease);
}

}  // namespace dblock::test
