// The one place URL schemes map to backends. Backends that need a server are compiled in
// with DBLOCK_WITH_<NAME>.
#include "backends/sqlite/sqlite_backend.hpp"
#include "core/driver.hpp"
#include "core/url.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail {

std::unique_ptr<Backend> open_backend(const Url& url, const ClientOptions& options) {
  if (url.scheme == "sqlite") return open_sqlite(url, options);
  for (const char* later : {"postgresql", "postgres", "mysql", "mariadb", "redis", "redlock", "zookeeper"})
    if (url.scheme == later)
      throw UsageError("this dblock was built without the " + url.scheme + " backend (built: sqlite)");
  throw UsageError("unknown URL scheme '" + url.scheme +
                   "': expected sqlite, postgresql, mysql, redis, redlock or zookeeper");
}

}  // namespace dblock::detail
