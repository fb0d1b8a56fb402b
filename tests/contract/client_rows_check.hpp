// Renewal by Client row (docs/ARCHITECTURE.md, "Client rows"): after its first renewal with
// others a lease's row names its Client's row, and the Client's ticks write that one row, not
// the lease's. The same checks for every SQL database that has Client rows; `attached` is the
// dialect's test of a row naming one ("client IS NOT NULL", "client <> ''"), `now_ms` its clock.
#pragma once

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dblock/dblock.hpp"
#include "sql/connection.hpp"
#include "support/eventually.hpp"
#include "support/servers.hpp"

namespace dblock::test {

// Expiring the Client row (a process that stalled past the TTL) frees every lease it kept,
// and the holder is told each is lost; a lease released or kept after release stops naming it;
// the sweep deletes expired Client rows.
inline void check_client_rows(ScratchTable& table, const std::string& attached, const std::string& now_ms) {
  using namespace std::chrono_literals;
  using detail::sqldb::as_int;
  auto a = table.ns().open(), b = table.ns().open();
  auto sql = server_connection(table.url());
  const auto count = [&](const std::string& where, const std::string& of = "*") {
    return as_int(sql->run("SELECT count(" + of + ") FROM " + table.name() + " WHERE " + where).rows.at(0).at(0));
  };
  std::atomic<int> lost{0};
  for (auto strategy : {Strategy::insert, Strategy::optimistic}) {
    INFO(to_string(strategy));
    lost = 0;
    LockOptions o;
    o.strategy = strategy;
    o.ttl = 900ms;  // renewed every 300 ms
    o.on_lost = [&](const std::string&, std::uint64_t) { ++lost; };
    std::vector<Lease> held;
    for (int i = 0; i < 5; ++i) held.push_back(a->lock("job" + std::to_string(i), o).acquire());
    REQUIRE(eventually([&] { return count(attached) == 5; }, 3s));
    // Held past their own valid_until, by the one Client row alone.
    std::this_thread::sleep_for(1200ms);
    CHECK(count("valid_until > " + now_ms) == 0);
    CHECK(count(attached, "DISTINCT client") == 1);
    CHECK_FALSE(b->lock("job0", o).try_acquire(0ms));
    CHECK(lost == 0);
    // A released row names no Client row (an optimistic one stays, free).
    held[4].release();
    held.pop_back();
    CHECK(b->lock("job4", o).try_acquire(0ms));
    // The Client row expires (the process stalled): every lease it kept is free, and lost.
    sql->run("UPDATE " + table.name() + "_clients SET valid_until = 0");
    auto taken = b->lock("job0", o).try_acquire(0ms);
    CHECK(taken);
    REQUIRE(eventually([&] { return lost.load() == 4; }, 3s));
    for (auto& l : held) CHECK(l.lost());
    CHECK_THROWS_AS(held[0].release(), LockLostError);  // taken over
    for (auto& l : held) {
      try {
        l.release();  // expired, not taken: the row is still ours to delete
      } catch (const LockLostError&) {
      }
    }
    if (taken) taken->release();
    b->sweep();
    CHECK(as_int(sql->run("SELECT count(*) FROM " + table.name() + "_clients WHERE valid_until = 0").rows.at(0).at(0)) ==
          0);
  }
}

// A lease the Client declared lost while its Client row lived on (here: the tick's extension
// waited past the leases' deadline behind another transaction, and committed) must not stay
// held by that row for as long as the Client's other leases keep it alive: the next tick that
// finds it among the rows naming the Client row detaches it. (A Client's leases attach when
// renewed together: a lone lease renews its own row.)
inline void check_lost_lease_detached(ScratchTable& table, const std::string& attached) {
  using namespace std::chrono_literals;
  using detail::sqldb::as_int;
  auto a = table.ns().open(), b = table.ns().open();
  auto sql = server_connection(table.url()), blocker = server_connection(table.url());
  const auto named = [&](const std::string& name) {
    return as_int(sql->run("SELECT count(*) FROM " + table.name() + " WHERE " + attached + " AND name = '" + name + "'")
                      .rows.at(0)
                      .at(0)) == 1;
  };
  std::atomic<int> lost{0};
  LockOptions o;
  o.ttl = 900ms;
  o.on_lost = [&](const std::string&, std::uint64_t) { ++lost; };
  auto first = a->lock("first", o).acquire();
  auto first2 = a->lock("first2", o).acquire();
  REQUIRE(eventually([&] { return named("first") && named("first2"); }, 3s));
  blocker->run("BEGIN");
  blocker->run("SELECT 1 FROM " + table.name() + "_clients FOR UPDATE");
  // Declared lost at their deadline, a tick after the one that waits: that one extends the
  // Client row from its start, so for one more renewal interval it is alive. Leases of the
  // same TTL renewed every 50 ms attach to it within that interval and keep it alive.
  REQUIRE(eventually([&] { return lost.load() == 2; }, 3s));
  blocker->run("COMMIT");
  LockOptions often = o;
  often.renew_every = 50ms;
  auto second = a->lock("second", often).acquire();
  auto second2 = a->lock("second2", often).acquire();
  REQUIRE(eventually([&] { return named("second") && named("second2"); }, 3s));
  // Without the detach, "first" would stay held by the Client row "second" keeps alive.
  std::optional<Lease> taken;
  CHECK(eventually(
      [&] {
        taken = b->lock("first", o).try_acquire(0ms);
        return taken.has_value();
      },
      5s));
  CHECK(lost == 2);
  CHECK_FALSE(second.lost());
  for (auto* l : {&first, &first2}) {
    try {
      l->release();
    } catch (const LockLostError&) {
    }
  }
}

// A tick reads only its own Client row: another Client's row, locked by that Client's tick
// under way (here an insert not yet committed), holds up no one else's renewal. On InnoDB a
// multi-table UPDATE's subqueries take share locks even under READ COMMITTED, so a renewal that
// scanned `<table>_clients` instead of finding its row by key waited for every Client's tick,
// and under a crowd lost whole Clients' leases.
inline void check_renewal_reads_its_own_row(ScratchTable& table, const std::string& attached,
                                            const std::string& now_ms) {
  using namespace std::chrono_literals;
  using detail::sqldb::as_int;
  auto a = table.ns().open();
  auto sql = server_connection(table.url()), blocker = server_connection(table.url());
  std::atomic<int> lost{0};
  LockOptions o;
  o.ttl = 900ms;
  o.on_lost = [&](const std::string&, std::uint64_t) { ++lost; };
  blocker->run("BEGIN");
  blocker->run("INSERT INTO " + table.name() + "_clients (id, valid_until) VALUES ('" + std::string(32, 'f') +
               "', " + now_ms + " + 600000)");
  std::vector<Lease> held;
  for (int i = 0; i < 3; ++i) held.push_back(a->lock("own" + std::to_string(i), o).acquire());
  CHECK(eventually(
      [&] {
        return as_int(sql->run("SELECT count(*) FROM " + table.name() + " WHERE " + attached).rows.at(0).at(0)) == 3;
      },
      3s));
  std::this_thread::sleep_for(1200ms);  // past the leases' own time: the Client row keeps them
  CHECK(lost == 0);
  blocker->run("ROLLBACK");
  for (auto& l : held) l.release();
}

}  // namespace dblock::test
