// PostgreSQL through the generic SqlBackend, with LISTEN/NOTIFY wake-ups.
#include "backends/postgresql/pg_backend.hpp"

#include <unistd.h>

#include <map>
#include <mutex>

#include "backends/postgresql/pg_listener.hpp"
#include "backends/postgresql/pg_session.hpp"
#include "sql/sql_backend.hpp"

namespace dblock::detail {

namespace {

// The user's URL goes to libpq as it is (so sslmode and friends work), with a connect
// timeout added unless the URL sets one: no connection attempt may hang.
std::string conninfo(const Url& url, const ClientOptions& o) {
  std::string info = url.original;
  auto add = [&](const std::string& key, const std::string& value) {
    if (url.query.count(key)) return;
    info += (info.find('?') == std::string::npos ? "?" : "&") + key + "=" + value;
  };
  auto secs = std::max<long long>(1, (o.connect_timeout.count() + 999) / 1000);  // libpq takes seconds
  add("connect_timeout", std::to_string(secs));
  add("application_name", "dblock");
  return info;
}

// One listener per process, server and channel, shared by every Client on them: a release
// then wakes one waiter per process (WakeTable), not one per Client, and the server signals
// one listening connection per process. It lives while a Client uses it. The pid is in the
// key so that a forked child never shares its parent's (thread-less) listener.
std::shared_ptr<sql::PgListener> shared_listener(const std::string& info, const std::string& channel,
                                                 const std::function<std::unique_ptr<sql::Session>()>& connect) {
  static std::mutex mutex;
  static auto* listeners = new std::map<std::string, std::weak_ptr<sql::PgListener>>;  // never destroyed
  std::lock_guard lk(mutex);
  for (auto it = listeners->begin(); it != listeners->end();) it = it->second.expired() ? listeners->erase(it) : ++it;
  auto& slot = (*listeners)[std::to_string(getpid()) + '\n' + info + '\n' + channel];
  if (auto l = slot.lock()) return l;
  auto l = std::make_shared<sql::PgListener>(connect, channel);
  slot = l;
  return l;
}

}  // namespace

std::unique_ptr<Backend> open_postgresql(const Url& url, const ClientOptions& options) {
  auto table = parse_table_name(options.table);
  auto info = conninfo(url, options);
  auto where = url.redacted();
  auto timeout = options.statement_timeout;
  auto connect = [info, where, timeout]() -> std::unique_ptr<sql::Session> {
    return std::make_unique<sql::PgSession>(info, where, timeout);
  };
  auto listener = shared_listener(info, "dblock_" + table.qualified(), connect);
  auto backend = std::make_unique<sql::SqlBackend>(sql::postgresql_dialect(), table, connect, options, listener);
  backend->pool().get();  // connect now: an unreachable server or a bad password fails here
  if (options.auto_migrate.value_or(false)) backend->migrate();
  return backend;
}

}  // namespace dblock::detail
