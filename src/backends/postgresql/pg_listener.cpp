#include "backends/postgresql/pg_listener.hpp"

#include <pqxx/pqxx>

#include "backends/postgresql/pg_connection.hpp"
#include "core/wake_table.hpp"

namespace dblock::detail::sqldb {

// What waiters and the listener thread share: the wake table, and whether LISTEN is in place.
struct PgListener::State : WakeTable {
  bool listening = false;
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

// A hand-over's payload (pg_dialect.cpp, insert_handover): "FENCE LEASE_MS TICKET OWNER_BYTES
// OWNER NAME", the owner's length in bytes first, as owners and names may hold anything.
void hand_over(WakeTable& table, const std::string& payload) {
  Handover grant;
  std::size_t owner_bytes = 0;
  std::size_t at = 0;
  try {
    std::size_t used = 0;
    grant.fence = std::stoull(payload.substr(at), &used);
    at += used + 1;
    (void)std::stoll(payload.substr(at), &used);  // the lease: the row's own is read (handed_check)
    at += used + 1;
    grant.token = std::to_string(std::stoll(payload.substr(at), &used));
    at += used + 1;
    owner_bytes = std::stoull(payload.substr(at), &used);
    at += used + 1;
  } catch (const std::exception&) {
    return;
  }
  if (at > payload.size() || payload.size() - at < owner_bytes) return;
  table.hand_over(payload.substr(at + owner_bytes), payload.substr(at, owner_bytes), grant);
}

}  // namespace

PgListener::PgListener(std::function<std::unique_ptr<Connection>()> connect, std::string channel)
    : connect_(std::move(connect)), channel_(std::move(channel)), state_(std::make_shared<State>()) {}

PgListener::~PgListener() {
  {
    std::lock_guard lk(state_->mutex);
    state_->stop = true;
    state_->wake_all_locked();
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
      auto& conn = static_cast<PgConnection&>(*session).connection();
      // The payload is the name, and after its last newline the owner whose turn is next, if
      // any (owners have no newline; names may).
      Receiver receiver(conn, channel_, [st](const std::string& payload) {
        const auto cut = payload.rfind('\n');
        if (cut == std::string::npos) st->bump(payload);
        else st->bump(payload.substr(0, cut), payload.substr(cut + 1));
      });
      Receiver handed(conn, handover_channel, [st](const std::string& payload) { hand_over(*st, payload); });
      conn.get_notifs();  // makes the LISTEN take effect now
      {
        std::lock_guard lk(st->mutex);
        st->listening = true;
        st->bump_epoch_locked();  // anything released while we were not listening: everyone retries
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

std::unique_ptr<ReleaseWatch> PgListener::watch_if_ready(const std::string& name, const std::string& owner) {
  std::lock_guard lk(state_->mutex);
  if (!state_->listening || state_->stop) return nullptr;
  return WakeTable::watch_locked(state_, name, owner);
}

std::optional<Handover> PgListener::take_handover(const std::string& name, const std::string& owner) {
  return state_->take_handover(name, owner);
}

std::unique_ptr<ReleaseWatch> PgListener::watch(const std::string& name, const std::string& owner) {
  std::call_once(started_, [this] { thread_ = std::thread([this] { run(); }); });
  std::unique_lock lk(state_->mutex);
  // The first waiter waits (briefly) for LISTEN to be in place; without it, poll.
  state_->changed.wait_for(lk, std::chrono::seconds(2), [&] { return state_->listening || state_->stop; });
  if (!state_->listening) return nullptr;
  return WakeTable::watch_locked(state_, name, owner);
}

}  // namespace dblock::detail::sqldb
