// The hand-over (docs/ARCHITECTURE.md, "Fair waiting"): a release that hands the row to the
// head of the line deletes the head's ticket, and a renewal of that ticket sent after it
// (the waiter had not yet learned it was handed the row) must not write it back: the ticket
// would outlive the acquire it was for and hold up other owners' grants for its life. The
// same check for every SQL database, on the dialect's own statements.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

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
  const auto life = std::int64_t{3000};
  auto join = [&](const std::string& owner, std::int64_t ticket) {
    return raw.run(d[Statement::queue_join], {std::string("job"), owner, life, ticket});
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
  CHECK(queued("waiter") == 0);
  CHECK(join("waiter", ticket).rows.empty());  // the renewal that crossed it: not written back
  CHECK(queued("waiter") == 0);
  CHECK(join("other", 0).rows.size() == 1);  // another owner still joins
  CHECK(queued("other") == 1);
}

}  // namespace dblock::test
