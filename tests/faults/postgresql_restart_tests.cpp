// PostgreSQL restarted while locks are held: lease strategies keep the lock (the row is
// durable) and renew after reconnecting; session strategies report the loss. The restart
// command comes from DBLOCK_TEST_PG_RESTART (scripts/test sets it to scripts/services).
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <thread>

#include "support/servers.hpp"

using namespace std::chrono_literals;

namespace {

void restart_server() {
  const char* cmd = std::getenv("DBLOCK_TEST_PG_RESTART");
  if (!cmd || !*cmd) FAIL("DBLOCK_TEST_PG_RESTART is not set: scripts/test sets it to restart the test server");
  REQUIRE(std::system(cmd) == 0);
}

dblock::LockOptions options(dblock::Strategy s, std::chrono::milliseconds ttl, std::atomic<int>* lost) {
  dblock::LockOptions o;
  o.strategy = s;
  o.ttl = ttl;
  o.renew_every = 300ms;
  o.on_lost = [lost](const std::string&, std::uint64_t) { ++*lost; };
  return o;
}

}  // namespace

TEST_CASE("postgresql restart: leases survive and renew, session locks are reported lost", "[postgresql][restart]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto c = table.ns().open();
  std::atomic<int> insert_lost{0}, optimistic_lost{0}, for_update_lost{0}, advisory_lost{0};
  auto insert = c->lock("insert", options(dblock::Strategy::insert, 20s, &insert_lost)).acquire();
  auto optimistic = c->lock("optimistic", options(dblock::Strategy::optimistic, 20s, &optimistic_lost)).acquire();
  auto for_update = c->lock("for-update", options(dblock::Strategy::for_update, 20s, &for_update_lost)).acquire();
  auto advisory = c->lock("advisory", options(dblock::Strategy::advisory, 20s, &advisory_lost)).acquire();

  restart_server();
  auto until = std::chrono::steady_clock::now() + 10s;  // session losses show within a few pings
  while ((for_update_lost == 0 || advisory_lost == 0) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(50ms);
  CHECK(for_update_lost == 1);
  CHECK(advisory_lost == 1);
  CHECK(for_update.lost());
  CHECK(advisory.lost());

  std::this_thread::sleep_for(1500ms);  // several renewals after the restart
  CHECK(insert_lost == 0);
  CHECK(optimistic_lost == 0);
  CHECK_FALSE(insert.lost());
  CHECK_FALSE(optimistic.lost());
  auto other = table.ns().open();
  CHECK_FALSE(other->lock("insert").try_acquire());  // still held, by the row
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::optimistic;
  CHECK_FALSE(other->lock("optimistic", o).try_acquire());
  o.strategy = dblock::Strategy::for_update;
  auto taken = other->lock("for-update", o).try_acquire(5s);  // freed by the server
  REQUIRE(taken);
  CHECK(taken->fence() > for_update.fence());
  CHECK_THROWS_AS(for_update.release(), dblock::LockLostError);
  insert.release();
  optimistic.release();
}
