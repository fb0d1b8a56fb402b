// The waiters' mark (docs/ARCHITECTURE.md, "Fair waiting"): a name nobody waits for is granted
// and released by single statements, its row deleted; every acquire that waits (fair or not,
// a writer or a reader) marks the row first, so the holder's release wakes it and frees the
// row instead of deleting it; the sweeper leaves a marked row; and the waiter gets the name.
// The same check for every SQL database whose dialect has the uncontended path.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <string>

#include "dblock/dblock.hpp"
#include "support/eventually.hpp"

namespace dblock::test {

// `marked()`: whether the row of name "job" is marked now, nothing when it has no row;
// `unmark()` lets its mark run out.
inline void check_wait_mark(Client& holder, Client& waiter, const std::function<std::optional<bool>()>& marked,
                            const std::function<void()>& unmark) {
  using namespace std::chrono_literals;
  holder.lock("job").acquire().release();
  CHECK_FALSE(marked());  // nobody waited: deleted
  LockOptions unfair;
  unfair.fair = false;
  for (const std::string how : {"fair", "unfair", "shared"}) {
    INFO(how);
    auto held = holder.lock("job").acquire();
    CHECK_FALSE(marked().value_or(true));
    auto waited = std::async(std::launch::async, [&] {
      auto lock = waiter.lock("job", how == "unfair" ? unfair : LockOptions{});
      return how == "shared" ? lock.try_acquire_shared(30s) : lock.try_acquire(30s);
    });
    REQUIRE(eventually([&] { return marked().value_or(false); }, 10s));
    const auto fence = held.fence();
    held.release();
    auto got = waited.get();
    REQUIRE(got);
    CHECK(got->fence() > fence);
    got->release();
    CHECK(marked());  // marked: freed and kept, not deleted
    CHECK(holder.sweep() == 0);
    CHECK(marked());
    unmark();
  }
  CHECK(holder.sweep() == 1);
  CHECK_FALSE(marked());
}

}  // namespace dblock::test
