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
  auto blocker = dblock::test::server_connection(table.url());
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

// The optimistic strategy remembers the version its own release left and tries the next
// compare-and-set on it without reading the row. That guess must never answer "busy" for a
// row that names the caller: here the row becomes this owner's again behind the client's
// back (a leftover, as an acquire whose answer was lost leaves one), its version moved past
// the hint; the next acquire must take it over with a new fence, not wait for itself.
[[maybe_unused]] void optimistic_hint_never_hides_a_leftover(Server server) {
  dblock::test::ScratchTable table(server);
  auto c = table.ns().open();
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::optimistic;
  o.auto_renew = false;
  auto first = c->lock("job", o).acquire();
  const auto owner = first.owner();
  const auto fence = static_cast<std::int64_t>(first.fence());
  first.release();
  auto raw = dblock::test::server_connection(table.url());
  auto until = std::chrono::duration_cast<std::chrono::milliseconds>(
                   (std::chrono::system_clock::now() + 60s).time_since_epoch()).count();
  raw->run("UPDATE " + table.name() + " SET owner = '" + owner + "', holds = 1, fence = " + std::to_string(fence) +
               ", valid_until = " + std::to_string(until) + ", version = version + 1 WHERE name = 'job'",
           {});
  auto again = c->lock("job", o).try_acquire();
  REQUIRE(again);  // taken over, not "busy"
  CHECK(again->fence() > first.fence());
  auto rows = raw->run("SELECT holds, fence FROM " + table.name() + " WHERE name = 'job'", {}).rows;
  REQUIRE(rows.size() == 1);
  CHECK(std::get<std::int64_t>(rows[0][0]) == 1);
  CHECK(std::get<std::int64_t>(rows[0][1]) == static_cast<std::int64_t>(again->fence()));
}

}  // namespace

#ifdef DBLOCK_TEST_POSTGRESQL
TEST_CASE("postgresql: the optimistic release hint never hides a leftover", "[postgresql]") {
  optimistic_hint_never_hides_a_leftover(Server::postgresql);
}
TEST_CASE("postgresql: a timeout while acquiring fails cleanly and leaves no half-acquired row", "[postgresql]") {
  timeout_while_acquiring_changes_nothing(Server::postgresql);
}
#endif

#ifdef DBLOCK_TEST_MYSQL
TEST_CASE("mysql: the optimistic release hint never hides a leftover", "[mysql]") {
  optimistic_hint_never_hides_a_leftover(Server::mysql);
}
TEST_CASE("mysql: a timeout while acquiring fails cleanly and leaves no half-acquired row", "[mysql]") {
  timeout_while_acquiring_changes_nothing(Server::mysql);
}
#endif
