#include "backends/postgresql/pg_listener.hpp"

#include <pqxx/pqxx>

#include "backends/postgresql/pg_session.hpp"

namespace dblock::detail::sql {

// What waiters and the listener thread share. A generation per watched name counts the
// releases seen; a waiter sleeps until its name's generation moves. A reconnect bumps the
// epoch, which wakes everyone, since releases may have been missed meanwhile.
struct PgListener::State {
  struct Name {
    std::uint64_t generation = 0;
    int watchers = 0;
  };
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, Name> names;  // only names someone waits for
  std::uint64_t epoch = 0;  // bumped on every (re)connect
  bool listening = false;
  bool stop = false;
  void bump(const std::string& name) {
    std::lock_guard lk(mutex);
    auto it = names.find(name);
    if (it == names.end()) return;  // nobody here waits for it
    ++it->second.generation;
    changed.notify_all();
  }
};

namespace {

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& c, const std::string& channel, std::function<void(const std::string&)> on)
      : pqxx::notification_receiver(c, channel), on_(std::move(on)) {}
  void operator()(const std::string& payload, int) override { on_(payload); }

 private:
  std::function<void(const std::string&)> on_;
};

}  // namespace

class PgWatch final : public ReleaseWatch {
 public:
  using State = PgListener::State;
  PgWatch(std::shared_ptr<State> st, std::string name) : st_(std::move(st)), name_(std::move(name)) {
    auto& n = st_->names[name_];  // the caller holds the mutex
    ++n.watchers;
    seen_generation_ = n.generation;
    seen_epoch_ = st_->epoch;
  }
  ~PgWatch() override {
    std::lock_guard lk(st_->mutex);
    auto it = st_->names.find(name_);
    if (--it->second.watchers == 0) st_->names.erase(it);
  }
  void wait_until(Clock::time_point until) override {
    std::unique_lock lk(st_->mutex);
    auto& n = st_->names[name_];
    // A lost listener connection does not wake us early (that would spin); its reconnect does.
    st_->changed.wait_until(lk, until, [&] {
      return st_->stop || n.generation != seen_generation_ || st_->epoch != seen_epoch_;
    });
    seen_generation_ = n.generation;
    seen_epoch_ = st_->epoch;
  }

 private:
  std::shared_ptr<State> st_;
  std::string name_;
  std::uint64_t seen_generation_ = 0, seen_epoch_ = 0;
};

PgListener::PgListener(std::function<std::unique_ptr<Session>()> connect, std::string channel)
    : connect_(std::move(connect)), channel_(std::move(channel)), state_(std::make_shared<State>()) {}

PgListener::~PgListener() {
  {
    std::lock_guard lk(state_->mutex);
    state_->stop = true;
  }
  if (thread_.joinable()) thread_.join();
}

void PgListener::run() {
  auto st = state_;
  while (true) {
    {
      std::lock_guard lk(st->mutex);
      if (st->stop) return;
    }
    try {
      auto session = connect_();
      auto& conn = static_cast<PgSession&>(*session).connection();
      Receiver receiver(conn, channel_, [st](const std::string& name) { st->bump(name); });
      conn.get_notifs();  // makes the LISTEN take effect now
      {
        std::lock_guard lk(st->mutex);
        st->listening = true;
        ++st->epoch;  // anything released while we were not listening: everyone retries
        st->changed.notify_all();
      }
      for (;;) {
        {
          std::lock_guard lk(st->mutex);
          if (st->stop) return;
        }
        conn.await_notification(0, 100'000);  // wakes at a notification or after 100 ms
        if (!conn.is_open()) break;
      }
    } catch (const std::exception&) {
      // The server went away: waiters fall back to their backoff; try again shortly.
    }
    {
      std::unique_lock lk(st->mutex);
      st->listening = false;
      st->changed.notify_all();
      st->changed.wait_for(lk, std::chrono::milliseconds(500), [&] { return st->stop; });
    }
  }
}

std::unique_ptr<ReleaseWatch> PgListener::watch(const std::string& name) {
  std::call_once(started_, [this] { thread_ = std::thread([this] { run(); }); });
  std::unique_lock lk(state_->mutex);
  // The first waiter waits (briefly) for LISTEN to be in place; without it, poll.
  state_->changed.wait_for(lk, std::chrono::seconds(2), [&] { return state_->listening || state_->stop; });
  if (!state_->listening) return nullptr;
  return std::make_unique<PgWatch>(state_, name);
}

}  // namespace dblock::detail::sql
