#include "backends/postgresql/pg_listener.hpp"

#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include <pqxx/pqxx>

#include "backends/postgresql/pg_connection.hpp"

namespace dblock::detail::sqldb {

// A LISTEN on one channel of the listener's connection (a member of ListenSession, which has
// external linkage: not in the anonymous namespace).
class PgReceiver final : public pqxx::notification_receiver {
 public:
  PgReceiver(pqxx::connection_base& c, const std::string& channel, std::function<void(const std::string&)> on)
      : pqxx::notification_receiver(c, channel), on_(std::move(on)) {}
  void operator()(const std::string& payload, int) override { on_(payload); }

 private:
  std::function<void(const std::string&)> on_;
};

namespace {

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

}  // namespace

// The LISTEN connection, shared by the feed's subscription and a connection lent to a pool.
// libpqxx calls the receivers from get_notifs(), on whichever thread reads (under `use`): they
// deliver to the table the feed's first read() gave. What arrives before it is dropped: the
// feed moves the epoch once the subscription is confirmed, so every waiter retries anyway.
struct ListenSession {
  ListenSession(std::unique_ptr<Connection> c, const std::string& channel)
      : session(std::move(c)), conn(static_cast<PgConnection&>(*session).connection()),
        released(conn, channel,
                 [this](const std::string& p) {
                   if (auto t = table.load()) bump(*t, p);
                 }),
        handed(conn, handover_channel(),
               [this](const std::string& p) {
                 if (auto t = table.load()) hand_over(*t, p);
               }),
        fd(conn.sock()) {
    conn.get_notifs();  // makes the LISTENs take effect now
  }
  // Delivers what arrived meanwhile (during a lent statement: its socket was read then, so
  // the feed's poll will not see it). Under `use`.
  void deliver() noexcept {
    try {
      conn.get_notifs();
    } catch (...) {  // the connection is gone: the feed's read says so too
    }
  }

  std::mutex use;  // one user at a time: the feed's read, or a lent statement or transaction
  std::unique_ptr<Connection> session;  // first in, last out: the receivers UNLISTEN on it
  pqxx::connection_base& conn;
  std::atomic<WakeTable*> table{nullptr};
  PgReceiver released, handed;
  const int fd;                        // read once: libpqxx is not asked while a statement runs
  std::atomic<bool> lent{false};       // to a pool, now
  std::atomic<bool> dropped{false};    // by the feed (an error): subscribed again elsewhere
};

namespace {

class PgSubscription final : public Subscription {
 public:
  explicit PgSubscription(std::shared_ptr<ListenSession> s) : s_(std::move(s)) {}
  ~PgSubscription() override {  // the feed's table may go before a lent connection does
    s_->dropped = true;
    std::lock_guard use(s_->use);
    s_->table = nullptr;
  }
  int fd() const override { return s_->fd; }
  void read(WakeTable& table) override {
    std::lock_guard use(s_->use);
    s_->table = &table;
    s_->conn.get_notifs();  // throws pqxx::broken_connection when the server went away
    if (!s_->conn.is_open()) throw std::runtime_error("the listener's connection closed");
  }

 private:
  std::shared_ptr<ListenSession> s_;
};

// The listener's connection as a pool's: each call, or a transaction from begin() to its end,
// has it alone, then delivers the notifications that came with the answers.
class LentConnection final : public Connection {
 public:
  explicit LentConnection(std::shared_ptr<ListenSession> s) : s_(std::move(s)) {}
  ~LentConnection() override {
    if (tx_.owns_lock()) rollback();
    s_->lent = false;
  }
  Result run(const std::string& sql, const std::vector<Value>& params) override {
    return alone([&](Connection& c) { return c.run(sql, params); });
  }
  void run_script(const std::string& sql) override {
    alone([&](Connection& c) { c.run_script(sql); });
  }
  void begin() override {
    std::unique_lock use(s_->use);
    s_->session->begin();
    tx_ = std::move(use);
  }
  void commit() override {
    try {
      s_->session->commit();
    } catch (...) {
      end_transaction();
      throw;
    }
    end_transaction();
  }
  void rollback() noexcept override {
    if (!tx_.owns_lock()) return;
    s_->session->rollback();
    end_transaction();
  }
  bool usable() const noexcept override { return !s_->dropped && s_->session->usable(); }
  bool still_connected() noexcept override {
    if (s_->dropped) return false;
    std::lock_guard use(s_->use);
    return s_->session->still_connected();  // reads what is there: delivered with it
  }
  bool may_pin() const noexcept override { return false; }
  bool keeps_plans() const noexcept override { return s_->session->keeps_plans(); }
  void allow_wait(std::chrono::milliseconds wait) override { s_->session->allow_wait(wait); }
  void drop_when_unreachable(std::chrono::milliseconds ttl) override {
    alone([&](Connection& c) { c.drop_when_unreachable(ttl); });
  }
  void flush_commits(bool on) override {
    alone([&](Connection& c) { c.flush_commits(on); });
  }
  std::optional<Transport> transport() override {
    return alone([&](Connection& c) { return c.transport(); });
  }

 private:
  template <class F>
  auto alone(F&& f) -> decltype(f(std::declval<Connection&>())) {
    if (tx_.owns_lock()) return f(*s_->session);
    std::lock_guard use(s_->use);
    struct Deliver {
      ListenSession& s;
      ~Deliver() { s.deliver(); }
    } deliver{*s_};
    return f(*s_->session);
  }
  void end_transaction() noexcept {
    s_->deliver();
    tx_ = {};
  }

  std::shared_ptr<ListenSession> s_;
  std::unique_lock<std::mutex> tx_;  // `use`, from begin() to commit() or rollback()
};

}  // namespace

// Under mutex_: live, not lent, and no failed lent statement left it in an unknown state.
static bool lendable(ListenSession& s) {
  if (s.dropped || s.lent) return false;
  std::lock_guard use(s.use);
  return s.session->usable();
}

std::string handover_channel() { return "dblock handed " + std::to_string(getpid()); }

PgListener::PgListener(std::function<std::unique_ptr<Connection>()> connect, std::string channel, bool lends)
    : connect_(std::move(connect)), channel_(std::move(channel)), lends_(lends), feed_({[this] { return subscribe(); }}) {}

std::unique_ptr<Subscription> PgListener::subscribe() {
  std::unique_ptr<Connection> c;
  {
    std::lock_guard lk(mutex_);
    c = std::move(offered_);
  }
  if (!c || !c->still_connected()) c = connect_();
  auto session = std::make_shared<ListenSession>(std::move(c), channel_);
  {
    std::lock_guard lk(mutex_);
    listening_ = session;
  }
  return std::make_unique<PgSubscription>(std::move(session));
}

void PgListener::offer(const std::function<std::unique_ptr<Connection>()>& take_idle) {
  if (!lends_) return;
  bool surplus = false;
  {
    std::lock_guard lk(mutex_);
    if (offered_) return;  // given one already
    auto s = listening_.lock();
    if (s && !s->dropped) {
      // Listening already (it subscribed again on a connection of its own, after a server
      // restart): an idle connection beside the one the pool may borrow is one too many.
      if (!lendable(*s)) return;
      surplus = true;
    }
  }
  auto c = take_idle();
  if (!c || surplus) return;  // a surplus one closes here
  std::lock_guard lk(mutex_);
  if (!offered_) offered_ = std::move(c);  // else a second offer won: this one closes
}

std::unique_ptr<Connection> PgListener::lend_for_read() {
  std::lock_guard lk(mutex_);
  auto s = listening_.lock();
  if (!s || !lendable(*s)) return nullptr;
  s->lent = true;  // under mutex_, as every lend
  return std::make_unique<LentConnection>(std::move(s));
}

}  // namespace dblock::detail::sqldb
