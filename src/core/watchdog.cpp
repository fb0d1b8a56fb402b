#include "core/watchdog.hpp"

#include <algorithm>

#include "dblock/errors.hpp"

namespace dblock::detail {

Watchdog::Watchdog() : state_(std::make_shared<State>()) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lk(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  state_->has_jobs.notify_all();
  for (auto* t : {&thread_, &renewer_}) {
    if (!t->joinable()) continue;
    if (t->get_id() == std::this_thread::get_id())
      t->detach();  // destroyed from a callback on the thread itself: it stops on its own
    else
      t->join();
  }
}

void Watchdog::watch(const std::shared_ptr<Grant>& grant) {
  std::call_once(started_, [this] {
    thread_ = std::thread(run, state_);
    renewer_ = std::thread(renew_loop, state_);
  });
  bool sooner;
  {
    std::lock_guard lk(state_->mutex);
    const auto now = Clock::now();
    // The first renewal comes at renew_every; for a grant given less than half its TTL (one
    // that reached us late), at half the time it has if that is sooner.
    auto first = now + grant->renew_every;
    if (grant->deadline() - now < grant->ttl / 2) first = std::min(first, now + (grant->deadline() - now) / 2);
    auto due = std::min(first, grant->deadline());
    // Read before the grant is published (ClientCore::adopt): nothing else uses its handle yet.
    state_->entries.push_back({grant, grant.get(), first, grant->handle->batched(), grant->renew_every});
    ++state_->changes;
    state_->idle_nap = std::min<Clock::duration>(state_->idle_nap, first - now);
    sooner = due < state_->sleeping_until;
  }
  // Waking the thread costs two context switches per acquire (on a busy 2-core machine that
  // was a fifth of an uncontended Redis cycle); only do it when it would sleep past this
  // grant's first renewal. Because an idle thread naps for the shortest time to a first
  // renewal seen instead of sleeping until woken, a short acquire+release loop wakes it at
  // most once.
  if (sooner) state_->wake.notify_all();
}

void Watchdog::unwatch(const Grant* grant) {
  std::lock_guard lk(state_->mutex);
  auto& v = state_->entries;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const Entry& e) { return e.key == grant; }), v.end());
}

void Watchdog::run(std::shared_ptr<State> st) {
  std::unique_lock lk(st->mutex);
  while (!st->stop) {
    const auto changes_seen = st->changes;
    auto now = Clock::now();
    auto wake_at = Clock::time_point::max();
    // Every Grant reference this pass takes is dropped with the mutex released: dropping the
    // last one may destroy the client, whose destructor takes the mutex.
    std::vector<std::shared_ptr<Grant>> seen, to_lose;
    std::vector<RenewalBatch*> batches;  // those with a renewal due in this pass
    bool queued = false;
    for (auto it = st->entries.begin(); it != st->entries.end();) {
      auto g = it->grant.lock();
      if (g) seen.push_back(g);
      if (!g) {  // every Lease of it is gone
        it = st->entries.erase(it);
        continue;
      }
      if (now >= g->deadline() && g->auto_renew && !it->renewing && !it->failing &&
          it->late_check_until == Clock::time_point::min()) {
        // Nobody renewed in time, but no renewal is stuck either: the process did not run.
        // Declaring the loss now would be wrong for a session lock the server still holds
        // (and its handle's lost() would then hand the lock over while the holder resumes
        // mid-section): ask the server, and give the answer one renewal interval.
        it->late_check_until = now + std::max<Clock::duration>(g->renew_every, milliseconds{100});
        it->renewing = true;
        st->jobs.push_back({g, false});
        queued = true;
      }
      if (now >= g->deadline() && !(it->renewing && now < it->late_check_until)) {
        // Even while a renewal of it is still under way: the server may have freed it.
        to_lose.push_back(g);
        st->jobs.push_back({g, true});
        queued = true;
        it = st->entries.erase(it);
        continue;
      }
      if (g->auto_renew && !it->renewing && now >= it->next_renew) {
        it->renewing = true;
        st->jobs.push_back({g, false, it->batched});
        queued = true;
        if (it->batched.batch) batches.push_back(it->batched.batch);
      }
      wake_at = std::min(wake_at, it->renewing && now < it->late_check_until ? it->late_check_until : g->deadline());
      if (g->auto_renew && !it->renewing) wake_at = std::min(wake_at, it->next_renew);
      ++it;
    }
    // The batches' other grants due within half their interval go now too: renewing early
    // costs nothing, and from then on they are due at one tick, in one statement.
    for (auto& e : st->entries) {
      if (!e.batched.batch || e.renewing || e.failing || e.next_renew - now > e.renew_every / 2 ||
          std::find(batches.begin(), batches.end(), e.batched.batch) == batches.end())
        continue;
      if (auto g = e.grant.lock(); g && g->auto_renew) {
        seen.push_back(g);
        e.renewing = true;
        st->jobs.push_back({g, false, e.batched});
      }
    }
    if (queued) st->has_jobs.notify_one();
    if (!seen.empty() || !to_lose.empty()) {
      bool lost_some = !to_lose.empty();
      lk.unlock();
      seen.clear();
      for (auto& g : to_lose) g->mark_lost();  // queues on_lost, at the deadline
      to_lose.clear();
      lk.lock();
      if (st->stop) break;
      if (lost_some) continue;  // look again before sleeping
    }
    if (wake_at == Clock::time_point::max() && st->idle_nap != Clock::duration::max()) {
      // Nothing to watch: nap rather than wait for a wake-up, so that the next grant
      // (whose first renewal is at least idle_nap away) need not notify us. Capped, so the
      // sum cannot overflow; waking early only means one more empty pass.
      wake_at = now + std::min<Clock::duration>(st->idle_nap, std::chrono::hours(1));
    }
    st->sleeping_until = wake_at;
    // Not on wake_at alone: a renewal that finished while the mutex was let go above (dropping
    // `seen`) notified nobody, and wake_at, computed while it was under way, may be its grant's
    // deadline: the grant went unrenewed until then (a restart's renewal failing at once did
    // it, tests/faults/restart_tests.cpp "etcd restart: a held lock outlives ...").
    auto changed = [&] { return st->stop || st->changes != changes_seen; };
    if (wake_at == Clock::time_point::max()) st->wake.wait(lk, changed);
    else st->wake.wait_until(lk, wake_at, changed);
    st->sleeping_until = Clock::time_point::min();
  }
}

// A grant declared lost: its handle frees what the server may still hold for it (a session
// lock's connection), unless its owner released it meanwhile.
void Watchdog::let_go(Grant& g) noexcept {
  auto use = g.take();
  // Before the handle closes the socket. Cancelled only: a hang-up callback under way only
  // marks the grant lost, which it is either way, and nothing here needs it done.
  g.hangup.cancel();
  if (!g.released) g.handle->lost();
}

void Watchdog::renew_loop(std::shared_ptr<State> st) {
  std::unique_lock lk(st->mutex);
  for (;;) {
    st->has_jobs.wait(lk, [&] { return st->stop || !st->jobs.empty(); });
    if (st->stop) return;
    auto job = std::move(st->jobs.front());
    st->jobs.pop_front();
    if (job.lost) {
      lk.unlock();
      if (auto g = job.grant.lock()) let_go(*g);  // e.g. ZooKeeper deletes the node
      lk.lock();
      continue;
    }
    // The other renewals queued in the same batch go with this one.
    std::vector<Job> due{std::move(job)};
    if (due.front().batched.batch)
      for (auto it = st->jobs.begin(); it != st->jobs.end();) {
        if (!it->lost && it->batched.batch == due.front().batched.batch) {
          due.push_back(std::move(*it));
          it = st->jobs.erase(it);
        } else {
          ++it;
        }
      }
    // A renewal queued behind a slow one may be for a grant released meanwhile: skip it.
    due.erase(std::remove_if(due.begin(), due.end(),
                             [&](const Job& j) {
                               return std::none_of(st->entries.begin(), st->entries.end(), [&](const Entry& e) {
                                 return !e.grant.owner_before(j.grant) && !j.grant.owner_before(e.grant);
                               });
                             }),
              due.end());
    lk.unlock();
    // References are taken and dropped with the mutex released (see run()).
    {
      std::vector<std::shared_ptr<Grant>> grants;
      std::vector<const GrantKey*> keys;
      for (auto& j : due)
        if (auto g = j.grant.lock()) {
          grants.push_back(std::move(g));
          keys.push_back(j.batched.key);
        }
      bool go_on = true;
      if (grants.size() == 1)
        go_on = renew_one(*st, grants.front());
      else if (!grants.empty())
        go_on = renew_batch(*st, *due.front().batched.batch, std::move(grants), std::move(keys));
      if (!go_on) return;
    }
    lk.lock();
  }
}

bool Watchdog::renew_one(State& st, const std::shared_ptr<Grant>& g) {
  auto sent = Clock::now();
  std::optional<Renewal> r;
  bool released;
  {
    auto use = g->take();
    released = g->released;
    try {
      if (!released) r = g->handle->renew(g->ttl, g->holds);
    } catch (const std::exception&) {
      // Transient (or not): keep the old deadline and try again soon; the deadline
      // check in run() turns a failure that lasts into a loss.
    }
  }
  return settle(st, *g, sent, r, released);
}

bool Watchdog::renew_batch(State& st, RenewalBatch& batch, std::vector<std::shared_ptr<Grant>> grants,
                           std::vector<const GrantKey*> keys) {
  // Each grant is marked in_batch under its `use`, one at a time, and the mark cleared after the
  // statement: calls on its handle wait for that (Grant::take), and this thread never holds
  // more than one grant's mutex.
  std::vector<RenewalBatch::Item> items;
  std::vector<bool> released;
  for (std::size_t i = 0; i < grants.size(); ++i) {
    auto use = grants[i]->take();
    released.push_back(grants[i]->released);
    if (released.back()) continue;
    grants[i]->in_batch = true;
    items.push_back({keys[i], grants[i]->ttl, grants[i]->holds});
  }
  const auto sent = Clock::now();
  std::vector<Renewal> answers;
  try {
    if (!items.empty()) answers = batch.renew(items);
  } catch (const std::exception&) {
    // Every renewal of the batch failed, as renew_one's (answers stays empty).
  }
  for (std::size_t i = 0; i < grants.size(); ++i) {
    if (released[i]) continue;
    {
      std::lock_guard use(grants[i]->use);
      grants[i]->in_batch = false;
    }
    grants[i]->batch_done.notify_all();
  }
  for (std::size_t i = 0, item = 0; i < grants.size(); ++i) {
    std::optional<Renewal> r;
    if (!released[i] && item < answers.size()) r = answers[item];
    if (!released[i]) ++item;
    if (!settle(st, *grants[i], sent, r, released[i])) return false;
  }
  return true;
}

bool Watchdog::settle(State& st, Grant& g, Clock::time_point sent, const std::optional<Renewal>& r, bool released) {
  bool lose = false, cleanup = false, renewed = false;
  {
    std::lock_guard lk(st.mutex);
    if (st.stop) return false;
    auto it = std::find_if(st.entries.begin(), st.entries.end(), [&](const Entry& e) { return e.key == &g; });
    if (it != st.entries.end() && !released) {  // else released, or declared lost meanwhile
      it->renewing = false;
      bool late = it->late_check_until != Clock::time_point::min();
      it->late_check_until = Clock::time_point::min();
      // A renewal answered after the grant's deadline does not revive it, unless it was the
      // late check of a frozen process: the deadline thread may not have run yet, but a Client
      // row's extension committed that late may have crossed a takeover (ARCHITECTURE,
      // "Client rows"); the late check renews the lease's own row, which cannot.
      const bool in_time = late || Clock::now() < g.deadline();
      if (r && r->held && in_time) {
        g.set_deadline(sent, r->remaining);
        it->next_renew = sent + g.renew_every;
        it->failing = false;
        renewed = true;
      } else if (r || late) {  // not ours, too late, or no answer past the deadline: lost
        st.entries.erase(it);
        lose = true;
        cleanup = !r || r->held;  // it may still be ours on the server: the driver lets it go
      } else {
        it->next_renew = Clock::now() + std::max(milliseconds{20}, g.renew_every / 4);
        it->failing = true;
      }
      ++st.changes;
      st.wake.notify_all();  // the deadline thread sleeps until the next renewal is due
    }
  }
  if (renewed) g.reporter->renewed(g.name, g.fence);
  if (lose) g.mark_lost();
  if (cleanup) let_go(g);
  return true;
}

}  // namespace dblock::detail
