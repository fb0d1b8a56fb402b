// What every server backend (PostgreSQL, MySQL) promises beyond the contract suite, run once
// per server built in.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <optional>
#include <thread>

#include "support/eventually.hpp"
#include "support/servers.hpp"

using namespace std::chrono_literals;
using Server = dblock::test::ScratchTable::Server;

namespace {

// An acquire that meets a row lock another transaction holds waits for it no longer than
// its own deadline, is then busy (not a timeout), and changes nothing; the client goes on
// working.
[[maybe_unused]] void busy_behind_row_lock_changes_nothing(Server server) {
  dblock::test::ScratchTable table(server);
  auto holder = table.ns().open();
  dblock::LockOptions short_lease;
  short_lease.ttl = 200ms;
  short_lease.auto_renew = false;
  auto held = holder->lock("job", short_lease).acquire();
  std::this_thread::sleep_for(400ms);  // expired: an acquire will now try to take the row over
  // Another session locks the row, so the takeover must wait on it past its deadline.
  auto blocker = dblock::test::server_connection(table.url());
  blocker->begin();
  blocker->run("SELECT 1 FROM " + table.name() + " WHERE name = 'job' FOR UPDATE", {});
  auto opts = table.options();
  opts.statement_timeout = 300ms;  // (MySQL's innodb_lock_wait_timeout counts whole seconds: 1 s)
  auto impatient = dblock::Client::open(table.url(), opts);
  CHECK_FALSE(impatient->lock("job").try_acquire());
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

// The same for the optimistic strategy's first try after a release of its own, which goes
// straight to the compare-and-set on the version that release left (PostgreSQL: as one plain
// statement while nobody waits): a row another transaction locks is busy, not waited for
// past the statement timeout (an error).
[[maybe_unused]] void optimistic_take_behind_row_lock_is_busy(Server server) {
  dblock::test::ScratchTable table(server);
  auto opts = table.options();
  opts.statement_timeout = 300ms;
  auto c = dblock::Client::open(table.url(), opts);
  dblock::LockOptions o;
  o.strategy = dblock::Strategy::optimistic;
  c->lock("job", o).acquire().release();  // the row stays, free, its version known to c
  auto blocker = dblock::test::server_connection(table.url());
  blocker->begin();
  blocker->run("SELECT 1 FROM " + table.name() + " WHERE name = 'job' FOR UPDATE", {});
  CHECK_FALSE(c->lock("job", o).try_acquire());
  blocker->rollback();
  CHECK(c->lock("job", o).try_acquire());
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

// The server closing a session lock's connection is noticed by the socket, not at the next
// renewal ping (ttl/3 = 10 s here): issue 23 asks for on_lost within 100 ms. (MySQL:
// the backend terminated is a KILL of the holder's connection.) The delay is
// measured and printed ("hang-up delay"), and fails only past 1 s, which a loaded, sanitized
// run cannot reach and a renewal-only detection (10 s) cannot meet.
[[maybe_unused]] void closed_connection_is_lost_at_once(Server server) {
  using std::chrono::steady_clock;
  dblock::test::ScratchTable table(server);
  auto c = table.ns().open();
  for (auto strategy : {dblock::Strategy::for_update, dblock::Strategy::advisory}) {
    INFO(dblock::to_string(strategy));
    std::atomic<std::int64_t> lost_at{0};
    std::atomic<bool> lost_seen{false};
    dblock::LockOptions o;
    o.strategy = strategy;
    o.ttl = 30s;
    std::optional<dblock::Lease> lease;
    o.on_lost = [&](const std::string&, std::uint64_t) {
      lost_at = steady_clock::now().time_since_epoch().count();
    };
    lease = c->lock("job", o).acquire();
    auto operator_ = dblock::test::server_connection(table.url());  // opened before the clock starts
    // From just before the statement that terminates the holder's backend: an upper bound on
    // the delay from the server's close (the backend exits once signalled, before or after
    // the statement's answer comes back).
    auto killed_at = steady_clock::now();
    REQUIRE(dblock::test::terminate_lock_holders(*operator_, table.url(), table.name(), "job") == 1);
    auto call = steady_clock::now() - killed_at;
    REQUIRE(dblock::test::eventually([&] { return lost_at.load() != 0; }, 3s));
    lost_seen = lease->lost();  // on_lost has been told: lost() reads true by then
    auto after = steady_clock::time_point(steady_clock::duration(lost_at.load())) - killed_at;
    auto us = [](steady_clock::duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); };
    std::printf("hang-up delay: %s %s %lld us after the kill was sent (its statement took %lld us)\n",
                server == Server::mysql ? "mysql" : "postgresql", std::string(dblock::to_string(strategy)).c_str(),
                static_cast<long long>(us(after)),
                static_cast<long long>(us(call)));
    std::fflush(stdout);
    CHECK(after < 1s);
    CHECK(lost_seen);
    CHECK_THROWS_AS(lease->release(), dblock::LockLostError);
    auto next = c->lock("job", o).try_acquire(2s);  // and the lock is free for the next holder
    CHECK(next);
  }
}

// A session lock's wait longer than the statement timeout waits inside the server in pieces
// shorter than it (PostgreSQL's lock_timeout error, MySQL's GET_LOCK answering 0, end each
// piece), and is granted when the holder lets go, not answered busy at a piece's end.
[[maybe_unused]] void long_server_wait_spans_pieces(Server server) {
  using std::chrono::steady_clock;
  dblock::test::ScratchTable table(server);
  auto holder = table.ns().open();
  auto opts = table.options();
  opts.statement_timeout = 2s;  // pieces of 1 s
  auto waiter = dblock::Client::open(table.url(), opts);
  for (auto strategy : {dblock::Strategy::advisory, dblock::Strategy::for_update}) {
    INFO(dblock::to_string(strategy));
    dblock::LockOptions o;
    o.strategy = strategy;
    auto held = holder->lock("job", o).acquire();
    steady_clock::time_point released_at;
    std::thread letting_go([&] {
      std::this_thread::sleep_for(3500ms);  // past three pieces
      released_at = steady_clock::now();
      held.release();
    });
    const auto asked = steady_clock::now();
    auto got = waiter->lock("job", o).try_acquire(8s);
    const auto granted_at = steady_clock::now();
    letting_go.join();
    REQUIRE(got);
    CHECK(got->fence() > held.fence());
    CHECK(granted_at - asked >= 3s);
    CHECK(granted_at - released_at < 1s);  // woken by the release within the piece it came in
    got->release();
  }
}

}  // namespace

#ifdef DBLOCK_TEST_POSTGRESQL
TEST_CASE("postgresql: the optimistic release hint never hides a leftover", "[postgresql]") {
  optimistic_hint_never_hides_a_leftover(Server::postgresql);
}
TEST_CASE("postgresql: an acquire behind a row lock is busy by its deadline and leaves no half-acquired row",
          "[postgresql]") {
  busy_behind_row_lock_changes_nothing(Server::postgresql);
}
TEST_CASE("postgresql: an optimistic take behind a row lock is busy, not an error", "[postgresql]") {
  optimistic_take_behind_row_lock_is_busy(Server::postgresql);
}
TEST_CASE("postgresql: a session lock whose connection the server closes is lost at once", "[postgresql]") {
  closed_connection_is_lost_at_once(Server::postgresql);
}
TEST_CASE("postgresql: a session lock's wait past the statement timeout waits in pieces", "[postgresql]") {
  long_server_wait_spans_pieces(Server::postgresql);
}
#endif

#ifdef DBLOCK_TEST_MYSQL
TEST_CASE("mysql: the optimistic release hint never hides a leftover", "[mysql]") {
  optimistic_hint_never_hides_a_leftover(Server::mysql);
}
TEST_CASE("mysql: an acquire behind a row lock is busy by its deadline and leaves no half-acquired row", "[mysql]") {
  busy_behind_row_lock_changes_nothing(Server::mysql);
}
TEST_CASE("mysql: an optimistic take behind a row lock is busy, not an error", "[mysql]") {
  optimistic_take_behind_row_lock_is_busy(Server::mysql);
}
TEST_CASE("mysql: a session lock whose connection the server closes is lost at once", "[mysql]") {
  closed_connection_is_lost_at_once(Server::mysql);
}
TEST_CASE("mysql: a session lock's wait past the statement timeout waits in pieces", "[mysql]") {
  long_server_wait_spans_pieces(Server::mysql);
}
#endif
