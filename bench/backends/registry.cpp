#include "bench/backends/registry.hpp"

#include <stdexcept>

namespace dblock_bench {

// What each backend's file (bench/backends/<name>.cpp) defines.
std::optional<std::string> sqlite_skip_reason();
BackendReport run_sqlite(const Options& opt);
std::optional<std::string> postgresql_skip_reason();
BackendReport run_postgresql(const Options& opt);
std::function<void()> postgresql_bare_cycle(const std::string& url, const std::string& table);
std::optional<std::string> mysql_skip_reason();
BackendReport run_mysql(const Options& opt);
std::function<void()> mysql_bare_cycle(const std::string& url, const std::string& table);
std::optional<std::string> redis_skip_reason();  // redis.cpp: Redis and Redlock
BackendReport run_redis(const Options& opt);
std::function<void()> redis_bare_cycle(const std::string& url, const std::string& table);
std::optional<std::string> redlock_skip_reason();
BackendReport run_redlock(const Options& opt);
std::optional<std::string> zookeeper_skip_reason();
BackendReport run_zookeeper(const Options& opt);
std::optional<std::string> etcd_skip_reason();
BackendReport run_etcd(const Options& opt);
std::function<void()> etcd_bare_cycle(const std::string& url, const std::string& table);

namespace {

// The skip reason of a backend this build lacks (its file is not compiled in).
[[maybe_unused]] std::optional<std::string> built_without(const char* what) {
  return "built without " + std::string(what);
}

}  // namespace

const std::vector<BackendSpec>& backends() {
  static const std::vector<BackendSpec> table{
      {"sqlite", sqlite_skip_reason, run_sqlite},
#ifdef DBLOCK_WITH_POSTGRESQL
      {"postgresql", postgresql_skip_reason, run_postgresql, postgresql_bare_cycle},
#else
      {"postgresql", [] { return built_without("libpqxx (DBLOCK_WITH_POSTGRESQL is off)"); }, nullptr},
#endif
#ifdef DBLOCK_WITH_MYSQL
      {"mysql", mysql_skip_reason, run_mysql, mysql_bare_cycle},
#else
      {"mysql", [] { return built_without("mysql-connector-c++ (DBLOCK_WITH_MYSQL is off)"); }, nullptr},
#endif
#ifdef DBLOCK_WITH_REDIS
      {"redis", redis_skip_reason, run_redis, redis_bare_cycle},
      {"redlock", redlock_skip_reason, run_redlock},
#else
      {"redis", [] { return built_without("hiredis (DBLOCK_WITH_REDIS is off)"); }, nullptr},
      {"redlock", [] { return built_without("hiredis (DBLOCK_WITH_REDIS is off)"); }, nullptr},
#endif
#ifdef DBLOCK_WITH_ZOOKEEPER
      {"zookeeper", zookeeper_skip_reason, run_zookeeper},
#else
      {"zookeeper", [] { return built_without("zookeeper_mt (DBLOCK_WITH_ZOOKEEPER is off)"); }, nullptr},
#endif
#ifdef DBLOCK_WITH_ETCD
      {"etcd", etcd_skip_reason, run_etcd, etcd_bare_cycle},
#else
      {"etcd", [] { return built_without("the etcd bridge (DBLOCK_WITH_ETCD is off)"); }, nullptr},
#endif
  };
  return table;
}

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& b : backends()) names.emplace_back(b.name);
  return names;
}

const BackendSpec& backend_spec(const std::string& name) {
  for (const auto& b : backends())
    if (name == b.name) return b;
  throw std::logic_error("dblock-bench: no backend '" + name + "' in the registry");
}

}  // namespace dblock_bench
