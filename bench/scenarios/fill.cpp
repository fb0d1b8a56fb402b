// Bulk leases for the table-size and sweep scenarios. The SQL backends fill with one
// INSERT ... SELECT from a generated series, written in the dialect's own clock units
// (${now_ms} from the library's dialect, rendered by the library's render()), through the
// library's own Connection adapters; Redis and Redlock with pipelined commands; ZooKeeper with
// asynchronous creates, a window of them in flight; etcd with transactions of 128 puts (etcd's
// default --max-txn-ops).
#include "bench/scenarios/fill.hpp"

#include <stdlib.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

#include "backends/mysql/mysql_dialect.hpp"
#include "backends/postgresql/pg_dialect.hpp"
#include "backends/sqlite/sqlite_connection.hpp"
#include "backends/sqlite/sqlite_dialect.hpp"
#include "bench/backends/registry.hpp"
#include "core/url.hpp"
#include "core/validate.hpp"
#include "sql/connection.hpp"
#include "sql/dialect.hpp"

#ifdef DBLOCK_WITH_POSTGRESQL
#include "backends/postgresql/pg_connection.hpp"
#endif
#ifdef DBLOCK_WITH_MYSQL
#include "backends/mysql/mysql_connection.hpp"
#endif
#ifdef DBLOCK_WITH_REDIS
#include <hiredis/hiredis.h>
#endif
#ifdef DBLOCK_WITH_ETCD
#include <grpcpp/grpcpp.h>

#include "rpc.grpc.pb.h"
#endif
#ifdef DBLOCK_WITH_ZOOKEEPER
#include <zookeeper/zookeeper.h>

#include <chrono>
#include <thread>
#endif

namespace fs = std::filesystem;
namespace dsql = dblock::detail::sqldb;

namespace dblock_bench {

namespace {

// Long enough for a million-row INSERT ... SELECT on a slow disk.
constexpr std::chrono::milliseconds kBulkTimeout{600'000};

// The bulk statements per SQL dialect. ${from} and ${to} bound the series, ${prefix} starts
// each name, ${valid_for} is added to the database clock for valid_until (negative: expired).
// The rows look like the lease rows the insert strategy writes (holds 1, an owner); fence 0
// keeps SQLite's fence-counter triggers out of it. MariaDB's SEQUENCE engine (seq_A_to_B)
// is its fastest row source; a recursive CTE there would hit max_recursive_iterations.
struct BulkSql {
  const char* backend;
  const char* fill;
};

const BulkSql kBulkSql[] = {
    {"sqlite",
     "WITH RECURSIVE seq(i) AS (SELECT ${from} UNION ALL SELECT i + 1 FROM seq WHERE i < ${to}) "
     "INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version) "
     "SELECT '${prefix}' || i, 'dblock-bench-fill', 0, 1, ${now_ms}, ${now_ms} + (${valid_for}), 1 FROM seq"},
    {"postgresql",
     "INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version) "
     "SELECT '${prefix}' || i, 'dblock-bench-fill', 0, 1, ${now_ms}, ${now_ms} + (${valid_for}), 1 "
     "FROM generate_series(${from}::bigint, ${to}::bigint) AS i"},
    {"mysql",
     "INSERT INTO ${table} (name, owner, fence, holds, acquired_at, valid_until, version) "
     "SELECT CONCAT('${prefix}', seq), 'dblock-bench-fill', 0, 1, ${now_ms}, ${now_ms} + (${valid_for}), 1 "
     "FROM seq_${from}_to_${to}"},
};

std::string replace_all(std::string text, const std::string& key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

class SqlFiller final : public Filler {
 public:
  SqlFiller(const FillTarget& t, std::string prefix) : prefix_(std::move(prefix)) {
    auto url = dblock::detail::parse_url(t.url);
    table_ = dblock::detail::parse_table_name(t.options.table);
    for (const auto& b : kBulkSql)
      if (t.backend == b.backend) sql_ = &b;
    if (t.backend == "sqlite") {
      dialect_ = &dsql::sqlite_dialect();
      session_ = std::make_unique<dsql::SqliteConnection>(url.path, kBulkTimeout);
    } else if (t.backend == "postgresql") {
#ifdef DBLOCK_WITH_POSTGRESQL
      dialect_ = &dsql::postgresql_dialect();
      session_ = std::make_unique<dsql::PgConnection>(url.original, url.redacted(), kBulkTimeout);
#endif
    } else if (t.backend == "mysql") {
#ifdef DBLOCK_WITH_MYSQL
      dialect_ = &dsql::mysql_dialect();
      dsql::MySqlTarget m;  // as open_mysql() reads the URL
      if (!url.hosts.empty()) {
        if (!url.hosts[0].host.empty()) m.host = url.hosts[0].host;
        if (url.hosts[0].port) m.port = url.hosts[0].port;
      }
      if (auto it = url.query.find("socket"); it != url.query.end()) m.socket = it->second;
      m.user = url.user;
      m.password = url.password;
      m.database = url.path;
      m.statement_timeout = kBulkTimeout;
      m.where = url.redacted();
      if (table_.schema.empty()) table_.schema = m.database;  // as open_mysql() qualifies it
      session_ = std::make_unique<dsql::MySqlConnection>(m);
#endif
    }
    if (!session_ || !sql_) throw std::runtime_error(t.backend + ": no bulk SQL for this backend (not built in?)");
  }

  std::size_t add(std::size_t from, std::size_t to, std::int64_t valid_for_ms) override {
    std::string text = sql_->fill;
    text = replace_all(text, "${from}", std::to_string(from));
    text = replace_all(text, "${to}", std::to_string(to));
    text = replace_all(text, "${prefix}", prefix_);  // a constant of ours: letters and '-'
    text = replace_all(text, "${valid_for}", std::to_string(valid_for_ms));
    return static_cast<std::size_t>(session_->run(render(text), {}).affected);
  }

  void clear() override { session_->run_script(render((*dialect_)[dblock::detail::sqldb::Statement::drop_schema])); }

  std::string method() const override {
    return fmt::format("one `{}`", replace_all(replace_all(sql_->fill, "${now_ms}", "now"), "${table}", "t"));
  }

 private:
  std::string render(const std::string& text) const { return dsql::render(text, table_, dialect_->now_ms); }

  std::string prefix_;
  dblock::detail::TableName table_;
  const BulkSql* sql_ = nullptr;
  const dsql::Dialect* dialect_ = nullptr;
  std::unique_ptr<dsql::Connection> session_;
};

#ifdef DBLOCK_WITH_REDIS

// Every node of a redis or redlock URL, filled alike, pipelined: a batch of commands goes
// to every node before any reply is read.
class RedisFiller final : public Filler {
 public:
  RedisFiller(const FillTarget& t, std::string prefix) : ns_(t.options.table), prefix_(std::move(prefix)) {
    auto u = dblock::detail::parse_url(t.url);
    for (const auto& hp : u.hosts) {
      redisContext* c = redisConnect(hp.host.empty() ? "127.0.0.1" : hp.host.c_str(), hp.port ? hp.port : 6379);
      if (!c || c->err) {
        std::string why = c ? c->errstr : "out of memory";
        if (c) redisFree(c);
        throw std::runtime_error(t.backend + " fill: cannot connect: " + why);
      }
      nodes_.push_back(c);
      if (!u.password.empty())
        run_batch({u.user.empty() ? std::vector<std::string>{"AUTH", u.password}
                                  : std::vector<std::string>{"AUTH", u.user, u.password}});
    }
  }
  ~RedisFiller() override {
    for (auto* c : nodes_) redisFree(c);
  }

  // A live dblock lease: the lock key NAME (value: the grant record, PX: the lease) and the
  // fence counter <ns>:fence:NAME that every name a dblock granted has (redis_scripts.hpp).
  // NAME = <ns>:<prefix><i>, so every key of the fill sits in the scenario's namespace.
  std::size_t add(std::size_t from, std::size_t to, std::int64_t valid_for_ms) override {
    if (valid_for_ms <= 0) throw std::logic_error("redis fill: keys cannot be born expired");
    const std::string px = std::to_string(valid_for_ms);
    std::vector<std::vector<std::string>> batch;
    for (std::size_t i = from; i <= to; ++i) {
      std::string name = lock_name(i);
      batch.push_back({"SET", name, "1 1 0 0 dblock-bench-fill", "PX", px});
      // The counter never expires (as the library's): clear() deletes it, also the leftovers
      // of a killed run, since every run clears before it fills.
      batch.push_back({"SET", ns_ + ":fence:" + name, "1"});
      if (batch.size() >= kBatch || i == to) run_batch(batch), batch.clear();
    }
    return to >= from ? to - from + 1 : 0;
  }

  // Every key of the namespace (SCAN, not the fill's names: a killed run may have filled
  // more than this one), so also a killed run's fence counters, which have no expiry.
  void clear() override {
    for (auto* c : nodes_) {
      std::string cursor = "0";
      do {
        auto* r = static_cast<redisReply*>(
            redisCommand(c, "SCAN %s MATCH %b COUNT 10000", cursor.c_str(), (ns_ + ":*").data(), ns_.size() + 2));
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
          if (r) freeReplyObject(r);
          throw std::runtime_error("redis fill: SCAN failed");
        }
        cursor.assign(r->element[0]->str, r->element[0]->len);
        std::vector<std::string> unlink{"UNLINK"};
        for (std::size_t i = 0; i < r->element[1]->elements; ++i)
          unlink.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
        freeReplyObject(r);
        if (unlink.size() > 1) run_on(c, unlink);
      } while (cursor != "0");
    }
    // The deleted keys' history stays in the append-only file until it is rewritten (after
    // 1M keys: 200 MB, and 1 GB over Redlock's nodes), and every restart replays it: a test
    // run on the same servers then waited 11 s for Redis to restart. Rewritten now; an error
    // (a rewrite already running, no AOF) changes nothing.
    for (auto* c : nodes_)
      if (auto* r = static_cast<redisReply*>(redisCommand(c, "BGREWRITEAOF"))) freeReplyObject(r);
  }

  std::string method() const override {
    return fmt::format("pipelined `SET {0}:{1}<i> '<fence> <holds> <at> <waiting> owner' PX ttl` + `SET {0}:fence:{0}:{1}<i> 1` "
                       "(batches of {2} commands, on every node)",
                       ns_, prefix_, kBatch);
  }

 private:
  static constexpr std::size_t kBatch = 10000;
  std::string lock_name(std::size_t i) const { return ns_ + ":" + prefix_ + std::to_string(i); }

  void run_on(redisContext* c, const std::vector<std::string>& cmd) {
    std::vector<const char*> argv;
    std::vector<size_t> len;
    for (const auto& a : cmd) argv.push_back(a.c_str()), len.push_back(a.size());
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(cmd.size()), argv.data(), len.data()));
    if (!r) throw std::runtime_error(std::string("redis fill: ") + (c->err ? c->errstr : "no reply"));
    std::string error = r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "";
    freeReplyObject(r);
    if (!error.empty()) throw std::runtime_error("redis fill: " + error);
  }

  void run_batch(const std::vector<std::vector<std::string>>& cmds) {
    for (auto* c : nodes_)
      for (const auto& cmd : cmds) {
        std::vector<const char*> argv;
        std::vector<size_t> len;
        for (const auto& a : cmd) argv.push_back(a.c_str()), len.push_back(a.size());
        redisAppendCommandArgv(c, static_cast<int>(cmd.size()), argv.data(), len.data());
      }
    for (auto* c : nodes_)
      for (std::size_t i = 0; i < cmds.size(); ++i) {
        void* reply = nullptr;
        if (redisGetReply(c, &reply) != REDIS_OK || !reply)
          throw std::runtime_error(std::string("redis fill: ") + (c->err ? c->errstr : "no reply"));
        auto* r = static_cast<redisReply*>(reply);
        std::string error = r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "";
        freeReplyObject(r);
        if (!error.empty()) throw std::runtime_error("redis fill: " + error);
      }
  }

  std::string ns_, prefix_;
  std::vector<redisContext*> nodes_;
};

#endif

#ifdef DBLOCK_WITH_ZOOKEEPER

// Persistent children <root>/<prefix><i>, created and deleted asynchronously with up to
// kWindow requests in flight (one round trip each would take seconds for 10 000).
class ZkFiller final : public Filler {
 public:
  ZkFiller(const FillTarget& t, std::string prefix) : prefix_(std::move(prefix)) {
    auto u = dblock::detail::parse_url(t.url);
    std::string hosts;
    for (const auto& h : u.hosts)
      hosts += fmt::format("{}{}:{}", hosts.empty() ? "" : ",", h.host.empty() ? "127.0.0.1" : h.host,
                           h.port ? h.port : 2181);
    root_ = "/" + u.path;
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh_ = zookeeper_init(hosts.c_str(), nullptr, 30000, nullptr, nullptr, 0);
    if (!zh_) throw std::runtime_error("zookeeper fill: cannot start a client for " + hosts);
    for (int i = 0; i < 500 && zoo_state(zh_) != ZOO_CONNECTED_STATE; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (zoo_state(zh_) != ZOO_CONNECTED_STATE) throw std::runtime_error("zookeeper fill: no session with " + hosts);
  }
  ~ZkFiller() override { zookeeper_close(zh_); }

  std::size_t add(std::size_t from, std::size_t to, std::int64_t) override {
    for (std::size_t i = from; i <= to; ++i) {
      wait_below(kWindow);
      std::string path = root_ + "/" + prefix_ + std::to_string(i);
      started();  // before the call: the completion may run before it returns
      int rc = zoo_acreate(zh_, path.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, &on_created, this);
      if (rc != ZOK) {
        finish(ZOK);
        throw std::runtime_error(fmt::format("zookeeper fill: create {}: {}", path, zerror(rc)));
      }
    }
    wait_below(1);
    return take_error("create");
  }

  // Every child of the root (recursively: the measured locks' nodes too), then the root.
  void clear() override {
    for (const auto& child : children(root_)) {
      wait_below(kWindow);
      std::string path = root_ + "/" + child;
      started();
      if (zoo_adelete(zh_, path.c_str(), -1, &on_deleted, this) != ZOK) finish(ZOK);
    }
    wait_below(1);
    for (const auto& child : children(root_)) remove_tree(root_ + "/" + child);  // ZNOTEMPTY ones
    remove_tree(root_);
    std::lock_guard lk(m_);
    done_ = 0, first_error_ = ZOK;
  }

  std::string method() const override {
    return fmt::format("asynchronous `zoo_acreate` of persistent children {}/{}<i> (up to {} in flight)", root_,
                       prefix_, kWindow);
  }

 private:
  static constexpr std::size_t kWindow = 1000;

  static void on_created(int rc, const char*, const void* self) { static_cast<const ZkFiller*>(self)->finish(rc); }
  static void on_deleted(int, const void* self) { static_cast<const ZkFiller*>(self)->finish(ZOK); }
  void started() {
    std::lock_guard lk(m_);
    ++in_flight_;
  }
  void finish(int rc) const {  // on the C client's completion thread
    std::lock_guard lk(m_);
    --in_flight_;
    if (rc == ZOK) ++done_;
    else if (first_error_ == ZOK) first_error_ = rc;
    cv_.notify_all();
  }
  void wait_below(std::size_t n) {
    std::unique_lock lk(m_);
    cv_.wait(lk, [&] { return in_flight_ < n; });
  }
  std::size_t take_error(const char* what) {
    std::lock_guard lk(m_);
    if (first_error_ != ZOK)
      throw std::runtime_error(fmt::format("zookeeper fill: {}: {}", what, zerror(first_error_)));
    std::size_t n = done_;
    done_ = 0;
    return n;
  }
  std::vector<std::string> children(const std::string& path) {
    String_vector v{};
    if (zoo_get_children(zh_, path.c_str(), 0, &v) != ZOK) return {};
    std::vector<std::string> out(v.data, v.data + v.count);
    deallocate_String_vector(&v);
    return out;
  }
  void remove_tree(const std::string& path) {
    for (const auto& k : children(path)) remove_tree(path + "/" + k);
    zoo_delete(zh_, path.c_str(), -1);
  }

  std::string prefix_, root_;
  zhandle_t* zh_ = nullptr;
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  mutable std::size_t in_flight_ = 0, done_ = 0;
  mutable int first_error_ = ZOK;
};

#endif

#ifdef DBLOCK_WITH_ETCD

// Other names' holders as etcd's lock recipe leaves them: <root>/<prefix><i>/<lease hex>, each
// under one lease of the fill (granted for the run, revoked by clear()), put in transactions
// of kBatch puts (etcd's default --max-txn-ops is 128).
class EtcdFiller final : public Filler {
 public:
  EtcdFiller(const FillTarget& t, std::string prefix) : prefix_(std::move(prefix)) {
    auto u = dblock::detail::parse_url(t.url);
    if (u.hosts.empty()) throw std::runtime_error("etcd fill: no endpoint in " + t.url);
    auto target = fmt::format("{}:{}", u.hosts[0].host.empty() ? "127.0.0.1" : u.hosts[0].host,
                              u.hosts[0].port ? u.hosts[0].port : 2379);
    root_ = "/" + u.path;
    channel_ = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
    kv_ = etcdserverpb::KV::NewStub(channel_);
    lease_ = etcdserverpb::Lease::NewStub(channel_);
  }

  std::size_t add(std::size_t from, std::size_t to, std::int64_t valid_for_ms) override {
    if (valid_for_ms <= 0) throw std::logic_error("etcd fill: keys cannot be born expired");
    if (lease_id_ == 0) {
      grpc::ClientContext ctx;
      etcdserverpb::LeaseGrantRequest req;
      req.set_ttl(std::max<std::int64_t>(1, valid_for_ms / 1000));
      etcdserverpb::LeaseGrantResponse resp;
      check(lease_->LeaseGrant(&ctx, req, &resp), "LeaseGrant");
      lease_id_ = resp.id();
    }
    const auto hex = fmt::format("{:x}", lease_id_);
    std::size_t added = 0;
    for (std::size_t i = from; i <= to;) {
      etcdserverpb::TxnRequest t;
      for (std::size_t k = 0; k < kBatch && i <= to; ++k, ++i) {
        auto* put = t.add_success()->mutable_request_put();
        put->set_key(root_ + "/" + prefix_ + std::to_string(i) + "/" + hex);
        put->set_lease(lease_id_);
      }
      grpc::ClientContext ctx;
      etcdserverpb::TxnResponse resp;
      check(kv_->Txn(&ctx, t, &resp), "Txn");
      added += static_cast<std::size_t>(t.success_size());
    }
    return added;
  }

  // Every key under the root (the measured locks' too), and the fill's lease.
  void clear() override {
    auto p = root_ + "/";
    std::string end = p;
    end.back() = static_cast<char>(end.back() + 1);
    grpc::ClientContext ctx;
    etcdserverpb::DeleteRangeRequest req;
    req.set_key(p);
    req.set_range_end(end);
    etcdserverpb::DeleteRangeResponse resp;
    check(kv_->DeleteRange(&ctx, req, &resp), "DeleteRange");
    if (lease_id_ != 0) {
      grpc::ClientContext c2;
      etcdserverpb::LeaseRevokeRequest r;
      r.set_id(lease_id_);
      etcdserverpb::LeaseRevokeResponse rr;
      lease_->LeaseRevoke(&c2, r, &rr);  // gone already is fine
      lease_id_ = 0;
    }
  }

  std::string method() const override {
    return fmt::format("`Txn`s of {} `Put`s of keys {}/{}<i>/<lease hex> under one lease", kBatch, root_, prefix_);
  }

 private:
  static constexpr std::size_t kBatch = 128;
  static void check(const grpc::Status& s, const char* what) {
    if (!s.ok()) throw std::runtime_error(fmt::format("etcd fill: {}: {}", what, s.error_message()));
  }
  std::string root_, prefix_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
  std::int64_t lease_id_ = 0;
};

#endif

}  // namespace

std::vector<FillTarget> fill_targets(const Options& opt, const std::string& table, const std::string& sqlite_dir,
                                     bool only_sql) {
  std::vector<FillTarget> out;
  auto add = [&](const std::string& backend, std::string url) {
    FillTarget t{backend, std::move(url), {}};
    t.options.table = table;
    t.options.auto_migrate = true;
    if (backend == "zookeeper" || backend == "etcd") t.url += "/" + table;  // the root (prefix) is the URL's path
    if (!only_sql || t.is_sql()) out.push_back(std::move(t));
  };
  auto runs = [&](const char* backend) {  // selected, and built in with its URL set
    return opt.wants_backend(backend) && !backend_spec(backend).skip_reason();
  };
  if (opt.wants_backend("sqlite")) add("sqlite", "sqlite:" + sqlite_dir + "/" + table + ".db");
  if (runs("postgresql")) add("postgresql", env_url("DBLOCK_TEST_PG_URL"));
  if (runs("mysql")) add("mysql", env_url("DBLOCK_TEST_MYSQL_URL"));
  if (runs("redis")) add("redis", env_url("DBLOCK_TEST_REDIS_URL"));
  if (runs("redlock")) add("redlock", env_url("DBLOCK_TEST_REDLOCK_URL"));
  if (runs("zookeeper")) add("zookeeper", env_url("DBLOCK_TEST_ZK_URL"));
  if (runs("etcd")) add("etcd", env_url("DBLOCK_TEST_ETCD_URL"));
  return out;
}

std::unique_ptr<Filler> make_filler(const FillTarget& target, const std::string& prefix) {
  if (target.is_sql()) return std::make_unique<SqlFiller>(target, prefix);
#ifdef DBLOCK_WITH_REDIS
  if (target.backend == "redis" || target.backend == "redlock") return std::make_unique<RedisFiller>(target, prefix);
#endif
#ifdef DBLOCK_WITH_ZOOKEEPER
  if (target.backend == "zookeeper") return std::make_unique<ZkFiller>(target, prefix);
#endif
#ifdef DBLOCK_WITH_ETCD
  if (target.backend == "etcd") return std::make_unique<EtcdFiller>(target, prefix);
#endif
  throw std::runtime_error(target.backend + ": no bulk fill (not built in)");
}

ScratchDir::ScratchDir(const std::string& wanted, const std::string& leaf) {
  std::error_code ec;
  if (!wanted.empty()) {
    path_ = fs::absolute(wanted).string() + "/" + leaf;
    fs::create_directories(path_, ec);
    if (!fs::is_directory(path_)) throw std::runtime_error(fmt::format("cannot create directory '{}'", path_));
    return;
  }
  std::string tmpl = "/tmp/dblock-bench-" + leaf + ".XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error(fmt::format("mkdtemp {} failed", tmpl));
  path_ = tmpl;
  remove_ = true;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  if (remove_) fs::remove_all(path_, ec);
}

std::string short_count(std::size_t n) {
  if (n >= 1'000'000 && n % 1'000'000 == 0) return fmt::format("{}M", n / 1'000'000);
  if (n >= 1'000 && n % 1'000 == 0) return fmt::format("{}k", n / 1'000);
  return std::to_string(n);
}

}  // namespace dblock_bench
