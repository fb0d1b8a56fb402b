#include "bench/scenarios/resources.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/support/proc.hpp"

#ifdef DBLOCK_WITH_POSTGRESQL
#include <pqxx/pqxx>
#endif
#ifdef DBLOCK_WITH_MYSQL
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_connection.h>
#include <mysql_driver.h>
#endif
#ifdef DBLOCK_WITH_REDIS
#include <hiredis/hiredis.h>
#endif
#if defined(DBLOCK_WITH_MYSQL) || defined(DBLOCK_WITH_REDIS)
#include "core/url.hpp"  // the library's own URL parser: the counters reach the same servers
#endif

namespace dblock_bench {

namespace {

// Resident set size in bytes (/proc/self/statm, second field, in pages).
double rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  long long size = 0, resident = 0;
  if (!(statm >> size >> resident)) throw std::runtime_error("cannot read /proc/self/statm");
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// How a backend's connections are counted: `read` is called before and after; the same
// counting connection (if any) is open both times, so it cancels out of the difference.
struct ConnectionCounter {
  std::string what;
  std::function<double()> read;
};

#ifdef DBLOCK_WITH_REDIS
// CLIENT LIST on each of the URL's servers (one for redis, every node for redlock), summed.
double redis_clients(const std::string& url) {
  auto u = dblock::detail::parse_url(url);
  double n = 0;
  for (const auto& hp : u.hosts) {
    std::unique_ptr<redisContext, void (*)(redisContext*)> c(
        redisConnect(hp.host.empty() ? "127.0.0.1" : hp.host.c_str(), hp.port ? hp.port : 6379), redisFree);
    if (!c || c->err) throw std::runtime_error("redis counter: cannot connect");
    if (!u.password.empty()) {
      auto* r = static_cast<redisReply*>(u.user.empty() ? redisCommand(c.get(), "AUTH %s", u.password.c_str())
                                                        : redisCommand(c.get(), "AUTH %s %s", u.user.c_str(),
                                                                       u.password.c_str()));
      if (r) freeReplyObject(r);
    }
    auto* r = static_cast<redisReply*>(redisCommand(c.get(), "CLIENT LIST"));
    if (!r || r->type != REDIS_REPLY_STRING) {
      if (r) freeReplyObject(r);
      throw std::runtime_error("redis counter: CLIENT LIST failed");
    }
    std::string text(r->str, r->len);
    freeReplyObject(r);
    n += static_cast<double>(std::count(text.begin(), text.end(), '\n'));
  }
  return n;
}
#endif

// url: unused in a build without PostgreSQL, MySQL and Redis.
ConnectionCounter connection_counter(const std::string& backend, [[maybe_unused]] const std::string& url) {
  if (backend == "sqlite")
    return {"open file descriptors of the process (/proc/self/fd): SQLite has no server", [] { return open_fds(false); }};
  if (backend == "zookeeper")
    return {"socket file descriptors of the process (/proc/self/fd -> socket:): one per ZooKeeper session; the "
            "server's side is not counted",
            [] { return open_fds(true); }};
  if (backend == "etcd")
    return {"socket file descriptors of the process (/proc/self/fd -> socket:): one gRPC channel per Client; the "
            "server's side is not counted",
            [] { return open_fds(true); }};
#ifdef DBLOCK_WITH_POSTGRESQL
  if (backend == "postgresql") {
    auto c = std::make_shared<pqxx::connection>(url);
    return {"rows of pg_stat_activity for the current user and database", [c] {
              pqxx::nontransaction tx(*c);
              return tx.exec("SELECT count(*) FROM pg_stat_activity WHERE usename = current_user AND datname = "
                             "current_database()")
                  .at(0)
                  .at(0)
                  .as<double>();
            }};
  }
#endif
#ifdef DBLOCK_WITH_MYSQL
  if (backend == "mysql") {
    auto u = dblock::detail::parse_url(url);
    ::sql::ConnectOptionsMap o;
    std::string host = u.hosts.empty() || u.hosts[0].host.empty() ? "127.0.0.1" : u.hosts[0].host;
    int port = u.hosts.empty() || !u.hosts[0].port ? 3306 : u.hosts[0].port;
    if (auto it = u.query.find("socket"); it != u.query.end()) o["socket"] = ::sql::SQLString(it->second);
    else o["hostName"] = ::sql::SQLString("tcp://" + host + ":" + std::to_string(port));
    o["userName"] = ::sql::SQLString(u.user);
    o["password"] = ::sql::SQLString(u.password);
    std::shared_ptr<::sql::Connection> c(::sql::mysql::get_mysql_driver_instance()->connect(o));
    return {"the server's Threads_connected (SHOW STATUS; server-wide)", [c] {
              std::unique_ptr<::sql::Statement> st(c->createStatement());
              std::unique_ptr<::sql::ResultSet> rs(st->executeQuery("SHOW STATUS LIKE 'Threads_connected'"));
              if (!rs->next()) throw std::runtime_error("mysql counter: no Threads_connected");
              return static_cast<double>(std::stoll(std::string(rs->getString(2))));
            }};
  }
#endif
#ifdef DBLOCK_WITH_REDIS
  if (backend == "redis" || backend == "redlock")
    return {backend == "redis" ? "CLIENT LIST lines on the server" : "CLIENT LIST lines, summed over the nodes",
            [url] { return redis_clients(url); }};
#endif
  return {"n/a", nullptr};
}

}  // namespace

// 100 in a full run: a session strategy pins a connection per held lock, and the test
// servers' max_connections (MariaDB's default 151, PostgreSQL's 200 less its reserved
// slots) must leave room for the benchmark's other clients.
std::size_t resources_locks(const Options& opt) { return opt.quick ? 20 : 100; }

BackendReport run_resources_scenario(const std::string& backend, const std::string& url,
                                     const dblock::ClientOptions& options,
                                     const std::vector<dblock::Strategy>& strategies, const Options& opt) {
  BackendReport rep;
  if (!opt.wants_scenario("resources")) return rep;
  const std::size_t n = resources_locks(opt);
  ConnectionCounter counter = connection_counter(backend, url);
  std::string short_of_n;
  for (auto strategy : strategies) {
    const std::string s(dblock::to_string(strategy));
    fmt::print(stderr, "dblock-bench: {}/{} resources: holding {} locks on one Client\n", backend, s, n);
    auto client = dblock::Client::open(url, options);
    dblock::LockOptions lock_options;
    lock_options.strategy = strategy;
    auto name = [&](std::size_t i) { return fmt::format("bench-resources-{}-{}", s, i); };
    // One acquire + release first, so the growth leaves out what the Client sets up once
    // (the pool's first connection, a LISTEN or subscriber connection, prepared statements).
    client->force_release(name(n));
    client->lock(name(n), lock_options).try_acquire(std::chrono::seconds(10)).value().release();
    const double conns_before = counter.read ? counter.read() : 0, rss_before = rss_bytes();

    std::vector<dblock::Lease> held;
    std::string failure;
    for (std::size_t i = 0; i < n; ++i) {
      try {
        client->force_release(name(i));
        auto lease = client->lock(name(i), lock_options).try_acquire(std::chrono::seconds(10));
        if (!lease) {
          failure = fmt::format("'{}' not granted within 10 s", name(i));
          break;
        }
        held.push_back(std::move(*lease));
      } catch (const std::exception& e) {
        failure = e.what();
        break;
      }
    }
    const double conns_after = counter.read ? counter.read() : 0, rss_after = rss_bytes();
    const std::size_t k = held.size();
    for (auto& l : held) l.release();
    held.clear();
    if (k == 0) throw std::runtime_error(fmt::format("{}/{} resources: no lock held: {}", backend, s, failure));

    Row row{backend, s, "resources", static_cast<int>(k), Summary{}, {}};
    row.own_table = true;
    if (counter.read) row.connections_per_lock = (conns_after - conns_before) / static_cast<double>(k);
    row.bytes_per_lock = (rss_after - rss_before) / static_cast<double>(k);
    fmt::print(stderr, "dblock-bench: {}/{} resources: {} locks held, {} connections per lock, {:.0f} bytes per lock{}\n",
               backend, s, k, row.connections_per_lock ? fmt::format("{:.2f}", *row.connections_per_lock) : "n/a",
               *row.bytes_per_lock, failure.empty() ? "" : "; stopped early: " + failure);
    if (!failure.empty())
      short_of_n += fmt::format("{}{}: {} of {} held, then: {}", short_of_n.empty() ? "" : "; ", s, k, n, failure);
    rep.rows.push_back(std::move(row));
  }
  rep.notes.push_back(fmt::format("{} resources: connections counted as {}", backend, counter.what));
  if (!short_of_n.empty())
    rep.notes.push_back(fmt::format("{} resources stopped short of {} locks (figures over those held): {}", backend, n,
                                    short_of_n));
  return rep;
}

void print_resources_table(const std::vector<Row>& rows) {
  bool any = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.scenario == "resources"; });
  if (!any) return;
  fmt::print(
      "\n## Resources: one Client holds many locks at once\n\n"
      "- per backend and strategy, one Client acquires locks on different names and holds them all; per held "
      "lock: the growth of connections (postgresql: pg_stat_activity rows of the user and database; mysql: "
      "Threads_connected; redis/redlock: CLIENT LIST lines, summed over the nodes; zookeeper: the process's "
      "socket fds; sqlite: the process's open fds) and of the process's RSS (/proc/self/statm, page-granular), "
      "from after one warm-up acquire + release to when all are held (so a session strategy, which pins a "
      "connection per held lock, shows (N - 1) / N: the first lock reuses the connection the warm-up left "
      "idle). Notes above give what was counted and where a run stopped short\n\n");
  fmt::print("| backend | strategy | locks held | connections/lock | bytes/lock |\n");
  fmt::print("|---|---|---:|---:|---:|\n");
  for (const auto& r : rows) {
    if (r.scenario != "resources") continue;
    fmt::print("| {} | {} | {} | {} | {:.0f} |\n", r.backend, r.strategy, r.workers,
               r.connections_per_lock ? fmt::format("{:.2f}", *r.connections_per_lock) : "n/a",
               r.bytes_per_lock.value_or(0));
  }
  std::fflush(stdout);
}

}  // namespace dblock_bench
