// What docs/SECURITY.md's locker and sweeper may do on a table its migrator made, for the
// PostgreSQL and MariaDB tests: the locker takes every strategy, shared holds and a semaphore,
// lists them and leaves a row to expire; the sweeper sweeps it and locks nothing.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "dblock/dblock.hpp"

namespace dblock::test {

inline void check_locker_and_sweeper(const std::string& locker_url, const std::string& sweeper_url,
                                     const ClientOptions& o) {
  using namespace std::chrono_literals;
  auto c = Client::open(locker_url, o);
  for (auto s : {Strategy::insert, Strategy::optimistic, Strategy::for_update, Strategy::advisory}) {
    LockOptions lo;
    lo.strategy = s;
    INFO(to_string(s));
    auto lease = c->lock("job", lo).acquire();
    CHECK(lease.fence() > 0);
    lease.release();
  }
  auto r1 = c->lock("doc").try_acquire_shared();
  auto r2 = Client::open(locker_url, o)->lock("doc").try_acquire_shared();
  REQUIRE(r1);
  REQUIRE(r2);
  LockOptions pool;
  pool.permits = 2;
  auto p1 = c->lock("pool", pool).acquire();
  CHECK(c->list().size() >= 2);
  r1->release(), r2->release(), p1.release();
  LockOptions kept;
  kept.hold_at_least = 100ms;  // its row outlives the release, then expires: the sweeper's
  c->lock("kept", kept).acquire().release();
  std::this_thread::sleep_for(300ms);

  auto s = Client::open(sweeper_url, o);
  CHECK(s->sweep() >= 1);
  CHECK_THROWS_AS(s->lock("job").try_acquire(), UnavailableError);  // the sweeper locks nothing (no INSERT, EXECUTE)
}

}  // namespace dblock::test
