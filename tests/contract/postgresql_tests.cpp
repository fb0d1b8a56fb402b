// What only the PostgreSQL backend promises.
#include <catch2/catch.hpp>
#include <thread>

#include "backends/postgresql/pg_listener.hpp"
#include "backends/postgresql/pg_session.hpp"
#include "sql/session_drivers.hpp"
#include "support/servers.hpp"

using namespace std::chrono_literals;

TEST_CASE("postgresql: a statement timeout while acquiring fails cleanly and leaves no half-acquired row",
          "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto holder = table.ns().open();
  dblock::LockOptions short_lease;
  short_lease.ttl = 200ms;
  short_lease.auto_renew = false;
  auto held = holder->lock("job", short_lease).acquire();
  std::this_thread::sleep_for(400ms);  // expired: an acquire will now try to take the row over
  // Another session locks the row, so the takeover must wait on it past its timeout.
  dblock::detail::sql::PgSession blocker(table.url(), "test", 10s);
  blocker.begin();
  blocker.run("SELECT 1 FROM " + table.name() + " WHERE name = 'job' FOR UPDATE", {});
  auto opts = table.options();
  opts.statement_timeout = 300ms;
  auto impatient = dblock::Client::open(table.url(), opts);
  CHECK_THROWS_AS(impatient->lock("job").try_acquire(), dblock::TimeoutError);
  blocker.rollback();
  auto rows = blocker.run("SELECT owner, fence, holds FROM " + table.name() + " WHERE name = 'job'", {}).rows;
  REQUIRE(rows.size() == 1);
  CHECK(std::get<std::string>(rows[0][0]) == held.owner());  // the timed-out attempt changed nothing
  CHECK(std::get<std::int64_t>(rows[0][1]) == static_cast<std::int64_t>(held.fence()));
  CHECK(std::get<std::int64_t>(rows[0][2]) == 1);
  auto taken = impatient->lock("job").try_acquire();  // and the client still works
  REQUIRE(taken);
  CHECK(taken->fence() > held.fence());
}

TEST_CASE("postgresql: advisory keys are a stable FNV-1a 64 of table:name", "[postgresql]") {
  using dblock::detail::sql::advisory_key;
  // Pinned values (also computed independently): changing the hash would let old and new
  // clients hold one name at the same time.
  CHECK(advisory_key("dblock_locks", "job") == -5573123621031060298LL);
  CHECK(advisory_key("public.t", "\xF0\x9F\x94\x92") == 4047364944702905467LL);
  CHECK(advisory_key("dblock_locks", "job") != advisory_key("other", "job"));
}

TEST_CASE("postgresql: the session strategies are offered, and the default is insert", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto c = table.ns().open();
  CHECK(c->backend() == "postgresql");
  auto s = c->strategies();
  CHECK(s == std::vector<dblock::Strategy>{dblock::Strategy::insert, dblock::Strategy::optimistic,
                                           dblock::Strategy::for_update, dblock::Strategy::advisory});
}

TEST_CASE("postgresql: a release wakes a waiter through LISTEN/NOTIFY", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto url = table.url();
  dblock::detail::sql::PgListener listener(
      [url] { return std::make_unique<dblock::detail::sql::PgSession>(url, "test", 10s); },
      "dblock_" + table.name());
  auto watch = listener.watch("job");
  REQUIRE(watch);  // LISTEN is in place before watch() returns
  auto other = listener.watch("other");
  dblock::detail::sql::PgSession notifier(url, "test", 10s);
  std::thread release([&] {
    std::this_thread::sleep_for(200ms);
    notifier.run("SELECT pg_notify('dblock_" + table.name() + "', 'job')", {});
  });
  auto t0 = std::chrono::steady_clock::now();
  watch->wait_until(t0 + 10s);
  auto woke_after = std::chrono::steady_clock::now() - t0;
  release.join();
  CHECK(woke_after < 5s);  // woken by the notification, long before the 10 s timeout
  auto t1 = std::chrono::steady_clock::now();
  other->wait_until(t1 + 300ms);  // a release of another name does not wake this one
  CHECK(std::chrono::steady_clock::now() - t1 >= 300ms);
}
