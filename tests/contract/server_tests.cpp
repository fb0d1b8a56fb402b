// What every server backend (PostgreSQL, MySQL) promises beyond the contract suite, run once
// per server built in.
#include <catch2/catch.hpp>
#include <thread>

#include "support/servers.hpp"

using namespace std::chrono_literals;
using Server = dblock::test::ScratchTable::Server;

namespace {

// An acquire that must wait on a row lock past its statement timeout fails with a
// TimeoutError and changes nothing; the client goes on working.
[[maybe_unused]] void timeout_while_acquiring_changes_nothing(Server server) {
  dblock::test::ScratchTable table(server);
  auto holder = table.ns().open();
  dblock::LockOptions short_lease;
  short_lease.ttl = 200ms;
  short_lease.auto_renew = false;
  auto held = holder->lock("job", short_lease).acquire();
  std::this_thread::sleep_for(400ms);  // expired: an acquire will now try to take the row over
  // Another session locks the row, so the takeover must wait on it past its timeout.
  auto blocker = dblock::test::server_session(table.url());
  blocker->begin();
  blocker->run("SELECT 1 FROM " + table.name() + " WHERE name = 'job' FOR UPDATE", {});
  auto opts = table.options();
  opts.statement_timeout = 300ms;  // (MySQL's innodb_lock_wait_timeout counts whole seconds: 1 s)
  auto impatient = dblock::Client::open(table.url(), opts);
  CHECK_THROWS_AS(impatient->lock("job").try_acquire(), dblock::TimeoutError);
  blocker->rollback();
  auto rows = blocker->run("SELECT owner, fence, holds FROM " + table.name() + " WHERE name = 'job'", {}).rows;
  REQUIRE(rows.size() == 1);
  CHECK(std::get<std::string>(rows[0][0]) == held.owner());  // the timed-out attempt changed nothing
  CHECK(std::get<std::int64_t>(rows[0][1]) == static_cast<std::int64_t>(held.fence()));
  CHECK(std::get<std::int64_t>(rows[0][2]) == 1);
  auto taken = impatient->lock("job").try_acquire();  // and the client still works
  REQUIRE(taken);
  CHECK(taken->fence() > held.fence());
}

}  // namespace

#ifdef DBLOCK_TEST_POSTGRESQL
TEST_CASE("postgresql: a timeout while acquiring fails cleanly and leaves no half-acquired row", "[postgresql]") {
  timeout_while_acquiring_changes_nothing(Server::postgresql);
}
#endif

#ifdef DBLOCK_TEST_MYSQL
TEST_CASE("mysql: a timeout while acquiring fails cleanly and leaves no half-acquired row", "[mysql]") {
  timeout_while_acquiring_changes_nothing(Server::mysql);
}
#endif
