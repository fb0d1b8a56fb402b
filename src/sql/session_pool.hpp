// The pool of SQL sessions: a Client's shared one (lease strategies, list, sweep, migrate)
// and the session strategies' own, whose connections stay pinned while a lock is held.
#pragma once

#include "core/pool.hpp"
#include "sql/session.hpp"

namespace dblock::detail::sql {

using SessionPool = Pool<Session>;

}  // namespace dblock::detail::sql
