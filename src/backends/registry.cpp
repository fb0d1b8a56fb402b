// The one place URL schemes map to backends. Backends that need a server are compiled in
// with DBLOCK_WITH_<NAME>.
#include "backends/sqlite/sqlite_backend.hpp"
#include "backends/sqlite/sqlite_dialect.hpp"
#ifdef DBLOCK_WITH_POSTGRESQL
#include "backends/postgresql/pg_backend.hpp"
#include "backends/postgresql/pg_dialect.hpp"
#endif
#ifdef DBLOCK_WITH_MYSQL
#include "backends/mysql/mysql_backend.hpp"
#include "backends/mysql/mysql_dialect.hpp"
#endif
#ifdef DBLOCK_WITH_REDIS
#include "backends/redis/redis_backend.hpp"
#endif
#ifdef DBLOCK_WITH_ZOOKEEPER
#include "backends/zookeeper/zk_backend.hpp"
#endif
#ifdef DBLOCK_WITH_ETCD
#include "backends/etcd/etcd_backend.hpp"
#endif
#include "core/driver.hpp"
#include "core/url.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail {

namespace {
std::string built_backends() {
  std::string s = "sqlite";
#ifdef DBLOCK_WITH_POSTGRESQL
  s += ", postgresql";
#endif
#ifdef DBLOCK_WITH_MYSQL
  s += ", mysql";
#endif
#ifdef DBLOCK_WITH_REDIS
  s += ", redis, redis-sentinel, redlock";
#endif
#ifdef DBLOCK_WITH_ZOOKEEPER
  s += ", zookeeper";
#endif
#ifdef DBLOCK_WITH_ETCD
  s += ", etcd";
#endif
  return s;
}

[[noreturn]] void refuse_scheme(const Url& url) {
  for (const char* known : {"postgresql", "postgres", "mysql", "mariadb", "redis", "rediss", "redis-sentinel", "redlock",
                            "zookeeper", "etcd", "etcds", "etcd+https"})
    if (url.scheme == known)
      throw UsageError("this dblock was built without the " + url.scheme + " backend (built: " + built_backends() +
                       ")");
  throw UsageError("unknown URL scheme '" + url.scheme +
                   "': expected sqlite, postgresql, mysql, redis, redis-sentinel, redlock, zookeeper or etcd");
}
}  // namespace

std::unique_ptr<Backend> open_backend(const Url& url, const ClientOptions& options) {
  if (url.scheme == "sqlite") return open_sqlite(url, options);
#ifdef DBLOCK_WITH_POSTGRESQL
  if (url.scheme == "postgresql" || url.scheme == "postgres") return open_postgresql(url, options);
#endif
#ifdef DBLOCK_WITH_MYSQL
  if (url.scheme == "mysql" || url.scheme == "mariadb") return open_mysql(url, options);
#endif
#ifdef DBLOCK_WITH_REDIS
  if (url.scheme == "redis" || url.scheme == "rediss") return open_redis(url, options);
  if (url.scheme == "redis-sentinel") return open_redis_sentinel(url, options);
  if (url.scheme == "redlock") return open_redlock(url, options);
#endif
#ifdef DBLOCK_WITH_ZOOKEEPER
  if (url.scheme == "zookeeper") return open_zookeeper(url, options);
#endif
#ifdef DBLOCK_WITH_ETCD
  if (url.scheme == "etcd" || url.scheme == "etcds" || url.scheme == "etcd+https") return open_etcd(url, options);
#endif
  refuse_scheme(url);
}

Offer offer_of(const Url& url) {
  if (url.scheme == "sqlite") return {"sqlite", sqldb::sqlite_dialect().strategies};
#ifdef DBLOCK_WITH_POSTGRESQL
  if (url.scheme == "postgresql" || url.scheme == "postgres") return {"postgresql", sqldb::postgresql_dialect().strategies};
#endif
#ifdef DBLOCK_WITH_MYSQL
  if (url.scheme == "mysql" || url.scheme == "mariadb") return {"mysql", sqldb::mysql_dialect().strategies};
#endif
#ifdef DBLOCK_WITH_REDIS
  if (url.scheme == "redis" || url.scheme == "rediss") return {"redis", {Strategy::redis}};
  if (url.scheme == "redis-sentinel") return {"redis-sentinel", {Strategy::redis}};
  if (url.scheme == "redlock") return {"redlock", {Strategy::redlock}};
#endif
#ifdef DBLOCK_WITH_ZOOKEEPER
  if (url.scheme == "zookeeper") return {"zookeeper", {Strategy::zookeeper}};
#endif
#ifdef DBLOCK_WITH_ETCD
  if (url.scheme == "etcd" || url.scheme == "etcds" || url.scheme == "etcd+https") return {"etcd", {Strategy::etcd}};
#endif
  refuse_scheme(url);
}

}  // namespace dblock::detail
