// What the lease strategies share past the attempt itself: a won row made a grant, the
// releases (plain, handing over, or followed by a waiter's let-go), and the line a hand-over
// leaves behind (joins_line).
#include "sql/lease_drivers.hpp"

namespace dblock::detail::sqldb {

Attempt LeaseDriver::granted(AcquireRequest& r, const Row& row) {
  auto* w = static_cast<WaitingPlace*>(r.place.get());
  const auto fence = static_cast<std::uint64_t>(as_int(row[0]));
  // A row handed over (Dialect::waiters_read_handed) has the lease its ticket asked for,
  // counted from the hand-over.
  const auto left = milliseconds{as_int(row[1])};
  Attempt a = handing(keyed_grant(*this, r, fence, left), r, w && w->ticket != 0);
  if (w) {
    w->ticket = 0;  // the grant statement took it
    if (w->in_server && waits_) a.grant = waits_->hold(*this, *w, std::move(a.grant), r, a.fence);
  }
  return a;
}

// One text, so that what follows (a waiter's let-go, which wakes the waiter behind) runs
// with no round trip in between, after the release's commit (a woken waiter that read the
// row before it would find it still held).
bool LeaseDriver::release_then(Connection& s, const std::string& name, const std::string& owner,
                               std::uint64_t fence, const std::string& then) {
  const auto release = hands_over() ? handover_ : release_;  // the owner waited: others are likely queued
  rows_.forget(name, fence);
  auto answer = s.run(d_[release] + "; " + then, {name, owner, static_cast<std::int64_t>(fence)});
  if (!GrantRows::done(answer)) return false;
  released(name, release, answer);
  return true;
}

bool LeaseDriver::release_with(const std::string& name, const std::string& owner, std::uint64_t fence,
                               Statement statement) {
  auto answer = rows_.free(name, owner, fence, statement);
  if (!answer) return false;
  released(name, statement, *answer);
  return true;
}

void LeaseDriver::released(const std::string& name, Statement statement, const Result& answer) {
  const auto* last = answer.rows.empty() || answer.rows.front().empty()
                         ? nullptr
                         : std::get_if<std::int64_t>(&answer.rows.front().back());
  if (statement == handover_ && last && *last == -1) {
    std::lock_guard lk(lines_mutex_);
    if (lines_.size() >= max_lines) lines_.clear();
    lines_.insert(name);
  }
  freed(name, answer);
}

bool LeaseDriver::joins_line(const AcquireRequest& r) {
  if (!r.fair || r.wait <= milliseconds{0} || r.place || r.mode == Mode::shared || r.permits > 1) return false;
  std::lock_guard lk(lines_mutex_);
  return lines_.erase(r.name) > 0;
}

Attempt LeaseDriver::answered(Connection& s, AcquireRequest& r, const std::vector<Row>& rows) {
  if (rows.empty()) return busy_behind(s, r, std::string(), milliseconds{0});
  const auto& row = rows.front();
  if (as_int(row[0]) != 0) return granted(r, row);
  const auto left = std::max<std::int64_t>(as_int(row[1]), 0);
  return busy_behind(s, r, row.size() > 2 ? as_text(row[2]) : std::string(), milliseconds{left});
}

}  // namespace dblock::detail::sqldb
