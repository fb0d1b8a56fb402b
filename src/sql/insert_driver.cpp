// The insert strategy: a row per held lock, won by one upsert (see the dialect's
// insert_acquire), released by deleting our own row.
#include "sql/lease_drivers.hpp"

namespace dblock::detail::sql {

Attempt InsertDriver::try_acquire(const AcquireRequest& r) {
  auto s = pool_.get();
  auto won = s->run(d_.insert_acquire, {r.name, r.owner, std::int64_t{r.ttl.count()}});
  if (won.rows.empty()) return busy(*s, r.name);
  const auto& row = won.rows.front();
  if (as_int(row[0]) == 0) return Attempt{false, 0, milliseconds{as_int(row[1])}};  // busy, holder's time
  return granted(row);
}

bool InsertDriver::release(const std::string& name, const std::string& owner, std::uint64_t fence) {
  return release_with(d_.insert_release, name, owner, fence);
}

}  // namespace dblock::detail::sql
