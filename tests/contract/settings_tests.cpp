// Client::check_settings (`dblock doctor`) against real servers, with settings that keep
// the guarantees and settings that do not. Redis: throwaway redis-server processes of the
// test's own, so the shared test servers' configuration is never touched; MySQL: a global
// setting changed and restored by a guard.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>

#include "backends/sqlite/sqlite_dialect.hpp"
#include "backends/sqlite/sqlite_connection.hpp"
#include "sql/settings.hpp"
#include "support/process.hpp"
#include "support/servers.hpp"
#include "support/temp_dir.hpp"
#ifdef DBLOCK_TEST_POSTGRESQL
#include "backends/postgresql/pg_connection.hpp"
#endif
#ifdef DBLOCK_TEST_REDIS
#include "backends/redis/redis_connection.hpp"
#endif

using namespace std::chrono_literals;
using dblock::SettingCheck;
using dblock::Verdict;

namespace {

// The line for `setting`; fails the test when there is none.
SettingCheck find(const std::vector<SettingCheck>& checks, const std::string& setting) {
  auto it = std::find_if(checks.begin(), checks.end(), [&](const SettingCheck& c) { return c.setting == setting; });
  if (it == checks.end()) FAIL("no check of " << setting);
  INFO(setting << " = " << it->value << ": " << to_string(it->verdict) << ": " << it->meaning);
  CHECK_FALSE(it->meaning.empty());
  return *it;
}

bool any_problem(const std::vector<SettingCheck>& checks) {
  return std::any_of(checks.begin(), checks.end(), [](const SettingCheck& c) { return dblock::is_problem(c.verdict); });
}

// `url` with one more query parameter.
std::string with_param(const std::string& url, const std::string& param) {
  return url + (url.find('?') == std::string::npos ? "?" : "&") + param;
}

}  // namespace

TEST_CASE("sqlite: doctor reads synchronous=FULL and WAL on dblock's own connection") {
  dblock::test::TempDir dir;
  auto c = dblock::Client::open("sqlite:" + dir.path() + "/locks.db");
  auto checks = c->check_settings();
  CHECK(checks.size() == 2);
  auto sync = find(checks, "synchronous");
  CHECK(sync.value == "FULL");
  CHECK(sync.verdict == Verdict::ok);
  auto journal = find(checks, "journal_mode");
  CHECK(journal.value == "wal");
  CHECK(journal.verdict == Verdict::ok);
  CHECK_FALSE(any_problem(checks));
}

// A waiter's ticket is written without a flush (Connection::flush_commits): the session is
// back to FULL for everything after it, grants included.
TEST_CASE("sqlite: a queued waiter's session commits with synchronous=FULL again", "[fair]") {
  dblock::test::TempDir dir;
  auto holder = dblock::Client::open("sqlite:" + dir.path() + "/locks.db");
  dblock::ClientOptions one;
  one.pool_size = 1;  // the session that wrote the ticket is the one doctor reads
  auto waiter = dblock::Client::open("sqlite:" + dir.path() + "/locks.db", one);
  auto held = holder->lock("job").try_acquire();
  REQUIRE(held);
  CHECK_FALSE(waiter->lock("job").try_acquire(200ms));  // joined the queue, then left it
  auto sync = find(waiter->check_settings(), "synchronous");
  CHECK(sync.value == "FULL");
  held->release();
  CHECK(waiter->lock("job").try_acquire());
  CHECK(find(waiter->check_settings(), "synchronous").value == "FULL");
}

TEST_CASE("sqlite: doctor flags synchronous OFF and NORMAL and an in-memory journal") {
  dblock::test::TempDir dir;
  dblock::detail::sqldb::SqliteConnection session(dir.path() + "/locks.db", 5s);  // WAL, FULL, as dblock opens it
  dblock::detail::sqldb::Connection& s = session;
  s.run("PRAGMA synchronous=OFF");
  CHECK(find(dblock::detail::sqldb::sqlite_settings(s), "synchronous").verdict == Verdict::breaks_exclusion);
  s.run("PRAGMA synchronous=NORMAL");
  auto normal = find(dblock::detail::sqldb::sqlite_settings(s), "synchronous");
  CHECK(normal.value == "NORMAL");
  CHECK(normal.verdict == Verdict::weakens_exclusion);
  s.run("PRAGMA synchronous=EXTRA");
  CHECK(find(dblock::detail::sqldb::sqlite_settings(s), "synchronous").verdict == Verdict::ok);
  s.run("PRAGMA journal_mode=MEMORY");
  auto journal = find(dblock::detail::sqldb::sqlite_settings(s), "journal_mode");
  CHECK(journal.value == "memory");
  CHECK(journal.verdict == Verdict::breaks_exclusion);
}

#ifdef DBLOCK_TEST_POSTGRESQL
TEST_CASE("postgresql: doctor finds the test server's durability settings ok") {
  auto c = dblock::Client::open(dblock::test::server_url("DBLOCK_TEST_PG_URL"));
  auto checks = c->check_settings();
  CHECK(checks.size() == 5);
  CHECK(find(checks, "fsync").verdict == Verdict::ok);
  CHECK(find(checks, "transport").value == "plaintext");  // the test server has no TLS
  CHECK(find(checks, "transport").verdict == Verdict::ok);  // on this machine
  CHECK(find(checks, "synchronous_commit").value == "on");
  CHECK(find(checks, "standbys").value == "0 streaming, synchronous_standby_names = ''");
  CHECK(find(checks, "default_transaction_isolation").verdict == Verdict::ok);
  CHECK_FALSE(any_problem(checks));
}

TEST_CASE("postgresql: doctor flags synchronous_commit=off set in the URL") {
  auto url = with_param(dblock::test::server_url("DBLOCK_TEST_PG_URL"), "options=-c%20synchronous_commit%3Doff");
  auto checks = dblock::Client::open(url)->check_settings();
  auto sc = find(checks, "synchronous_commit");
  CHECK(sc.value == "off");
  CHECK(sc.verdict == Verdict::weakens_exclusion);
  CHECK(any_problem(checks));
}

TEST_CASE("postgresql: a serializable default does not reach dblock's statements") {
  dblock::test::ScratchTable table(dblock::test::ScratchTable::Server::postgresql);
  auto url = with_param(table.url(), "options=-c%20default_transaction_isolation%3Dserializable");
  {  // dblock's session: the transactions its upserts run in are READ COMMITTED
    dblock::detail::sqldb::PgConnection s(url, "test", 10s);
    CHECK(dblock::detail::sqldb::as_text(s.run("SELECT current_setting('default_transaction_isolation')", {}).rows.at(0).at(0)) ==
          "read committed");
    s.begin();
    CHECK(dblock::detail::sqldb::as_text(s.run("SELECT current_setting('transaction_isolation')", {}).rows.at(0).at(0)) ==
          "read committed");
    s.rollback();
    // ... while a plain connection with the same URL would run serializable.
    auto plain = dblock::detail::sqldb::as_text(
        s.run("SELECT reset_val FROM pg_settings WHERE name = 'default_transaction_isolation'", {}).rows.at(0).at(0));
    CHECK(plain == "serializable");
  }
  auto c1 = dblock::Client::open(url, table.options());
  auto iso = find(c1->check_settings(), "default_transaction_isolation");
  CHECK(iso.value == "serializable");
  CHECK(iso.verdict == Verdict::ok);
  CHECK(iso.meaning.find("this one runs read committed") != std::string::npos);
  // And the locks work under it: exclusion, release, increasing fences, for every strategy.
  auto c2 = dblock::Client::open(url, table.options());
  for (auto strategy : c1->strategies()) {
    INFO(to_string(strategy));
    dblock::LockOptions o;
    o.strategy = strategy;
    auto a = c1->lock("iso", o).try_acquire(0ms);
    REQUIRE(a);
    CHECK_FALSE(c2->lock("iso", o).try_acquire(0ms));
    auto fence = a->fence();
    a->release();
    auto b = c2->lock("iso", o).try_acquire(1s);
    REQUIRE(b);
    CHECK(b->fence() > fence);
    b->release();
  }
}
#endif

#ifdef DBLOCK_TEST_MYSQL
TEST_CASE("mysql: doctor finds the test server's durability settings ok") {
  auto c = dblock::Client::open(dblock::test::server_url("DBLOCK_TEST_MYSQL_URL"));
  auto checks = c->check_settings();
  CHECK(checks.size() == 5);
  CHECK(find(checks, "innodb_flush_log_at_trx_commit").verdict == Verdict::ok);
  CHECK(find(checks, "transport").value == "plaintext");  // PREFERRED, and the test server has no TLS
  CHECK(find(checks, "transport").verdict == Verdict::ok);
  CHECK(find(checks, "sync_binlog").verdict == Verdict::ok);
  CHECK(find(checks, "replicas").value == "log_bin OFF");  // the test server writes no binary log
  CHECK_FALSE(any_problem(checks));
}

TEST_CASE("mysql: doctor flags innodb_flush_log_at_trx_commit=2") {
  auto url = dblock::test::server_url("DBLOCK_TEST_MYSQL_URL");
  auto admin = dblock::test::server_connection(url);
  auto before = dblock::detail::sqldb::as_text(admin->run("SELECT @@GLOBAL.innodb_flush_log_at_trx_commit").rows.at(0).at(0));
  // The shared server gets its setting back however this test ends.
  struct Restore {
    dblock::test::Connection& s;
    std::string value;
    ~Restore() {
      try {
        s.run("SET GLOBAL innodb_flush_log_at_trx_commit = " + value);
      } catch (...) {
        try {
          dblock::test::server_connection(dblock::test::server_url("DBLOCK_TEST_MYSQL_URL"))
              ->run("SET GLOBAL innodb_flush_log_at_trx_commit = " + value);
        } catch (...) {
        }
      }
    }
  } restore{*admin, before};
  admin->run("SET GLOBAL innodb_flush_log_at_trx_commit = 2");
  auto checks = dblock::Client::open(url)->check_settings();
  auto flush = find(checks, "innodb_flush_log_at_trx_commit");
  CHECK(flush.value == "2");
  CHECK(flush.verdict == Verdict::weakens_exclusion);
  CHECK(any_problem(checks));
}
#endif

#ifdef DBLOCK_TEST_REDIS
namespace {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port");
  close(fd);
  return ntohs(a.sin_port);
}

// A redis-server of this test's own, with the given settings, stopped at the end of its scope.
class ThrowawayRedis {
 public:
  explicit ThrowawayRedis(const std::vector<std::string>& settings) : port_(free_port()) {
    const char* server = std::getenv("DBLOCK_REDIS_SERVER");
    std::vector<std::string> args{server && *server ? server : "/usr/bin/redis-server",
                                  "--port", std::to_string(port_), "--bind", "127.0.0.1", "--dir", dir_.path(),
                                  "--daemonize", "no", "--logfile", dir_.path() + "/server.log"};
    args.insert(args.end(), settings.begin(), settings.end());
    pid_ = dblock::test::spawn(args);
    for (auto until = std::chrono::steady_clock::now() + 10s;; std::this_thread::sleep_for(50ms)) {
      try {
        connect();
        return;
      } catch (const dblock::Error&) {
        if (std::chrono::steady_clock::now() > until) {
          stop();
          FAIL("redis-server " << port_ << " did not start (see " << dir_.path() << "/server.log)");
        }
      }
    }
  }
  ~ThrowawayRedis() { stop(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string url() const { return "redis://" + address(); }
  std::unique_ptr<dblock::detail::redis::Connection> connect() const {
    dblock::detail::redis::Target t;
    t.port = port_;
    t.where = url();
    return std::make_unique<dblock::detail::redis::Connection>(t);
  }

 private:
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    dblock::test::wait_exit(pid_);
    pid_ = -1;
  }
  dblock::test::TempDir dir_;
  int port_;
  pid_t pid_ = -1;
};

}  // namespace

TEST_CASE("redis: doctor flags no persistence and an evicting policy, and names the policies that evict", "[redis]") {
  ThrowawayRedis r({"--appendonly", "no", "--save", "", "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"});
  auto c = dblock::Client::open(r.url());
  auto checks = c->check_settings();
  CHECK(checks.size() == 4);  // and the transport
  CHECK(find(checks, "appendonly").verdict == Verdict::breaks_exclusion);
  CHECK(find(checks, "appendfsync").verdict == Verdict::ok);  // not in use
  auto policy = find(checks, "maxmemory-policy");
  CHECK(policy.value.rfind("allkeys-lru", 0) == 0);
  CHECK(policy.verdict == Verdict::breaks_exclusion);

  auto admin = r.connect();
  // Lock keys carry a TTL: the volatile-* policies evict exactly those.
  for (const char* p : {"volatile-lru", "volatile-ttl", "allkeys-random"}) {
    admin->command({"CONFIG", "SET", "maxmemory-policy", p});
    auto v = find(c->check_settings(), "maxmemory-policy");
    CHECK(v.value.rfind(p, 0) == 0);
    CHECK(v.verdict == Verdict::breaks_exclusion);
  }
  admin->command({"CONFIG", "SET", "maxmemory", "0"});  // no limit: nothing is evicted
  CHECK(find(c->check_settings(), "maxmemory-policy").verdict == Verdict::ok);
  admin->command({"CONFIG", "SET", "save", "900 1"});  // snapshots only: a restart goes back to the last
  auto snap = find(c->check_settings(), "appendonly");
  CHECK(snap.verdict == Verdict::breaks_exclusion);
  CHECK(snap.meaning.find("snapshot") != std::string::npos);
}

TEST_CASE("redis: doctor finds appendfsync always and noeviction ok, and everysec weakening", "[redis]") {
  ThrowawayRedis r({"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--maxmemory-policy",
                    "noeviction"});
  auto c = dblock::Client::open(r.url());
  auto checks = c->check_settings();
  CHECK(find(checks, "appendonly").verdict == Verdict::ok);
  CHECK(find(checks, "appendfsync").verdict == Verdict::ok);
  CHECK(find(checks, "maxmemory-policy").verdict == Verdict::ok);
  CHECK_FALSE(any_problem(checks));
  r.connect()->command({"CONFIG", "SET", "appendfsync", "everysec"});
  auto everysec = find(c->check_settings(), "appendfsync");
  CHECK(everysec.value == "everysec");
  CHECK(everysec.verdict == Verdict::weakens_exclusion);
}

TEST_CASE("redis: doctor reports unknown, not an error, when CONFIG is disabled", "[redis]") {
  ThrowawayRedis r({"--rename-command", "CONFIG", ""});
  auto c = dblock::Client::open(r.url());
  auto checks = c->check_settings();
  CHECK(checks.size() == 4);
  CHECK(checks.back().setting == "transport");  // not a setting CONFIG reads
  checks.pop_back();
  for (const auto& check : checks) {
    CHECK(check.verdict == Verdict::unknown);
    CHECK(check.meaning.find("CONFIG") != std::string::npos);
  }
  CHECK_FALSE(any_problem(checks));
}

TEST_CASE("redis: doctor reads the shared test server", "[redis]") {
  auto checks = dblock::Client::open(dblock::test::server_url("DBLOCK_TEST_REDIS_URL"))->check_settings();
  CHECK(find(checks, "appendonly").verdict != Verdict::unknown);
  CHECK(find(checks, "maxmemory-policy").verdict == Verdict::ok);
}

TEST_CASE("redis: doctor checks every redlock node on its own, a node down as unknown", "[redis]") {
  ThrowawayRedis bad({"--appendonly", "no", "--save", ""});
  // Two of the shared redlock nodes, and a port nobody listens on (a majority still answers).
  auto shared = dblock::test::server_url("DBLOCK_TEST_REDLOCK_URL");
  auto hosts = shared.substr(shared.find("//") + 2);
  auto first = hosts.substr(0, hosts.find(','));
  const std::string down = "127.0.0.1:" + std::to_string(free_port());
  auto c = dblock::Client::open("redlock://" + bad.address() + "," + first + "," + down);
  auto checks = c->check_settings();
  CHECK(checks.size() == 10);  // 3 x 3, and the transport
  CHECK(find(checks, bad.address() + " appendonly").verdict == Verdict::breaks_exclusion);
  CHECK(find(checks, first + " maxmemory-policy").verdict == Verdict::ok);
  for (const char* s : {"appendonly", "appendfsync", "maxmemory-policy"}) {
    auto d = find(checks, down + " " + s);
    CHECK(d.verdict == Verdict::unknown);
    CHECK(d.meaning.find("could not be read") != std::string::npos);
  }
  CHECK(any_problem(checks));
}
#endif

#ifdef DBLOCK_TEST_ZOOKEEPER
TEST_CASE("zookeeper: doctor names forceSync, which the client protocol cannot read", "[zookeeper]") {
  auto c = dblock::Client::open(dblock::test::server_url("DBLOCK_TEST_ZK_URL"));
  auto checks = c->check_settings();
  REQUIRE(checks.size() == 2);
  CHECK(checks[1].setting == "transport");
  CHECK(checks[1].value == "plaintext");  // Debian's C client has no TLS
  CHECK(checks[0].setting == "forceSync");
  CHECK(checks[0].verdict == Verdict::unknown);
  CHECK(checks[0].meaning.find("forceSync=yes") != std::string::npos);
  CHECK_FALSE(any_problem(checks));
}
#endif
