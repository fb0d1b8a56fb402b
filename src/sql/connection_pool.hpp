// The pool of SQL connections: a Client's shared one (lease strategies, list, sweep, migrate)
// and the session strategies' own, whose connections stay pinned while a lock is held.
#pragma once

#include "core/connection_pool.hpp"
#include "sql/connection.hpp"

namespace dblock::detail::sqldb {

using ConnectionPool = detail::ConnectionPool<Connection>;

}  // namespace dblock::detail::sqldb
