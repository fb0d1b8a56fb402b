// What only the PostgreSQL backend promises.
#include <catch2/catch.hpp>
#include <thread>

#include "backends/postgresql/pg_listener.hpp"
#include "backends/postgresql/pg_session.hpp"
#include "sql/session_drivers.hpp"
#include "support/servers.hpp"

using namespace std::chrono_literals;

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
