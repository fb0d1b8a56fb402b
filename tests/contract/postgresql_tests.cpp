// What only the PostgreSQL backend promises.
#include <atomic>
#include <cstdio>
#include <future>
#include <optional>
#include <random>
#include <catch2/catch.hpp>
#include <thread>
#include <tuple>

#include <pqxx/pqxx>

#include "backends/postgresql/pg_dialect.hpp"
#include "backends/postgresql/pg_listener.hpp"
#include "backends/postgresql/pg_connection.hpp"
#include "contract/share_lock_check.hpp"
#include "contract/client_rows_check.hpp"
#include "contract/dead_ticket_check.hpp"
#include "contract/wait_mark_check.hpp"
#include "contract/handed_ticket_check.hpp"
#include "contract/connection_slot_check.hpp"
#include "contract/least_privilege_check.hpp"
#include "contract/multiplexed_advisory_check.hpp"
#include "contract/upgrade_check.hpp"
#include "core/url.hpp"
#include "core/validate.hpp"
#include "sql/dialect.hpp"
#include "sql/lease_drivers.hpp"
#include "sql/session_drivers.hpp"
#include "support/eventually.hpp"
#include "support/servers.hpp"

using namespace std::chrono_literals;
using dblock::detail::sqldb::Statement;

TEST_CASE("postgresql: advisory keys are a stable FNV-1a 64 of table:name", "[postgresql]") {
  using dblock::detail::sqldb::advisory_key;
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
  dblock::detail::sqldb::PgListener listener(
      [url] { return std::make_unique<dblock::detail::sqldb::PgConnection>(url, "test", 10s); },
      "dblock_" + table.name(), true);
  auto watch = listener.watch("job", "me");
  REQUIRE(watch);  // LISTEN is in place before watch() returns
  auto other = listener.watch("other", "me");
  dblock::detail::sqldb::PgConnection notifier(url, "test", 10s);
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

// A primary behind a standby, as libpq finds it: the URL lists every host, and
// target_session_attrs=read-write skips those that refuse or only read. Here the first host
// refuses connections; every connection dblock opens (the pool, a session lock's pinned one,
// the LISTEN one a waiter opens) must reach the second.
TEST_CASE("postgresql: a multi-host URL reaches the host that answers read-write", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto ns = table.ns();
  const auto at = ns.url.find('@');
  REQUIRE(at != std::string::npos);
  ns.url = ns.url.substr(0, at + 1) + "127.0.0.1:1," + ns.url.substr(at + 1) +
           (ns.url.find('?') == std::string::npos ? "?" : "&") + "target_session_attrs=read-write";
  auto a = ns.open(), b = ns.open();
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::advisory}) {
    dblock::LockOptions o;
    o.strategy = strategy;
    auto held = a->lock("job", o).try_acquire();
    REQUIRE(held);
    CHECK_FALSE(b->lock("job", o).try_acquire());
    std::thread release([&] {
      std::this_thread::sleep_for(200ms);
      held->release();
    });
    auto next = b->lock("job", o).try_acquire(10s);
    release.join();
    REQUIRE(next);
    CHECK(next->fence() > held->fence());
  }
}

TEST_CASE("postgresql: a later migration upgrades a V1 table in place, keeping held locks", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto ns = table.ns();
  dblock::detail::sqldb::PgConnection raw(table.url(), "test", 10s);
  // A column added and the function every grant calls replaced, as a real V2 would.
  dblock::test::check_later_migration(
      [&] { return ns.open(); }, raw, dblock::detail::sqldb::postgresql_dialect(), table.name(),
      "ALTER TABLE ${table} ADD COLUMN note text NOT NULL DEFAULT '';\n"
      "CREATE OR REPLACE FUNCTION ${table}_fence_next() RETURNS bigint\n"
      "    LANGUAGE plpgsql VOLATILE SECURITY INVOKER AS $dblock$\n"
      "BEGIN\n"
      "    RETURN nextval('${table}_fence');\n"
      "END\n"
      "$dblock$;\n");
  // A table without the column (one that V1 alone made) answers a statement that reads it
  // with "run `dblock migrate`" (exit 78), as a missing function or table does.
  dblock::test::ScratchTable old(dblock::test::ScratchTable::Server::postgresql);
  CHECK_THROWS_AS(raw.run("SELECT note FROM " + old.name(), {}), dblock::SchemaError);
}

// What the migrations make, drop_schema removes (the bench and the tests drop their tables
// with it; a function left behind made the next migration of the same name fail).
TEST_CASE("postgresql: drop_schema removes every object the migrations made", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  dblock::detail::sqldb::PgConnection raw(table.url(), "test", 10s);
  const auto t = table.name();
  auto objects = [&] {
    return raw.run("SELECT (SELECT count(*) FROM pg_proc WHERE proname LIKE $1) + "
                   "(SELECT count(*) FROM pg_class WHERE relname LIKE $1)",
                   {t + "%"})
        .rows.at(0)
        .at(0);
  };
  CHECK(std::get<std::int64_t>(objects()) > 0);
  const auto& d = dblock::detail::sqldb::postgresql_dialect();
  raw.run_script(dblock::detail::sqldb::render(d[dblock::detail::sqldb::Statement::drop_schema],
                                               dblock::detail::parse_table_name(t), d.now_ms));
  CHECK(std::get<std::int64_t>(objects()) == 0);
}

TEST_CASE("postgresql: a renewal that waited for the row lock extends from before the wait", "[postgresql]") {
  // now() is the transaction's start, and the new valid_until is computed before the row
  // lock is waited for (clock_timestamp() would read the same moment): the extension is
  // measured from when the renewal was sent, as the core measures its lease, never from
  // later. Conservative, and nobody can take the row while the blocker holds it.
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto c = table.ns().open();
  dblock::LockOptions o;
  o.ttl = 30s;
  auto lease = c->lock("job", o).acquire();
  const auto owner = c->list().at(0).owner;
  const auto& d = dblock::detail::sqldb::postgresql_dialect();
  const auto t = dblock::detail::parse_table_name(table.name());
  auto blocker = dblock::test::server_connection(table.url()), renewer = dblock::test::server_connection(table.url());
  using dblock::detail::sqldb::Value;
  blocker->run("BEGIN");
  blocker->run("SELECT 1 FROM " + table.name() + " WHERE name = 'job' FOR UPDATE");
  std::int64_t answered = 0;
  std::thread renewal([&] {
    auto r = renewer->run(dblock::detail::sqldb::render(d[Statement::renew], t, d.now_ms),
                          {Value{std::string("job")}, Value{owner}, Value{static_cast<std::int64_t>(lease.fence())},
                           Value{std::int64_t{30000}}, Value{std::int64_t{1}}});
    REQUIRE(r.rows.size() == 1);
    answered = dblock::detail::sqldb::as_int(r.rows[0][0]);
  });
  std::this_thread::sleep_for(600ms);
  const auto freed_at = dblock::detail::sqldb::as_int(
      blocker->run("SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint").rows.at(0).at(0));
  blocker->run("COMMIT");
  renewal.join();
  const auto until = dblock::detail::sqldb::as_int(
      blocker->run("SELECT valid_until FROM " + table.name() + " WHERE name = 'job'").rows.at(0).at(0));
  CHECK(until <= freed_at + 30000 - 500);  // from before the 600 ms wait
  CHECK(until >= freed_at + 30000 - 5000);
  CHECK(answered == 30000);
  lease.release();
}

TEST_CASE("postgresql: a reader beside live readers takes the name's row shared and writes nothing of it",
          "[postgresql][shapes]") {
  // What lets readers' commits overlap and share WAL flushes (ARCHITECTURE, "Lock shapes").
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto a = table.ns().open(), b = table.ns().open();
  dblock::LockOptions o;
  o.ttl = 30s;
  auto first = a->lock("doc", o).acquire_shared();
  auto sql = dblock::test::server_connection(table.url());
  auto row = [&] {
    auto r = sql->run("SELECT owner, version, valid_until FROM " + table.name() + " WHERE name = 'doc'");
    return std::tuple{dblock::detail::sqldb::as_text(r.rows.at(0).at(0)), dblock::detail::sqldb::as_int(r.rows.at(0).at(1)),
                      dblock::detail::sqldb::as_int(r.rows.at(0).at(2))};
  };
  const auto before = row();
  CHECK(std::get<0>(before) == ":readers");
  // Another reader's grant under way holds the row shared: this reader does not wait for it.
  auto other = dblock::test::server_connection(table.url());
  auto second = dblock::test::acquire_shared_beside(*other, "BEGIN",
                                                 "SELECT 1 FROM " + table.name() + " WHERE name = 'doc' FOR SHARE",
                                                 b->lock("doc", o));
  CHECK(second.fence() > first.fence());
  CHECK(row() == before);  // neither owner, version nor valid_until moved
  first.release();
  CHECK(std::get<2>(row()) >= std::get<2>(before) - 1000);  // a reader is left: the row stays long enough
  second.release();
  CHECK(std::get<2>(row()) == 0);  // the last reader ends it: a writer gets in at once
  CHECK(a->lock("doc", o).try_acquire());
}

// on_lost runs on the hang-up thread while the owner may be releasing the same lease. The
// release cancels the watch under the grant's `use` and waits for an on_lost already under way
// only at its end, holding neither `use` nor the name's local Gate: so an on_lost that takes
// the name again is not stuck behind the owner's release (waiting under them, it was: the
// re-acquire below timed out), and the release still returns only once on_lost has returned.
TEST_CASE("postgresql: an on_lost that takes the lock again does not wait for the owner's release", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto c = table.ns().open();
  for (auto strategy : {dblock::Strategy::for_update, dblock::Strategy::advisory}) {
    INFO(dblock::to_string(strategy));
    std::atomic<bool> entered{false}, finished{false}, again{false};
    dblock::LockOptions plain;
    plain.strategy = strategy;
    plain.ttl = 30s;
    dblock::LockOptions o = plain;
    o.on_lost = [&](const std::string&, std::uint64_t) {
      entered = true;
      std::this_thread::sleep_for(200ms);  // the owner is in its release by now
      auto lease = c->lock("job", plain).try_acquire(3s);
      again = lease.has_value();
      if (lease) lease->release();  // from the hang-up thread: waits for nothing of its own
      finished = true;
    };
    auto lease = c->lock("job", o).acquire();
    REQUIRE(dblock::test::terminate_lock_holders(table.url(), table.name(), "job") == 1);
    REQUIRE(dblock::test::eventually([&] { return entered.load(); }, 3s));
    CHECK_THROWS_AS(lease.release(), dblock::LockLostError);
    CHECK(finished);  // release() returned after on_lost did
    CHECK(again);
  }
}

// The waiters' mark (wait_mark_check.hpp).
TEST_CASE("postgresql: a waiter marks the name's row, and the release wakes it", "[postgresql][fair]") {
  using namespace std::chrono_literals;
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto h = table.ns().open(), w = table.ns().open();
  dblock::detail::sqldb::PgConnection raw(table.url(), "test", 10s);
  dblock::test::check_wait_mark(
      *h, *w,
      [&]() -> std::optional<bool> {
        auto r = raw.run("SELECT (waited_until > (extract(epoch from now()) * 1000)::bigint)::int FROM " +
                             table.name() + " WHERE name = 'job'",
                         {});
        if (r.rows.empty()) return std::nullopt;
        return dblock::detail::sqldb::as_int(r.rows.front()[0]) == 1;
      },
      [&] { raw.run("UPDATE " + table.name() + " SET waited_until = 0", {}); });
}

// Fair waiting: a dead waiter's ticket (dead_ticket_check.hpp).
TEST_CASE("postgresql: a dead waiter's ticket holds the queue up only until it expires", "[postgresql][fair]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto c = table.ns().open();
  dblock::detail::sqldb::PgConnection raw(table.url(), "test", 10s);
  dblock::test::check_dead_ticket(*c, [&](const std::string& owner, int ms) {
    raw.run("INSERT INTO " + table.name() + "_queue (name, owner, ticket, valid_until, lease_ms) VALUES ('job', $1, 1, "
            "(extract(epoch from now()) * 1000)::bigint + $2::bigint, 30000)", {owner, std::int64_t{ms}});
    // And its mark, on the row it found held, which the holder's release freed and kept.
    raw.run("INSERT INTO " + table.name() + " (name, owner, fence, holds, acquired_at, valid_until, version, "
            "waited_until) VALUES ('job', '', 0, 0, 0, 0, 0, (extract(epoch from now()) * 1000)::bigint + $1::bigint) "
            "ON CONFLICT (name) DO UPDATE SET waited_until = EXCLUDED.waited_until", {std::int64_t{ms}});
  });
}

// for-update's fence is drawn on another connection (Statement::fence_next_held): it is
// answered only while the transaction that locked the row still runs after the draw, so a
// holder whose backend dies before its fence is drawn cannot carry a fence above its
// successor's. Each end of the locking transaction: a rollback, and a killed backend.
TEST_CASE("postgresql: a for-update fence is answered only while the row's locking transaction runs",
          "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  const auto& d = dblock::detail::sqldb::postgresql_dialect();
  auto text = [&](Statement s) {
    return dblock::detail::sqldb::render(d[s], dblock::detail::parse_table_name(table.name()), d.now_ms);
  };
  auto drawer = dblock::test::server_connection(table.url());
  drawer->run(text(Statement::for_update_create), {std::string("job")});
  for (const bool kill : {false, true}) {
    auto holder = dblock::test::server_connection(table.url());
    holder->begin();
    const auto transaction = holder->run(text(Statement::for_update_try), {std::string("job")}).rows.at(0).at(0);
    const auto held = drawer->run(text(Statement::fence_next_held), {transaction}).rows.at(0).at(0);
    REQUIRE(std::holds_alternative<std::int64_t>(held));
    CHECK(std::get<std::int64_t>(held) > 0);
    if (kill) {
      REQUIRE(dblock::test::terminate_lock_holders(table.url(), table.name(), "job") == 1);
    } else {
      holder->rollback();
    }
    REQUIRE(dblock::test::eventually(
        [&] {
          return std::holds_alternative<std::nullptr_t>(
              drawer->run(text(Statement::fence_next_held), {transaction}).rows.at(0).at(0));
        },
        3s));
  }
}

// Fair waiting's hand-over (pg_dialect.cpp, insert_handover): the release of a grant made
// after waiting, with a live ticket in the queue, grants the row to its head, which learns it
// from the notification and holds the lease without a statement; the lease is the TTL the
// head asked for. Both lease strategies.
namespace {
// A grant of `name` made after waiting (behind `first`, a Client that takes it and lets go):
// the kind whose release hands over.
dblock::Lease taken_after_waiting(dblock::Client& first, dblock::Client& c, const std::string& name,
                                  const dblock::LockOptions& o) {
  auto before = first.lock(name, o).acquire();
  auto waited = std::async(std::launch::async, [&] { return c.lock(name, o).try_acquire(60s); });
  std::this_thread::sleep_for(300ms);
  before.release();
  auto l = waited.get();
  REQUIRE(l);
  return std::move(*l);
}
}  // namespace

TEST_CASE("postgresql: a release hands the row to the head of the line, for the TTL it asked", "[postgresql][fair]") {
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic}) {
    dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
    auto h = table.ns().open(), w = table.ns().open();
    dblock::detail::sqldb::PgConnection raw(table.url(), "test", 10s);
    const std::string t = table.name();
    dblock::LockOptions o;
    o.strategy = strategy;
    o.ttl = 30s;
    auto left = [&] {
      auto r = raw.run("SELECT valid_until - (extract(epoch from now()) * 1000)::bigint, owner FROM " + t +
                       " WHERE name = 'job'", {});
      return r.rows.empty() ? std::int64_t{-1} : dblock::detail::sqldb::as_int(r.rows.front()[0]);
    };
    auto queued = [&] {
      return dblock::detail::sqldb::as_int(raw.run("SELECT count(*) FROM " + t + "_queue", {}).rows.front()[0]);
    };
    auto x = table.ns().open();
    auto held = taken_after_waiting(*x, *h, "job", o);
    // The waiter's process listens already (its first wait started the listener), as a busy
    // service's does: a release before LISTEN is in place reaches nobody, and the waiter then
    // takes the row over as a leftover of its own, with its TTL.
    CHECK_FALSE(w->lock("job", o).try_acquire(300ms));
    REQUIRE(queued() == 0);
    auto waiter = std::async(std::launch::async, [&] { return w->lock("job", o).try_acquire(60s); });
    REQUIRE(dblock::test::eventually([&] { return queued() == 1; }, 20s));
    const auto fence = held.fence();
    held.release();
    auto got = waiter.get();
    REQUIRE(got);
    CHECK(got->fence() > fence);
    const auto handed = left();
    CHECK(handed > 25000);  // the 30 s asked (a ticket's life, 3 s, was too short)
    CHECK(handed <= 30000);
    CHECK(queued() == 0);
    CHECK_FALSE(got->lost());
    got->release();
    CHECK(left() <= 0);  // freed (optimistic) or gone (insert, -1)
  }
}

// A waiter that died first in line is handed the row, and holds it for the hand-over's lease
// only: the next waiter gets it about 3 s after the release.
TEST_CASE("postgresql: a dead waiter handed the row holds it no longer than the hand-over's lease",
          "[postgresql][fair]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto h = table.ns().open(), c = table.ns().open(), x = table.ns().open();
  dblock::detail::sqldb::PgConnection raw(table.url(), "test", 10s);
  auto held = taken_after_waiting(*x, *h, "job", {});
  raw.run("INSERT INTO " + table.name() + "_queue (name, owner, ticket, valid_until, lease_ms) VALUES ('job', 'ghost', 1, "
          "(extract(epoch from now()) * 1000)::bigint + 60000, 3000)", {});
  const auto released = std::chrono::steady_clock::now();
  held.release();
  auto row = raw.run("SELECT owner, valid_until - (extract(epoch from now()) * 1000)::bigint FROM " + table.name() +
                     " WHERE name = 'job'", {});
  REQUIRE(row.rows.size() == 1);
  CHECK(dblock::detail::sqldb::as_text(row.rows.front()[0]) == "ghost");
  CHECK(dblock::detail::sqldb::as_int(row.rows.front()[1]) <= 3000);
  auto l = c->lock("job").try_acquire(60s);
  const auto took = std::chrono::steady_clock::now() - released;
  REQUIRE(l);
  CHECK(took > 2500ms);
  CHECK(took < 8s);  // 3 s, and at most the waiter's 1 s backoff more, on a loaded machine
}

// An acquire the core does not renew (auto_renew off) takes the hand-over too: its lease is
// the TTL it asked for, under the fence the release drew for it (a grant of its own would
// have drawn the next).
TEST_CASE("postgresql: a waiter that renews nothing is handed the row with its own TTL", "[postgresql][fair]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto h = table.ns().open(), w = table.ns().open(), x = table.ns().open();
  dblock::detail::sqldb::PgConnection raw(table.url(), "test", 10s);
  auto held = taken_after_waiting(*x, *h, "job", {});
  dblock::LockOptions o;
  o.auto_renew = false;
  o.ttl = 20s;
  CHECK_FALSE(w->lock("job", o).try_acquire(300ms));  // the process listens from here on
  auto waiter = std::async(std::launch::async, [&] { return w->lock("job", o).try_acquire(60s); });
  REQUIRE(dblock::test::eventually(
      [&] {
        return dblock::detail::sqldb::as_int(
                   raw.run("SELECT count(*) FROM " + table.name() + "_queue", {}).rows.front()[0]) == 1;
      },
      20s));
  const auto fence = held.fence();
  held.release();
  auto got = waiter.get();
  REQUIRE(got);
  CHECK(got->fence() == fence + 1);
  auto left = raw.run("SELECT valid_until - (extract(epoch from now()) * 1000)::bigint FROM " + table.name() +
                          " WHERE name = 'job'",
                      {});
  CHECK(dblock::detail::sqldb::as_int(left.rows.at(0)[0]) > 15000);
  got->release();
}

// A renewal of a ticket the release just handed the row to (handed_ticket_check.hpp).
TEST_CASE("postgresql: a renewal crossing the hand-over does not write the ticket back", "[postgresql][fair]") {
  namespace sq = dblock::detail::sqldb;
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto c = table.ns().open();
  const auto d = sq::postgresql_dialect().rendered(dblock::detail::parse_table_name(table.name()));
  sq::PgConnection raw(table.url(), "test", 10s);
  dblock::test::check_handed_ticket(*c, raw, d, table.name() + "_queue");
}

// A renewal that crossed the hand-over all the same (handed_ticket_check.hpp).
TEST_CASE("postgresql: a ticket written back across the hand-over goes with the holder's release",
          "[postgresql][fair]") {
  namespace sq = dblock::detail::sqldb;
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto c = table.ns().open();
  const auto d = sq::postgresql_dialect().rendered(dblock::detail::parse_table_name(table.name()));
  sq::PgConnection raw(table.url(), "test", 10s);
  dblock::test::check_written_back_ticket(*c, raw, d, table.name());
}

// A waiter that gives up with a hand-over received (its acquire ended without a lease, the
// grant not taken) passes the row on: the driver's own, with a notifier that says the
// hand-over came, and the hand-over made by the release statement itself, by hand.
// Its message read, it releases the row to the next in line; not read yet (the give-up came
// first), its ticket's DELETE waits for the hand-over's commit and handed_free frees the row,
// which it would otherwise hold for the TTL it asked for.
// Its message read, it releases the row to the next in line; not read yet (the give-up came
// first), its ticket's DELETE waits for the hand-over's commit and handed_free frees the row,
// which it would otherwise hold for the TTL it asked for.
TEST_CASE("postgresql: a waiter that gives up after the row was handed to it passes it on", "[postgresql][fair]") {
  namespace sq = dblock::detail::sqldb;
  struct Handed final : sq::Notifier {
    std::optional<dblock::detail::Handover> grant;
    void released(const std::string&, const std::string&) noexcept override {}
    std::unique_ptr<dblock::detail::ReleaseWatch> watch(const std::string&, const std::string&) override {
      return nullptr;
    }
    std::optional<dblock::detail::Handover> take_handover(const std::string&, const std::string&) override {
      return std::exchange(grant, std::nullopt);
    }
  };
  for (bool message_read : {true, false}) {
  CAPTURE(message_read);
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  const auto url = table.url();
  const auto d = sq::postgresql_dialect().rendered(dblock::detail::parse_table_name(table.name()));
  sq::ConnectionPool::Open open = [url] { return std::make_unique<sq::PgConnection>(url, "test", 10s); };
  sq::ConnectionPool pool(open, {2, 2, 10s, "test connections"});
  auto notifier = std::make_shared<Handed>();
  sq::InsertDriver driver(pool, d, notifier, nullptr, 10s);
  sq::PgConnection raw(url, "test", 10s);
  auto c = table.ns().open();
  dblock::LockOptions o;
  o.auto_renew = false;  // the test takes the row away from this lease
  auto held = c->lock("job", o).acquire();
  const std::string me = "test:1:0:t1";
  dblock::detail::AcquireRequest req{"job", me, 30s, 10s, nullptr};
  auto a = driver.try_acquire(req);
  REQUIRE_FALSE(a.acquired());
  REQUIRE(a.place);
  raw.run("INSERT INTO " + table.name() + "_queue (name, owner, ticket, valid_until, lease_ms) VALUES ('job', 'next', "
          "(SELECT max(ticket) + 1 FROM " + table.name() + "_queue), (extract(epoch from now()) * 1000)::bigint + 60000, 30000)",
          {});
  const auto ticket = sq::as_int(
      raw.run("SELECT ticket FROM " + table.name() + "_queue WHERE owner = $1", {me}).rows.at(0).at(0));
  raw.run(d[Statement::insert_handover], {std::string("job"), held.owner(), static_cast<std::int64_t>(held.fence())});
  auto owner_fence = [&] {
    auto r = raw.run("SELECT owner, fence FROM " + table.name() + " WHERE name = 'job'", {});
    REQUIRE(r.rows.size() == 1);
    return std::make_pair(sq::as_text(r.rows.front()[0]), sq::as_int(r.rows.front()[1]));
  };
  auto [to, fence] = owner_fence();
  REQUIRE(to == me);
  if (message_read) notifier->grant = dblock::detail::Handover{static_cast<std::uint64_t>(fence), std::to_string(ticket)};
  a.place.reset();  // the acquire gives up
  auto [next, next_fence] = owner_fence();
  if (message_read) {
    CHECK(next == "next");
    CHECK(next_fence > fence);
  } else {
    CHECK(next.empty());  // freed: 'next' (no process) is woken and takes it as any free row
    CHECK(sq::as_int(raw.run("SELECT holds FROM " + table.name() + " WHERE name = 'job'", {}).rows.at(0).at(0)) == 0);
  }
  }
}

// PostgreSQL's channel names stop at 63 bytes, and a release notifies on 'dblock_<table>':
// a longer table name made every release fail (the lock only expired). Refused at open, with
// nothing written.
TEST_CASE("postgresql: a table name too long for its release channel is refused, nothing written", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  dblock::ClientOptions o;
  o.table = "s234567890123456789012345678901234567890.t2345678901234";  // 55 bytes: channel 62
  dblock::ClientOptions longer = o;
  longer.table += "5";  // 56: 63, still accepted
  dblock::ClientOptions too_long = longer;
  too_long.table += "6";
  longer.auto_migrate = false;
  too_long.auto_migrate = true;
  CHECK_THROWS_WITH(dblock::Client::open(table.url(), too_long),
                    Catch::Contains("too long for postgresql") && Catch::Contains("63 bytes"));
  dblock::detail::sqldb::PgConnection raw(table.url(), "test", 10s);
  CHECK(dblock::detail::sqldb::as_int(
            raw.run("SELECT count(*) FROM pg_namespace WHERE nspname = 's234567890123456789012345678901234567890'", {})
                .rows.front()[0]) == 0);
  CHECK_NOTHROW(dblock::Client::open(table.url(), longer));
}

// Any role that may connect can NOTIFY: a hand-over message naming a queued waiter's owner and
// ticket (read from the queue table), as a release would send it, must not start the waiter
// while the holder holds. The waiter is woken, reads the row (handed_check), and waits on.
TEST_CASE("postgresql: a forged hand-over message starts nobody", "[postgresql][fair]") {
  namespace sq = dblock::detail::sqldb;
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto holder = table.ns().open(), waiter = table.ns().open();
  auto lease = holder->lock("job").acquire();
  std::atomic<bool> got{false};
  std::uint64_t waiter_fence = 0;
  auto waited = std::async(std::launch::async, [&] {
    auto l = waiter->lock("job").try_acquire(30s);
    if (l) waiter_fence = l->fence();
    got = l.has_value();
  });
  sq::PgConnection raw(table.url(), "test", 10s);
  std::string owner;
  std::int64_t ticket = 0;
  REQUIRE(dblock::test::eventually([&] {
    auto r = raw.run("SELECT owner, ticket FROM " + table.name() + "_queue WHERE name = 'job'", {});
    if (r.rows.empty()) return false;
    owner = sq::as_text(r.rows.front()[0]);
    ticket = sq::as_int(r.rows.front()[1]);
    return true;
  }, 10s));
  // "FENCE LEASE_MS TICKET OWNER_BYTES OWNER NAME", with the holder's fence and a later one.
  for (auto fence : {lease.fence(), lease.fence() + 1}) {
    auto payload = std::to_string(fence) + " 3000 " + std::to_string(ticket) + " " + std::to_string(owner.size()) +
                   " " + owner + "job";
    raw.run("SELECT pg_notify($1, $2)", {dblock::detail::sqldb::handover_channel(), payload});
  }
  std::this_thread::sleep_for(1s);
  CHECK_FALSE(got);
  CHECK_FALSE(lease.lost());
  auto fence = lease.fence();
  lease.release();
  waited.get();
  CHECK(got);
  CHECK(waiter_fence > fence);
}

// Through PgBouncer in transaction mode (scripts/services start pgbouncer): the contract suite
// runs there on the lease strategies (PgBouncerInsert, PgBouncerOptimistic); here what only a
// transaction pooler changes. Consecutive transactions of one connection run on different
// server sessions, so before `pooler=transaction` every second statement failed with
// 'prepared statement "dblock_1" already exists'.
TEST_CASE("postgresql through a transaction pooler: leases and wake-ups work, session locks are refused", "[pgbouncer]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  const auto pooled = dblock::test::server_url("DBLOCK_TEST_PGBOUNCER_URL");  // with listen_port
  const auto polling = pooled.substr(0, pooled.find("&listen_port="));     // no listener: waiters poll
  REQUIRE(polling != pooled);
  auto open = [&](const std::string& url) { return dblock::Client::open(url, table.options()); };

  // Clients on more connections than the pooler has server sessions (20), every one of
  // which runs statements of several clients: the same statement texts, unnamed.
  for (const auto& url : {pooled, polling}) {
    INFO(dblock::detail::parse_url(url).redacted());
    std::vector<std::shared_ptr<dblock::Client>> clients;
    for (int i = 0; i < 6; ++i) clients.push_back(open(url));
    std::atomic<int> inside{0}, most{0}, grants{0};
    std::vector<std::thread> threads;
    for (auto& c : clients)
      for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, c] {
          for (int k = 0; k < 5; ++k) {
            auto lease = c->lock("job").try_acquire(60s);  // (no Catch assertion off the main thread)
            if (!lease) break;
            most = std::max(most.load(), ++inside);
            std::this_thread::sleep_for(1ms);
            --inside;
            ++grants;
            lease->release();
          }
        });
    for (auto& t : threads) t.join();
    CHECK(most == 1);
    CHECK(grants == 6 * 4 * 5);
  }

  // A waiter is woken by the release (LISTEN on the server itself), or finds it polling.
  for (const auto& url : {pooled, polling}) {
    auto a = open(url), b = open(url);
    auto held = a->lock("wake").acquire();
    auto fence = held.fence();
    auto waiter = std::async(std::launch::async, [&] { return b->lock("wake").try_acquire(30s).value().fence(); });
    std::this_thread::sleep_for(300ms);
    held.release();
    CHECK(waiter.get() > fence);
  }

  // A session lock would live in a server session the pooler lends on: refused, one line.
  for (auto strategy : {dblock::Strategy::advisory, dblock::Strategy::for_update}) {
    dblock::LockOptions o;
    o.strategy = strategy;
    auto c = open(pooled);
    try {
      (void)c->lock("job", o).try_acquire();
      FAIL("a session lock through a transaction pooler");
    } catch (const dblock::UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains("transaction pooler") && Catch::Contains("lease strategy"));
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
  // dblock's own parameters are checked, and never reach libpq.
  auto refused = [&](const std::string& url, const char* says) {
    try {
      open(url);
      FAIL("accepted " << url);
    } catch (const dblock::UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains(says) && !Catch::Contains(":dblock@"));
    }
  };
  refused(polling.substr(0, polling.find("pooler=")) + "pooler=statement", "pooler='statement' is not known");
  refused(table.url() + "?listen_port=5432", "listen_host and listen_port go with pooler=transaction");
  refused(polling + "&listen_port=x", "not a port number");
}

// The TLS-only server (scripts/services start postgresql-tls): libpq's own TLS, through the URL
// as it is. What each wrong setup answers, and the doctor's transport line. The contract
// suite itself runs there too (PgTlsInsert).
TEST_CASE("postgresql over TLS: the server is verified, and each wrong setup fails in one line", "[postgresql-tls]") {
  const auto tls_url = dblock::test::server_url("DBLOCK_TEST_PG_TLS_URL");
  const char* certs_env = std::getenv("DBLOCK_TEST_CERTS");
  if (!certs_env || !*certs_env) FAIL("DBLOCK_TEST_CERTS is not set (scripts/services env postgresql-tls sets it)");
  const std::string certs = certs_env;
  const auto at = [](const std::string& url) {
    auto u = dblock::detail::parse_url(url);
    return u.hosts.at(0).host + ":" + std::to_string(u.hosts[0].port) + "/" + u.path;
  };
  const auto server = at(tls_url), plain_server = at(dblock::test::server_url("DBLOCK_TEST_PG_URL"));
  const auto root = "sslrootcert=" + certs + "/ca.pem";
  const auto cert = "&sslcert=" + certs + "/client.pem&sslkey=" + certs + "/client.key";
  auto refused = [&](const std::string& url, const char* says) {
    INFO(dblock::detail::parse_url(url).redacted());
    try {
      dblock::Client::open(url);
      FAIL("let in");
    } catch (const dblock::UnavailableError& e) {
      CHECK_THAT(e.what(), Catch::Contains(says) && !Catch::Contains("Wr0ng"));
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  };
  refused("postgresql://dblock:dblock@" + server + "?sslmode=verify-full&sslrootcert=" + certs + "/other-ca.pem" + cert,
          "certificate verify failed");                                                              // a CA that signed nothing of ours
  refused("postgresql://dblock:dblock@" + server + "?sslmode=verify-full&" + root, "client certificate");  // none given
  refused("postgresql://dblock:dblock@" + server + "?sslmode=disable", "no encryption");  // plaintext to a TLS-only server
  refused("postgresql://dblock:Wr0ng@" + server + "?sslmode=verify-full&" + root + cert, "password authentication failed");
  refused("postgresql://dblock:dblock@" + plain_server + "?sslmode=require", "does not support SSL");  // TLS to a plaintext one

  auto transport = [](const std::string& url) {
    auto checks = dblock::Client::open(url)->check_settings();
    REQUIRE_FALSE(checks.empty());
    CHECK(checks.back().setting == "transport");
    return checks.back().value;
  };
  CHECK_THAT(transport(tls_url), Catch::StartsWith("TLSv1.") && Catch::EndsWith("server verified (chain and name)"));
  CHECK_THAT(transport("postgresql://dblock:dblock@" + server + "?sslmode=verify-ca&" + root + cert),
             Catch::EndsWith("server's chain verified (not its name)"));
  // libpq checks the chain under `require` too once it has a root certificate.
  CHECK_THAT(transport("postgresql://dblock:dblock@" + server + "?sslmode=require&" + root + cert),
             Catch::EndsWith("server's chain verified (not its name)"));
  CHECK(transport("postgresql://dblock:dblock@" + plain_server) == "plaintext");
}

// docs/SECURITY.md's three roles, as its recipe grants them: a migrator that owns the
// objects, a locker and a sweeper that get the rights to them through default privileges
// (granted once, before the first migration, so later migrations' objects are covered too).
TEST_CASE("postgresql: the least-privilege roles lock and sweep, and cannot migrate", "[postgresql]") {
  const auto server = dblock::detail::parse_url(dblock::test::server_url("DBLOCK_TEST_PG_URL"));
  const auto suffix = std::to_string(std::random_device{}());
  const std::string migrator = "dblock_migrator_" + suffix, locker = "dblock_locker_" + suffix,
                    sweeper = "dblock_sweeper_" + suffix, table = "dblock_lp_" + suffix;
  auto as = [&](const std::string& role) {
    return "postgresql://" + role + ":" + role + "-pw@" + server.hosts.at(0).host + ":" +
           std::to_string(server.hosts[0].port) + "/" + server.path;
  };
  auto admin = dblock::test::server_connection(server.original);
  for (const auto& role : {migrator, locker, sweeper})
    admin->run_script("CREATE ROLE " + role + " LOGIN PASSWORD '" + role + "-pw'");
  struct Cleanup {
    dblock::test::Connection& admin;
    std::string migrator, locker, sweeper, table;
    ~Cleanup() {
      try {
        admin.run_script("GRANT " + migrator + " TO current_user; DROP TABLE IF EXISTS " + table + ", " + table +
                         "_holders, " + table + "_queue, " + table + "_schema_history CASCADE; DROP OWNED BY " +
                         migrator + ", " + locker + ", " + sweeper + "; DROP ROLE " + migrator + ", " + locker +
                         ", " + sweeper);
      } catch (...) {  // leftover roles in a throwaway server are harmless
      }
    }
  } cleanup{*admin, migrator, locker, sweeper, table};
  // The recipe (docs/SECURITY.md, "Least privilege"), for the public schema.
  admin->run_script("GRANT CREATE, USAGE ON SCHEMA public TO " + migrator + "; GRANT USAGE ON SCHEMA public TO " +
                    locker + ", " + sweeper + "; GRANT " + migrator + " TO current_user; " +
                    "ALTER DEFAULT PRIVILEGES FOR ROLE " + migrator + " IN SCHEMA public GRANT SELECT, INSERT, UPDATE, "
                    "DELETE ON TABLES TO " + locker + "; ALTER DEFAULT PRIVILEGES FOR ROLE " + migrator +
                    " IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO " + locker +
                    "; ALTER DEFAULT PRIVILEGES FOR ROLE " + migrator + " IN SCHEMA public GRANT SELECT, UPDATE, DELETE "
                    "ON TABLES TO " + sweeper + "; REVOKE " + migrator + " FROM current_user");
  dblock::ClientOptions o;
  o.table = table;
  auto migrating = o;
  migrating.auto_migrate = true;
  dblock::Client::open(as(migrator), migrating);

  dblock::test::check_locker_and_sweeper(as(locker), as(sweeper), o);
  CHECK_THROWS_AS(dblock::Client::open(as(locker), o)->migrate(), dblock::UnavailableError);  // the locker creates nothing
  auto other = o;
  other.table = table + "_other";
  other.auto_migrate = true;
  CHECK_THROWS_AS(dblock::Client::open(as(locker), other), dblock::UnavailableError);  // permission denied for schema public
}

TEST_CASE("postgresql: a role with no connection slot left waits for one within the acquire's wait", "[postgresql]") {
  const auto server = dblock::detail::parse_url(dblock::test::server_url("DBLOCK_TEST_PG_URL"));
  const std::string role = "dblock_slots_" + std::to_string(std::random_device{}());
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto admin = dblock::test::server_connection(server.original);
  // Three connections: the Client's, its listener's, and one more.
  admin->run_script("CREATE ROLE " + role + " LOGIN PASSWORD '" + role + "-pw' CONNECTION LIMIT 3; GRANT " +
                    server.user + " TO " + role);
  struct Cleanup {
    dblock::test::Connection& admin;
    std::string role;
    ~Cleanup() {
      try {
        admin.run_script("DROP ROLE " + role);
      } catch (...) {  // a leftover role in a throwaway server is harmless
      }
    }
  } cleanup{*admin, role};
  dblock::test::check_waits_for_a_connection_slot(
      "postgresql://" + role + ":" + role + "-pw@" + server.hosts.at(0).host + ":" +
          std::to_string(server.hosts[0].port) + "/" + server.path,
      "too many connections for role", table.options(),
      [&] {
        admin->run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", {role});
        REQUIRE(dblock::test::eventually([&] {
          return dblock::detail::sqldb::as_int(
                     admin->run("SELECT count(*) FROM pg_stat_activity WHERE usename = $1", {role}).rows.at(0).at(0)) == 0;
        }));
      });
}

TEST_CASE("postgresql: one Client's advisory locks share a few connections", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto admin = dblock::test::server_connection(table.url());
  dblock::test::check_multiplexed_advisory(table.ns(), [&](const std::string& name) {
    REQUIRE(dblock::test::terminate_lock_holders(*admin, table.url(), table.name(), name) == 1);
  });
}

// A waiting process held two connections: its pool's and its listener's. The listener now
// listens on the pool's idle connection and lends it back for statements, one at a time.
TEST_CASE("postgresql: a waiting Client keeps one connection, which its listener shares", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto admin = dblock::test::server_connection(table.url());
  const std::string app = "dblock_one_" + std::to_string(std::random_device{}());
  auto waiter_ns = table.ns();  // its connections told apart by their application_name
  waiter_ns.url += (waiter_ns.url.find('?') == std::string::npos ? "?" : "&") + std::string("application_name=") + app;
  auto connections = [&] {
    return dblock::detail::sqldb::as_int(
        admin->run("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", {app}).rows.at(0).at(0));
  };
  auto holder = table.ns().open();
  auto waiter = waiter_ns.open();
  auto held = holder->lock("job").acquire();
  std::atomic<bool> got{false};
  std::uint64_t fence = 0;
  std::optional<dblock::Lease> lease;
  std::thread waiting([&] {
    lease = waiter->lock("job").try_acquire(20s);
    if (!lease) return;
    fence = lease->fence();
    got = true;
  });
  // While it waits (a few attempts, each on the lent connection): one connection, never two.
  std::int64_t most = 0, seen = 0;
  for (int i = 0; i < 30; ++i) {
    auto n = connections();
    most = std::max(most, n);
    seen += n == 1;
    std::this_thread::sleep_for(50ms);
  }
  CHECK(most == 1);
  CHECK(seen > 0);
  CHECK_FALSE(got);
  const auto released_at = std::chrono::steady_clock::now();
  held.release();  // the notification reaches the waiter on that same connection
  REQUIRE(dblock::test::eventually([&] { return got.load(); }));
  CHECK(std::chrono::steady_clock::now() - released_at < 2s);
  waiting.join();
  CHECK(fence > held.fence());
  CHECK(connections() == 1);
  // A session lock never lives in the lent connection: it gets one of its own.
  dblock::LockOptions session;
  session.strategy = dblock::Strategy::advisory;
  auto pinned = waiter->lock("pinned", session).try_acquire();
  REQUIRE(pinned);
  CHECK(connections() == 2);
  pinned->release();
  // The shared connection killed (an administrator, a restart) while a waiter waits: the
  // listener subscribes again on a connection of its own, and the waiter still wakes.
  auto kill = [&] {
    admin->run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", {app});
  };
  for (int round = 0; round < 2; ++round) {
    auto busy = holder->lock("second").acquire();
    std::optional<dblock::Lease> second;
    std::string failed;  // what the wait threw, reported here rather than aborting the run
    std::thread again([&] {
      try {
        second = waiter->lock("second").try_acquire(20s);
      } catch (const std::exception& e) {
        failed = e.what();
      }
    });
    std::this_thread::sleep_for(300ms);
    if (round == 0) {
      kill();
      std::this_thread::sleep_for(1s);  // the listener subscribes again (after 200 ms)
    } else {
      // The next wait gives up the idle connection the pool opened meanwhile: one again.
      CHECK(connections() == 1);
    }
    const auto freed_at = std::chrono::steady_clock::now();
    busy.release();
    again.join();
    CHECK(failed == "");
    REQUIRE(second);
    CHECK(std::chrono::steady_clock::now() - freed_at < 2s);
    second->release();
  }
  CHECK_FALSE(lease->lost());
  lease->release();  // through the lent connection
}

// Each NOTIFY wakes every backend listening on its channel, and their clients: a hand-over
// told on one channel for all woke every waiting process for one of them to act.
TEST_CASE("postgresql: a hand-over is told on the channel of its head's process only", "[postgresql][fair]") {
  namespace sq = dblock::detail::sqldb;
  struct Heard final : pqxx::notification_receiver {
    Heard(pqxx::connection_base& c, const std::string& channel) : pqxx::notification_receiver(c, channel) {}
    void operator()(const std::string& payload, int) override { payloads.push_back(payload); }
    std::vector<std::string> payloads;
  };
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  sq::PgConnection spy(table.url(), "test", 10s);
  Heard mine(spy.connection(), sq::handover_channel()), everyone(spy.connection(), "dblock handed");
  spy.connection().get_notifs();
  auto queued = [&](int n) {
    return dblock::test::eventually([&] {
      return spy.run("SELECT 1 FROM " + table.name() + "_queue WHERE name = 'job'", {}).rows.size() ==
             static_cast<std::size_t>(n);
    });
  };
  // A grant made after waiting hands the row over at its release: the first waiter's.
  auto holder = table.ns().open(), first = table.ns().open(), second = table.ns().open();
  auto lease = holder->lock("job").acquire();
  std::promise<void> go;
  auto first_done = std::async(std::launch::async, [&] {
    auto l = first->lock("job").try_acquire(30s);
    go.get_future().wait();
    return l.has_value();
  });
  REQUIRE(queued(1));
  auto second_done = std::async(std::launch::async, [&] { return second->lock("job").try_acquire(30s); });
  REQUIRE(queued(2));
  lease.release();
  REQUIRE(queued(1));  // the first waiter holds it
  go.set_value();      // and releases: handed to the second
  REQUIRE(first_done.get());
  auto handed = second_done.get();
  REQUIRE(handed);
  REQUIRE(dblock::test::eventually([&] {
    spy.connection().get_notifs();
    return !mine.payloads.empty();
  }));
  CHECK_THAT(mine.payloads.front(), Catch::StartsWith(std::to_string(handed->fence()) + " "));
  CHECK(everyone.payloads.empty());
}


// Renewal by Client row (client_rows_check.hpp).
TEST_CASE("postgresql: one Client row keeps a Client's leases, and its expiry loses them all", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  dblock::test::check_client_rows(table, "client IS NOT NULL", dblock::detail::sqldb::postgresql_dialect().now_ms);
}

TEST_CASE("postgresql: a lease declared lost is let go by its Client row", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  dblock::test::check_lost_lease_detached(table, "client IS NOT NULL");
}

TEST_CASE("postgresql: a renewal waits for no other Client's row", "[postgresql]") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  dblock::test::check_renewal_reads_its_own_row(table, "client IS NOT NULL",
                                                dblock::detail::sqldb::postgresql_dialect().now_ms);
}
