// The insert strategy: a row per held lock, won by one upsert (see the dialect's
// insert_acquire), released by deleting our own row (or, on MySQL, freeing it).
#include "sql/lease_drivers.hpp"

namespace dblock::detail::sqldb {

Attempt InsertDriver::try_acquire(AcquireRequest& r) {
  if (r.mode == Mode::shared || r.permits > 1) return try_shared(r);
  return taking_turns(r, [&](Connection& s) { return upsert(s, r); });
}

}  // namespace dblock::detail::sqldb
