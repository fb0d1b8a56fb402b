#include "sql/lease_drivers.hpp"

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/owner.hpp"

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
  if (!d_.offers(Statement::client_renew)) {
    auto s = pool_.get();
    return renew_rows(*s, items, std::string());
  }
  std::map<milliseconds, std::vector<const Item*>> by_ttl;
  for (const auto& i : items) by_ttl[i.ttl].push_back(&i);
  std::map<RowKey, Renewal> answers;
  {
    // Held through the statements (one renewal thread per Client: nobody waits for it but
    // releases that find it busy, which leave their key for the end of this tick instead).
    std::lock_guard<std::mutex> lk(clients_mutex_);
    auto s = pool_.get();
    for (const auto& [ttl, group] : by_ttl) renew_for_ttl(*s, ttl, group, answers);
    std::lock_guard<std::mutex> fk(forgotten_mutex_);
    for (const auto& key : forgotten_) attached_.erase(key);
    forgotten_.clear();
  }
  std::vector<Renewal> out;
  out.reserve(items.size());
  for (const auto& i : items) {
    auto it = answers.find({i.key->name, i.key->fence});
    out.push_back(it == answers.end() ? Renewal{false, milliseconds{0}} : it->second);
  }
  return out;
}

void GrantRows::renew_for_ttl(Connection& s, milliseconds ttl, const std::vector<const Item*>& items,
                              std::map<RowKey, Renewal>& out) {
  auto& row = clients_[ttl];
  if (row.id.empty()) row.id = random_hex128();
  // The attached leases whose hold count the server has: renewing the Client row keeps them.
  std::vector<const Item*> rest;
  std::vector<const Item*> kept;
  for (const auto* i : items) {
    auto a = attached_.find({i->key->name, i->key->fence});
    (a != attached_.end() && a->second.client == row.id && a->second.holds == i->holds ? kept : rest).push_back(i);
  }
  if (!kept.empty()) {
    auto r = s.run(d_[Statement::client_renew], {row.id, std::int64_t{ttl.count()}});
    if (r.rows.empty()) {
      // Expired (this process stalled past the TTL): its leases may have been taken over,
      // and a row found expired is never extended. A new Client row; each lease is renewed
      // by its own row's time below, or is lost.
      row = ClientRow{random_hex128(), false};
      rest.insert(rest.end(), kept.begin(), kept.end());
    } else {
      const milliseconds left{as_int(r.rows.front().at(2))};
      std::set<RowKey> named;
      for (const auto& l : r.rows) {
        RowKey key{as_text(l.at(0)), static_cast<std::uint64_t>(as_int(l.at(1)))};
        if (key.first.empty()) continue;  // the Client row keeps no lease
        auto a = attached_.find(key);
        if (a == attached_.end() || a->second.client != row.id) {
          // Declared lost here (a tick's answer came after its deadline, or never came):
          // held on the server by our Client row as long as it lives, unless let go.
          s.run(d_[Statement::client_detach], {row.id, key.first, static_cast<std::int64_t>(key.second)});
          continue;
        }
        named.insert(std::move(key));
      }
      for (const auto* i : kept) {
        RowKey key{i->key->name, i->key->fence};
        if (named.count(key)) {
          out[key] = Renewal{true, left};
        } else {  // taken from us (released by force, swept): lost
          attached_.erase(key);
          out[key] = Renewal{false, milliseconds{0}};
        }
      }
    }
  }
  if (rest.empty()) return;
  if (!row.created) {
    s.run(d_[Statement::client_create], {row.id, std::int64_t{ttl.count()}});
    row.created = true;
  }
  std::vector<Item> attach;
  attach.reserve(rest.size());
  for (const auto* i : rest) attach.push_back(*i);
  auto renewed = renew_rows(s, attach, row.id);
  for (std::size_t k = 0; k < rest.size(); ++k) {
    RowKey key{rest[k]->key->name, rest[k]->key->fence};
    if (renewed[k].held)
      attached_[key] = Attached{row.id, rest[k]->holds};
    else
      attached_.erase(key);
    out[key] = renewed[k];
  }
}

std::vector<Renewal> GrantRows::renew_rows(Connection& s, const std::vector<Item>& items, const std::string& client) {
  auto batch = nlohmann::json::array();
  for (const auto& i : items)
    batch.push_back(
        {i.key->name, i.key->owner, i.key->fence, std::int64_t{i.ttl.count()}, std::int64_t{i.holds}, client});
  auto r = s.run(d_[*renew_batch_], {batch.dump()});
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

void GrantRows::forget(const std::string& name, std::uint64_t fence) {
  if (!d_.offers(Statement::client_renew)) return;
  // Never waits for a tick under way (the caller may hold the pool's last connection, which
  // the tick waits for): the tick erases what it was left.
  if (clients_mutex_.try_lock()) {
    attached_.erase({name, fence});
    clients_mutex_.unlock();
  } else {
    std::lock_guard<std::mutex> fk(forgotten_mutex_);
    forgotten_.emplace_back(name, fence);
  }
}

std::optional<Result> GrantRows::free(const std::string& name, const std::string& owner, std::uint64_t fence,
                                      Statement release) {
  forget(name, fence);
  auto s = pool_.get();
  // Where the dialect has the uncontended path, a row nobody waits for is deleted (insert) or
  // freed (optimistic) without waking anyone; a marked one (or one not ours) goes to the
  // release that does the rest. Not through a transaction pooler (see LeaseDriver::upsert).
  const auto quiet = release == Statement::insert_release       ? Statement::insert_release_unmarked
                     : release == Statement::optimistic_release ? Statement::optimistic_release_unmarked
                                                                : release;
  if (quiet != release && s->keeps_plans() && d_.offers(quiet))
    if (auto freed = s->run(d_[quiet], {name, owner, static_cast<std::int64_t>(fence)}); done(freed)) return freed;
  auto freed = s->run(d_[release], {name, owner, static_cast<std::int64_t>(fence)});
  if (!done(freed)) return std::nullopt;
  if (notifier_)
    notifier_->released(name, d_.release_names_next && !freed.rows.empty() ? as_text(freed.rows.front().at(0)) : "");
  return freed;
}

bool GrantRows::release_after(const std::string& name, const std::string& owner, std::uint64_t fence,
                              milliseconds keep) {
  forget(name, fence);
  auto s = pool_.get();
  return done(s->run(d_[release_after_], {name, owner, static_cast<std::int64_t>(fence), std::int64_t{keep.count()}}));
}

}  // namespace dblock::detail::sqldb
