// Turn keys (docs/ARCHITECTURE.md, "Fair waiting"): MySQL's waits in the server. Releases
// notify nobody on MySQL, so a queued lease waiter holds a named server lock of its own, its
// turn key, and blocks in the server on the key of the one ahead of it: the waiter with the
// next lower ticket, or the holder. A waiter that wins keeps its key until its release, so
// that release wakes exactly the next waiter (ZooKeeper's lock recipe, on GET_LOCK). A holder
// that never waited has no key: the waiter behind it polls. The key is taken in the text that
// writes the ticket, and the wait's text goes on to the grant attempt, so waiting costs no
// round trip of its own. The key's session is the one the waiter's busy attempt ran on: it
// leaves the Client's pool for as long as the key is held, so a waiting process holds one
// connection. A Client holds at most `most` keys (its pool_size): the waiters beyond, on other
// names (on one name a Client's threads queue in its gate first), wait without a key and poll,
// so that a Client never holds more than twice its pool_size connections, however many names
// its threads wait for.
#pragma once

#include <memory>

#include "core/validate.hpp"
#include "sql/dialect.hpp"
#include "sql/server_waits.hpp"

namespace dblock::detail::sqldb {

// A Client's turn keys on `table` (one object per Client, shared by its lease drivers), at
// most `most`. `dialect`: the MySQL dialect, not rendered (its queue_join goes into a join).
std::shared_ptr<ServerWaits> mysql_turn_keys(const Dialect& dialect, const TableName& table, std::size_t most);

}  // namespace dblock::detail::sqldb
