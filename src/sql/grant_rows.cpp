#include "sql/lease_drivers.hpp"

namespace dblock::detail::sqldb {

// A row answered (RETURNING, a function's or a procedure's answer), or else a row changed (a
// plain statement's).
bool GrantRows::done(const Result& r) { return !r.rows.empty() || r.affected >= 1; }

Renewal GrantRows::renew(const std::string& name, const std::string& owner, std::uint64_t fence, milliseconds ttl,
                         int holds) {
  auto s = pool_.get();
  auto r = s->run(d_[renew_], {name, owner, static_cast<std::int64_t>(fence), std::int64_t{ttl.count()},
                               std::int64_t{holds}});
  if (r.rows.empty()) return Renewal{false, milliseconds{0}};
  return Renewal{true, milliseconds{as_int(r.rows.front()[0])}};
}

std::optional<Result> GrantRows::free(const std::string& name, const std::string& owner, std::uint64_t fence,
                                      Statement release) {
  auto s = pool_.get();
  auto freed = s->run(d_[release], {name, owner, static_cast<std::int64_t>(fence)});
  if (!done(freed)) return std::nullopt;
  if (notifier_)
    notifier_->released(name, d_.release_names_next && !freed.rows.empty() ? as_text(freed.rows.front().at(0)) : "");
  return freed;
}

bool GrantRows::release_after(const std::string& name, const std::string& owner, std::uint64_t fence,
                              milliseconds keep) {
  auto s = pool_.get();
  return done(s->run(d_[release_after_], {name, owner, static_cast<std::int64_t>(fence), std::int64_t{keep.count()}}));
}

}  // namespace dblock::detail::sqldb
