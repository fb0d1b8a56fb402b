#include "backends/postgresql/pg_listener.hpp"

#include <stdexcept>

#include <pqxx/pqxx>

#include "backends/postgresql/pg_connection.hpp"

namespace dblock::detail::sqldb {

namespace {

class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& c, const std::string& channel, std::function<void(const std::string&)> on)
      : pqxx::notification_receiver(c, channel), on_(std::move(on)) {}
  void operator()(const std::string& payload, int) override { on_(payload); }

 private:
  std::function<void(const std::string&)> on_;
};

// A release's payload is the name, and after its last newline the owner whose turn is next,
// if any (owners have no newline; names may).
void bump(WakeTable& table, const std::string& payload) {
  const auto cut = payload.rfind('\n');
  if (cut == std::string::npos) table.bump(payload);
  else table.bump(payload.substr(0, cut), payload.substr(cut + 1));
}

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

// The LISTEN connection. libpqxx calls the receivers from get_notifs(), on the feed's thread:
// they deliver to the table read() was given. What arrives before the first read() is
// dropped: the feed moves the epoch once the subscription is confirmed, so every waiter
// retries anyway.
class PgSubscription final : public Subscription {
 public:
  PgSubscription(std::unique_ptr<Connection> session, const std::string& channel)
      : session_(std::move(session)), conn_(static_cast<PgConnection&>(*session_).connection()),
        released_(conn_, channel, [this](const std::string& p) {
          if (table_) bump(*table_, p);
        }),
        handed_(conn_, handover_channel, [this](const std::string& p) {
          if (table_) hand_over(*table_, p);
        }) {
    conn_.get_notifs();  // makes the LISTENs take effect now
  }
  int fd() const override { return conn_.sock(); }
  void read(WakeTable& table) override {
    table_ = &table;
    conn_.get_notifs();  // throws pqxx::broken_connection when the server went away
    if (!conn_.is_open()) throw std::runtime_error("the listener's connection closed");
  }

 private:
  std::unique_ptr<Connection> session_;  // first in, last out: the receivers UNLISTEN on it
  pqxx::connection_base& conn_;
  WakeTable* table_ = nullptr;
  Receiver released_, handed_;
};

}  // namespace

PgListener::PgListener(std::function<std::unique_ptr<Connection>()> connect, std::string channel)
    : feed_({[connect = std::move(connect), channel = std::move(channel)] {
        return std::make_unique<PgSubscription>(connect(), channel);
      }}) {}

}  // namespace dblock::detail::sqldb
