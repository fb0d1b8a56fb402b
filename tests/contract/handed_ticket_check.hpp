// The hand-over (docs/ARCHITECTURE.md, "Fair waiting"): a release that hands the row to the
// head of the line deletes the head's ticket, and a renewal of that ticket sent after it
// (the waiter had not yet learned it was handed the row) must not write it back: the ticket
// would outlive the acquire it was for and hold up other owners' grants for its life. The
// same check for every SQL database, on the dialect's own statements.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "dblock/dblock.hpp"
#include "sql/connection.hpp"
#include "sql/dialect.hpp"

namespace dblock::test {

// `d`: the dialect rendered for the Client's table; `raw`: a connection to its database.
inline void check_handed_ticket(Client& c, detail::sqldb::Connection& raw, const detail::sqldb::Dialect& d,
                                const std::string& queue_table) {
  namespace sq = detail::sqldb;
  using sq::Statement;
  LockOptions o;
  o.auto_renew = false;  // the release below is made by hand, and the lease then is not ours
  auto held = c.lock("job", o).acquire();
  const auto life = std::int64_t{3000}, lease = std::int64_t{20000};
  auto join = [&](const std::string& owner, std::int64_t ticket) {
    std::vector<sq::Value> params{std::string("job"), owner, life, ticket, lease};
    if (d.grant_waits_bounded) params.emplace_back(std::int64_t{1000});  // the row wait
    return raw.run(d[Statement::queue_join], params);
  };
  auto queued = [&](const std::string& owner) {
    return sq::as_int(raw.run("SELECT count(*) FROM " + queue_table + " WHERE owner = '" + owner + "'").rows.at(0).at(0));
  };
  auto joined = join("waiter", 0);
  REQUIRE(joined.rows.size() == 1);
  const auto ticket = sq::as_int(joined.rows.front().at(0));
  CHECK(join("waiter", ticket).rows.size() == 1);  // a renewal while it waits: written
  CHECK(queued("waiter") == 1);
  auto released = raw.run(d[Statement::insert_handover],
                          {std::string("job"), held.owner(), static_cast<std::int64_t>(held.fence())});
  REQUIRE_FALSE(released.rows.empty());
  REQUIRE(sq::as_int(released.rows.front().back()) == -1);  // handed over
  // For the lease the waiter asked for, not its ticket's life: a stall of the server or of
  // the new holder right after a hand-over costs no more than after any other grant.
  const auto lock_table = queue_table.substr(0, queue_table.size() - std::string("_queue").size());
  const auto left = sq::as_int(
      raw.run("SELECT valid_until - " + d.now_ms + " FROM " + lock_table + " WHERE name = 'job'").rows.at(0).at(0));
  CHECK(left > lease - 5000);
  CHECK(left <= lease);
  CHECK(queued("waiter") == 0);
  CHECK(join("waiter", ticket).rows.empty());  // the renewal that crossed it: not written back
  CHECK(queued("waiter") == 0);
  CHECK(join("other", 0).rows.size() == 1);  // another owner still joins
  CHECK(queued("other") == 1);
}

// The race the check above cannot see, on a server whose writers run side by side
// (PostgreSQL, MySQL; SQLite runs one writer at a time): a renewal whose read of the row
// came before the hand-over's commit and whose write came after writes the ticket back. The
// release of the row so handed deletes that ticket, so that it neither holds up later owners
// nor is handed the row next. `table`: the lock table; `d.now_ms`: the server's clock.
inline void check_written_back_ticket(Client& c, detail::sqldb::Connection& raw, const detail::sqldb::Dialect& d,
                                      const std::string& table) {
  namespace sq = detail::sqldb;
  using sq::Statement;
  const auto queue = table + "_queue";
  LockOptions o;
  o.auto_renew = false;  // released below by hand, and the lease then is not ours
  auto held = c.lock("job", o).acquire();
  auto join = [&](const std::string& owner) {
    std::vector<sq::Value> params{std::string("job"), owner, std::int64_t{3000}, std::int64_t{0}, std::int64_t{3000}};
    if (d.grant_waits_bounded) params.emplace_back(std::int64_t{1000});  // the row wait
    auto r = raw.run(d[Statement::queue_join], params);
    REQUIRE(r.rows.size() == 1);
    return sq::as_int(r.rows.front().at(0));
  };
  auto queued = [&](const std::string& owner) {
    return sq::as_int(raw.run("SELECT count(*) FROM " + queue + " WHERE owner = '" + owner + "'").rows.at(0).at(0));
  };
  auto hand_over = [&](const std::string& owner, std::int64_t fence) {
    auto r = raw.run(d[Statement::insert_handover], {std::string("job"), owner, fence});
    REQUIRE_FALSE(r.rows.empty());
    return sq::as_int(r.rows.front().back());  // -1: handed over
  };
  auto fence_now = [&] { return sq::as_int(raw.run("SELECT fence FROM " + table + " WHERE name = 'job'").rows.at(0).at(0)); };
  const auto ticket = join("waiter");
  REQUIRE(hand_over(held.owner(), static_cast<std::int64_t>(held.fence())) == -1);
  // The crossed renewal, as it lands: the ticket back under its old number.
  raw.run("INSERT INTO " + queue + " (name, owner, ticket, valid_until, lease_ms) VALUES ('job', 'waiter', " +
          std::to_string(ticket) + ", " + d.now_ms + " + 3000, 3000)");
  join("other");
  REQUIRE(hand_over("waiter", fence_now()) == -1);  // to `other`, the first of another owner
  CHECK(queued("waiter") == 0);
  // Left, it would take `other`'s hand-over, for an owner no longer waiting.
  CHECK(hand_over("other", fence_now()) != -1);
}

}  // namespace dblock::test
