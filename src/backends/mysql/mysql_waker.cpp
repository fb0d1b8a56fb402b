#include "backends/mysql/mysql_waker.hpp"

#include <cstdio>
#include <thread>

#include "backends/mysql/mysql_session.hpp"
#include "sql/session_drivers.hpp"

namespace dblock::detail::sql {

struct MySqlWaker::Connections {
  SessionPool::Factory connect;
  std::mutex mutex;
  std::vector<std::unique_ptr<Session>> idle;

  std::unique_ptr<Session> get() {
    {
      std::lock_guard lk(mutex);
      while (!idle.empty()) {
        auto s = std::move(idle.back());
        idle.pop_back();
        if (s->still_connected()) return s;
      }
    }
    return connect();
  }
  void put(std::unique_ptr<Session> s) {
    std::lock_guard lk(mutex);
    if (s && s->usable() && idle.size() < 8) idle.push_back(std::move(s));
  }
};

namespace {

class MySqlWatch final : public ReleaseWatch {
 public:
  MySqlWatch(std::shared_ptr<MySqlWaker::Connections> pool, std::unique_ptr<Session> s, std::string key)
      : pool_(std::move(pool)), s_(std::move(s)), key_(std::move(key)) {}
  ~MySqlWatch() override { pool_->put(std::move(s_)); }

  void wait_until(Clock::time_point until) override {
    auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
    if (left.count() <= 0) return;
    left = std::min(left, max_lock_wait);
    std::int64_t woke = -2;  // -2: could not ask the server
    if (s_ && s_->usable()) {
      try {
        // Blocks until the holder's wake lock is released, then hands it straight back, so
        // the next waiter and the next holder can have it. -1: nobody holds it.
        auto r = s_->run(
            "SET @dblock_w = IF(IS_USED_LOCK(?1) IS NULL, -1, GET_LOCK(?1, ?2 / 1000)); "
            "DO IF(@dblock_w = 1, RELEASE_LOCK(?1), 0); SELECT @dblock_w",
            {key_, std::int64_t{left.count()}});
        woke = r.rows.empty() ? -2 : as_int(r.rows[0][0]);
      } catch (const Error&) {
        woke = -2;
      }
    }
    if (woke == 1 || woke == 0) {  // woken by a release, or the wait ran out
      free_wait_ = milliseconds{0};
      return;
    }
    // Nothing to block on: poll, soon at first (a new holder takes its wake lock right
    // after its grant), then less and less often.
    free_wait_ = std::clamp(free_wait_ * 2, milliseconds{2}, milliseconds{250});
    std::this_thread::sleep_until(std::min(until, Clock::now() + free_wait_));
  }

 private:
  std::shared_ptr<MySqlWaker::Connections> pool_;
  std::unique_ptr<Session> s_;
  std::string key_;
  milliseconds free_wait_{0};
};

}  // namespace

MySqlWaker::MySqlWaker(SessionPool::Factory connect, std::string scope)
    : connect_(connect), scope_(std::move(scope)), idle_(std::make_shared<Connections>()) {
  idle_->connect = std::move(connect);
}

MySqlWaker::~MySqlWaker() = default;  // closing holder_ frees every wake lock it holds

std::string MySqlWaker::key(const std::string& name) const {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llX", static_cast<unsigned long long>(advisory_key(scope_, name)));
  return std::string("dblock:w:") + hex;
}

bool MySqlWaker::hold(const std::string& name) {
  // GET_LOCK waits a little: a waiter holds the key only between its wake-up and giving it
  // back, within one statement.
  auto r = holder_->run("SELECT GET_LOCK(?1, 1)", {key(name)});
  return !r.rows.empty() && as_int(r.rows[0][0]) == 1;
}

void MySqlWaker::acquired(const std::string& name) noexcept {
  std::lock_guard lk(mutex_);
  if (held_.count(name) && holder_ && holder_->usable()) return;  // a re-entry: held already
  try {
    if (!holder_ || !holder_->usable()) {  // (re)connect, and take back what the old one held
      holder_ = connect_();
      for (auto it = held_.begin(); it != held_.end();) it = hold(*it) ? std::next(it) : held_.erase(it);
    }
    if (hold(name)) held_.insert(name);
  } catch (...) {  // waiters fall back to polling for this name
    holder_.reset();
  }
}

void MySqlWaker::released(const std::string& name) noexcept {
  std::lock_guard lk(mutex_);
  if (!held_.erase(name) || !holder_) return;
  try {
    holder_->run("DO RELEASE_LOCK(?1)", {key(name)});
  } catch (...) {  // a dropped connection released it anyway
    holder_.reset();
  }
}

std::unique_ptr<ReleaseWatch> MySqlWaker::watch(const std::string& name) {
  try {
    return std::make_unique<MySqlWatch>(idle_, idle_->get(), key(name));
  } catch (const Error&) {
    return nullptr;  // cannot connect now: the waiting loop polls
  }
}

}  // namespace dblock::detail::sql
