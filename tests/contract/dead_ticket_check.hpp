// Fair waiting (docs/ARCHITECTURE.md, "Fair waiting"): a ticket whose waiter died keeps
// everyone else out only until it expires, a try does not jump it, the sweep removes it, and
// fair = false does not look at the queue. The same check for every SQL database.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "dblock/dblock.hpp"

namespace dblock::test {

// `queue(owner, ms)` writes, by hand, a ticket of name "job" for `owner` that is first in
// line and lives `ms` more on the database clock, as a waiter that died leaves it.
inline void check_dead_ticket(Client& c, const std::function<void(const std::string&, int)>& queue) {
  using namespace std::chrono_literals;
  REQUIRE(c.lock("warm-up").try_acquire());  // the schema is in place
  c.sweep();  // the warm-up's free row, where a release leaves one (MySQL)
  queue("gone:1", 1500);
  auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(c.lock("job").try_acquire());
  auto lease = c.lock("job").try_acquire(10s);
  auto waited = std::chrono::steady_clock::now() - t0;
  REQUIRE(lease);
  CHECK(c.sweep() == 1);  // the dead waiter's ticket, expired
  CHECK(waited >= 1000ms);
  CHECK(waited < 5s);
  lease->release();
  queue("gone:2", 60000);
  LockOptions unfair;
  unfair.fair = false;
  CHECK(c.lock("job", unfair).try_acquire());  // fair = false does not look at the queue
}

}  // namespace dblock::test
