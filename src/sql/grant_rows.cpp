#include "sql/lease_drivers.hpp"

#include <map>
#include <nlohmann/json.hpp>

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

std::vector<Renewal> GrantRows::renew(const std::vector<Item>& items) {
  auto batch = nlohmann::json::array();
  for (const auto& i : items)
    batch.push_back({i.key->name, i.key->owner, i.key->fence, std::int64_t{i.ttl.count()}, std::int64_t{i.holds}});
  auto s = pool_.get();
  auto r = s->run(d_[*renew_batch_], {batch.dump()});
  // Fences are unique in a table: (name, fence) finds the item a row answers.
  std::map<std::pair<std::string, std::uint64_t>, milliseconds> held;
  for (const auto& row : r.rows)
    held[{as_text(row.at(0)), static_cast<std::uint64_t>(as_int(row.at(1)))}] = milliseconds{as_int(row.at(2))};
  std::vector<Renewal> out;
  out.reserve(items.size());
  for (const auto& i : items) {
    auto it = held.find({i.key->name, i.key->fence});
    out.push_back(it == held.end() ? Renewal{false, milliseconds{0}} : Renewal{true, it->second});
  }
  return out;
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
