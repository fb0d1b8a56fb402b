// Redis test servers seen behind the library's back: one raw command, and a database of
// its own per test. dblock's redis keys are not namespaced by ClientOptions::table (one
// lock has one fence counter, whatever the namespace), so tests keep apart by database
// number, as applications do (redis://host:port/N).
#pragma once

#include <string>
#include <vector>

#include "core/url.hpp"

namespace dblock::test {

// One command to one server, on database `db`. Returns the reply as text (integers in
// decimal, an error as its message), or "" when the server is unreachable or the connection
// drops.
std::string redis_raw(const dblock::detail::HostPort& hp, const std::vector<std::string>& argv, int db = 0);
// The same over TLS with the certificates of `url` (rediss://, ssl-* parameters); plaintext
// for a URL without them.
std::string redis_raw(const dblock::detail::Url& url, const dblock::detail::HostPort& hp,
                      const std::vector<std::string>& argv, int db = 0);

// The master that a redis-sentinel URL's Sentinels name now (the first that answers).
dblock::detail::HostPort sentinel_master(const dblock::detail::Url& url);

// `url` (redis://, rediss://, redlock:// or redis-sentinel://, without a database) with an unused
// database appended (redis-sentinel: as ?db=N): picked at random among the servers'
// databases, and emptied on every node (the master) first.
std::string with_fresh_redis_db(const std::string& url);
// Empties the database of such a URL on every node (the fence counters never expire).
void drop_redis_db(const std::string& url) noexcept;

}  // namespace dblock::test
