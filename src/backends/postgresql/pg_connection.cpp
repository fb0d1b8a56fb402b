#include "backends/postgresql/pg_connection.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <type_traits>

namespace dblock::detail::sqldb {

namespace {

// One thread for the process that shuts down the socket of a round trip that overran its
// bound, which makes the blocked libpq call return with an error. shutdown() does not close
// the descriptor, and a round trip is disarmed before its connection can close, so the
// descriptor is still the connection's when the guard acts on it.
class SocketGuard {
 public:
  using Clock = std::chrono::steady_clock;
  static SocketGuard& instance() {
    static SocketGuard guard;
    return guard;
  }
  std::uint64_t arm(int fd, Clock::time_point deadline) {
    std::lock_guard lk(mutex_);
    auto id = next_++;
    armed_[id] = Entry{fd, deadline, false};
    if (deadline < sleeping_until_) wake_.notify_one();
    return id;
  }
  // True if the guard fired for this round trip.
  bool disarm(std::uint64_t id) {
    std::lock_guard lk(mutex_);
    auto it = armed_.find(id);
    bool fired = it != armed_.end() && it->second.fired;
    if (it != armed_.end()) armed_.erase(it);
    return fired;
  }

 private:
  struct Entry {
    int fd;
    Clock::time_point deadline;
    bool fired;
  };
  SocketGuard() : thread_([this] { run(); }) {}
  ~SocketGuard() {
    {
      std::lock_guard lk(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  void run() {
    std::unique_lock lk(mutex_);
    while (!stop_) {
      auto now = Clock::now();
      auto next = Clock::time_point::max();
      for (auto& [id, e] : armed_) {
        if (e.fired) continue;
        if (now >= e.deadline) {
          ::shutdown(e.fd, SHUT_RDWR);
          e.fired = true;
        } else {
          next = std::min(next, e.deadline);
        }
      }
      sleeping_until_ = next;
      if (next == Clock::time_point::max()) wake_.wait(lk);
      else wake_.wait_until(lk, next);
      sleeping_until_ = Clock::time_point::min();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::uint64_t, Entry> armed_;
  std::uint64_t next_ = 1;
  Clock::time_point sleeping_until_ = Clock::time_point::min();
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest is constructed
};

constexpr std::chrono::milliseconds guard_grace{1000};  // past the server's own timeout

}  // namespace

// libpq's "ERROR:  relation \"t\" does not exist\nLINE 1: ..." -> "relation \"t\" does not exist".
static std::string first_line(std::string msg) {
  msg = msg.substr(0, msg.find('\n'));
  for (const char* severity : {"ERROR:  ", "FATAL:  "})
    if (msg.rfind(severity, 0) == 0) msg.erase(0, std::string(severity).size());
  auto at = msg.rfind(" at character ");  // a position in SQL the user never wrote
  if (at != std::string::npos) msg.erase(at);
  return msg;
}

// Every libpqxx error becomes a dblock error here, and nowhere else.
void throw_pg_error(const std::exception& e, const std::string& where, bool* usable) {
  auto gone = [&] {
    if (usable) *usable = false;
  };
  std::string msg = e.what();
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  for (auto& c : msg)
    if (c == '\n') c = ' ';
  if (dynamic_cast<const pqxx::broken_connection*>(&e) || dynamic_cast<const pqxx::in_doubt_error*>(&e)) {
    gone();
    // A refused connection has no SQLSTATE in libpqxx 6.4 (no result to read it from): the
    // server's texts for 53300 (too_many_connections) tell that no slot was free.
    for (const char* full : {"too many clients already", "remaining connection slots are reserved",
                             "too many connections for "})
      if (msg.find(full) != std::string::npos) throw ServerFullError("postgresql at " + where + ": " + msg);
    throw UnavailableError("postgresql at " + where + ": " + msg);
  }
  if (auto* se = dynamic_cast<const pqxx::sql_error*>(&e)) {
    const std::string& state = se->sqlstate();
    auto cls = state.substr(0, 2);
    // A statement error's first line is the whole story; the rest quotes our SQL text back
    // ("LINE 1: WITH won AS ...") with a caret under it, which only buries it.
    msg = first_line(e.what());
    if (state == "42P01")
      throw SchemaError("postgresql at " + where + ": " + msg + ": the lock table is missing (run `dblock migrate` with the same --table)");
    if (state == "3F000")
      throw SchemaError("postgresql at " + where + ": " + msg +
                        " (`dblock migrate` creates the table, not its schema: CREATE SCHEMA first, or fix --table)");
    // Raised by ${table}_lock_in and ${table}_check (the caller's transaction, a stale fence).
    if (state == "DL001") throw LockLostError("postgresql at " + where + ": " + msg);
    if (state == "25P02")
      throw UsageError("postgresql at " + where + ": " + msg + " (roll the transaction back first)");
    // No such function or column: a table whose history lacks a migration this dblock needs.
    if (state == "42883" || state == "42703")
      throw SchemaError("postgresql at " + where + ": " + msg + ": run `dblock migrate` with the same --table");
    if (state == "55P03") throw LockWaitTimeout("postgresql at " + where + ": " + msg);
    if (state == "57014" || cls == "40")
      throw TimeoutError("postgresql at " + where + ": " + msg);
    if (cls == "08" || cls == "28" || cls == "53" || cls == "57") {
      gone();
      if (state == "53300") throw ServerFullError("postgresql at " + where + ": " + msg);
      throw UnavailableError("postgresql at " + where + ": " + msg);
    }
    // Permission denied: a role without the rights docs/SECURITY.md grants it. libpqxx 6.4
    // leaves the SQLSTATE of some of these empty, so its class says it too.
    if (state == "42501" || dynamic_cast<const pqxx::insufficient_privilege*>(&e))
      throw UnavailableError("postgresql at " + where + ": " + msg);
    throw InternalError("postgresql at " + where + ": " + msg + " [SQLSTATE " + state + "]");
  }
  throw InternalError("postgresql at " + where + ": " + msg);
}

struct PgConnection::Pqxx {
  explicit Pqxx(const std::string& conninfo) : c(conninfo) {}
  pqxx::connection c;
};

PgConnection::PgConnection(const std::string& conninfo, const std::string& where, std::chrono::milliseconds statement_timeout,
                           std::string sslmode, bool pooled)
    : where_(where), sslmode_(std::move(sslmode)), pooled_(pooled), statement_timeout_(statement_timeout) {
  try {
    owned_ = std::make_unique<Pqxx>(conninfo);  // bounded by libpq's connect_timeout
    conn_ = &owned_->c;
  } catch (const std::exception& e) {
    throw_pg_error(e, where_, &usable_);
  }
  guarded([&] {
    pqxx::nontransaction tx(*conn_);
    if (pooled_) {
      // A SET here would change whichever server session the pooler lent for it, and none
      // of the later ones: the server's (or role's) defaults apply, and the client-side
      // bound below still ends any round trip. Its isolation default is checked instead.
      auto level = tx.exec("SHOW default_transaction_isolation");
      if (level.empty() || level[0][0].as<std::string>() != "read committed")
        throw UsageError("postgresql at " + where_ + ": default_transaction_isolation is '" +
                          (level.empty() ? std::string() : level[0][0].as<std::string>()) +
                          "': through a transaction pooler dblock cannot pin it, and its upserts need "
                          "'read committed' (ALTER ROLE ... SET default_transaction_isolation = 'read committed')");
      return;
    }
    // No statement may hang on a dead or stuck server (the contract's bounded waits). The
    // upserts rely on READ COMMITTED (they see the row another transaction just committed);
    // a server's, role's or URL's default of REPEATABLE READ or SERIALIZABLE would fail them
    // with serialization errors, and pqxx::work sends a plain BEGIN: so it is pinned here,
    // in the same round trip.
    tx.exec("SET statement_timeout = " + std::to_string(statement_timeout.count()) +
            "; SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED");
  });
}

std::optional<Transport> PgConnection::transport() {
  Transport t;
  if (pooled_) {
    // pg_stat_ssl would describe the pooler's own connection to the server: what is known of
    // ours is what sslmode makes libpq insist on (prefer and allow leave it open).
    const bool verified = sslmode_ == "verify-ca" || sslmode_ == "verify-full";
    if (sslmode_ == "disable") return t;
    if (!verified && sslmode_ != "require") return std::nullopt;
    t.tls = "TLS";
    t.chain_verified = verified;
    t.name_verified = sslmode_ == "verify-full";
    return t;
  }
  auto r = run("SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl", {});
  if (!r.rows.empty()) t.tls = as_text(r.rows[0].at(0));
  if (!t.tls.empty()) {
    t.chain_verified = sslmode_ == "verify-ca" || sslmode_ == "verify-full";
    t.name_verified = sslmode_ == "verify-full";
  }
  return t;
}

PgConnection::~PgConnection() {
  try {
    guarded([&] { tx_.reset(); });  // an open transaction is rolled back: a round trip
  } catch (...) {
  }
  tx_.reset();
}

std::chrono::milliseconds PgConnection::bound() const {
  // A lock wait lifts the transaction's statement_timeout to the wait + 5 s (the dialect's
  // session_wait).
  auto server = std::max(statement_timeout_, wait_allowed_.count() > 0 ? wait_allowed_ + std::chrono::seconds(5)
                                                                       : std::chrono::milliseconds{0});
  return server + guard_grace;
}

template <class F>
auto PgConnection::guarded(F&& f) -> decltype(f()) {
  int fd = conn_ ? conn_->sock() : -1;
  auto& guard = SocketGuard::instance();
  auto id = fd >= 0 ? guard.arm(fd, SocketGuard::Clock::now() + bound()) : 0;
  auto disarm = [&] { return id != 0 && guard.disarm(id); };
  try {
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      if (disarm()) usable_ = false;  // it fired just as the answer came: the socket is gone
    } else {
      auto r = f();
      if (disarm()) usable_ = false;
      return r;
    }
  } catch (const Error&) {
    disarm();
    throw;
  } catch (const std::exception& e) {
    if (disarm()) {
      usable_ = false;
      throw TimeoutError("postgresql at " + where_ + ": no answer within " + std::to_string(bound().count()) +
                         " ms (network stalled?); the connection was closed");
    }
    throw_pg_error(e, where_, &usable_);
  }
}

int PgConnection::socket() noexcept { return conn_ ? conn_->sock() : -1; }

std::function<void()> PgConnection::canceller() {
  if (pooled_ || !conn_) return nullptr;
  // libpqxx's cancel_query is meant to be called from another thread than the one waiting
  // on the connection: it reads only the session's address and cancel key, which do not
  // change while a statement runs (WaitCancel keeps the connection alive meanwhile).
  return [c = conn_] {
    try {
      c->cancel_query();
    } catch (...) {  // not sent: the wait ends at its bound
    }
  };
}

// The backend probes a silent client after the TTL (whole seconds, rounded up), once a
// second, and drops it when nothing came back for the TTL + 2 s: keepalives cover an idle
// connection, tcp_user_timeout one whose last answer (a ping's) is unacknowledged, which
// otherwise retransmits for ~15 minutes. Both count from the last packet the server received,
// which is no earlier than the client's last successful renewal: the lock outlives the
// client's own deadline. Settings a server lacks (tcp_user_timeout before PostgreSQL 12) are
// skipped. Measured under a real packet drop: docs/RELIABILITY.md, "Network faults".
void PgConnection::drop_when_unreachable(std::chrono::milliseconds ttl) {
  if (ttl.count() <= 0 || pooled_) return;  // the pooler's server sessions are not ours to set
  constexpr long long max_s = 2'000'000;  // tcp_user_timeout is an int of ms
  const long long idle = std::min(max_s, std::max<long long>(1, (ttl.count() + 999) / 1000));
  if (idle == keepalive_idle_s_) return;
  const auto n = [](long long v) { return "'" + std::to_string(v) + "'"; };
  run_script("SELECT set_config(s.name, v.value, false) FROM (VALUES ('tcp_keepalives_idle', " + n(idle) +
             "), ('tcp_keepalives_interval', '1'), ('tcp_keepalives_count', '2'), ('tcp_user_timeout', " +
             n((idle + 2) * 1000) + ")) AS v(name, value) JOIN pg_settings s USING (name)");
  keepalive_idle_s_ = idle;
}

bool PgConnection::usable() const noexcept { return usable_ && conn_ && conn_->is_open(); }

bool PgConnection::still_connected() noexcept {
  if (!usable()) return false;
  try {
    conn_->get_notifs();  // PQconsumeInput: reads what is there (EOF too) without blocking
  } catch (...) {
    usable_ = false;
  }
  return usable();
}

pqxx::connection_base& PgConnection::connection() { return *conn_; }

Result PgConnection::run(const std::string& sql, const std::vector<Value>& params) {
  return guarded([&] {
    std::vector<std::string> text;  // libpq takes parameters as text; dblock binds no NULLs
    text.reserve(params.size());
    for (const auto& v : params) text.push_back(as_text(v));
    // Named statements are prepared once per connection; through a transaction pooler a name
    // would be prepared on one server session and missing (or taken) on the next, so the
    // statement goes unnamed, parsed with each call.
    std::string* name = nullptr;
    if (!pooled_) {
      name = &prepared_[sql];
      if (name->empty()) {
        *name = "dblock_" + std::to_string(prepared_.size());
        conn_->prepare(*name, sql);
      }
    }
    auto exec = [&](pqxx::transaction_base& tx) {
      auto values = pqxx::prepare::make_dynamic_params(text);
      return name ? tx.exec_prepared(*name, values) : tx.exec_params(sql, values);
    };
    pqxx::result r;
    if (tx_) r = exec(*tx_);
    else {
      pqxx::nontransaction tx(*conn_);
      r = exec(tx);
    }
    return to_result(r);
  });
}

Result to_result(const pqxx::result& r) {
  Result out;
  out.affected = static_cast<std::int64_t>(r.affected_rows());
  constexpr pqxx::oid int8 = 20, int2 = 21, int4 = 23;
  for (const auto& row : r) {
    Row values;
    for (pqxx::row::size_type c = 0; c < row.size(); ++c) {
      const auto& f = row[c];
      auto type = r.column_type(c);
      if (f.is_null()) values.emplace_back(nullptr);
      else if (type == int8 || type == int2 || type == int4) values.emplace_back(f.as<std::int64_t>());
      else values.emplace_back(f.as<std::string>());
    }
    out.rows.push_back(std::move(values));
  }
  return out;
}

void PgConnection::run_script(const std::string& sql) {
  guarded([&] {
    if (tx_) tx_->exec(sql);
    else pqxx::nontransaction(*conn_).exec(sql);
  });
}

void PgConnection::begin() {
  guarded([&] { tx_ = std::make_unique<pqxx::work>(*conn_); });
}

void PgConnection::commit() {
  try {
    guarded([&] {
      tx_->commit();
      tx_.reset();
    });
  } catch (...) {
    tx_.reset();
    wait_allowed_ = std::chrono::milliseconds{0};
    throw;
  }
  wait_allowed_ = std::chrono::milliseconds{0};
}

void PgConnection::rollback() noexcept {
  try {
    guarded([&] {
      if (tx_) tx_->abort();
    });
  } catch (...) {
  }
  tx_.reset();
  wait_allowed_ = std::chrono::milliseconds{0};
}

}  // namespace dblock::detail::sqldb
