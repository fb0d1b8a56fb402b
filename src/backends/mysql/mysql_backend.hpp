#pragma once

#include <memory>

#include "backends/mysql/mysql_connection.hpp"
#include "core/driver.hpp"
#include "core/url.hpp"

namespace dblock::detail {
// mysql://user:pass@host:port/db (and mariadb://); ?socket=/path for a Unix socket; ssl-mode,
// ssl-ca, ssl-cert, ssl-key for TLS (mysql_connection.hpp); several
// host:port (a primary and its replicas): connections go to the first that accepts writes.
std::unique_ptr<Backend> open_mysql(const Url& url, const ClientOptions& options);
// Where and how a URL connects (servers, credentials, TLS); UsageError for a bad URL.
sqldb::MySqlTarget mysql_target(const Url& url, const ClientOptions& options);
}  // namespace dblock::detail
