// The pool of SQL connections: a Client's shared one (lease strategies, list, sweep, migrate)
// and the session strategies' own, whose connections stay pinned while a lock is held.
#pragma once

#include "core/pool.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sqldb {

using ConnectionPool = Pool<Connection>;

}  // namespace dblock::detail::sqldb
