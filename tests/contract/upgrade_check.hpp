// The migration that adds read/write locks and semaphores (the holders table: SQLite and
// PostgreSQL V3, MySQL V6) upgrades a lock table in place: a lock held before it stays held,
// and the name then takes a shared hold with a higher fence.
#pragma once

#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dblock/dblock.hpp"

namespace dblock::test {

// `open` makes a Client on the table; `roll_back` takes the table back to the schema before
// `script` (as a table made by an earlier release has it).
inline void check_holders_upgrade(const std::function<std::shared_ptr<Client>()>& open,
                                  const std::function<void()>& roll_back, const std::string& script) {
  auto c = open();
  auto held = c->lock("held").try_acquire();
  REQUIRE(held);
  roll_back();
  CHECK(c->migrate() == std::vector<std::string>{script});
  auto other = open();
  CHECK_FALSE(other->lock("held").try_acquire());  // still held
  const auto fence = held->fence();
  held->release();
  auto reader = other->lock("held").try_acquire_shared();
  REQUIRE(reader);
  CHECK(reader->fence() > fence);
}

}  // namespace dblock::test
