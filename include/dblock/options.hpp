// Strategies and the plain option structs (aggregates with defaults).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "dblock/export.hpp"

namespace dblock {

enum class Strategy { insert, for_update, optimistic, advisory, redis, redlock, zookeeper };

// "insert", "for-update", "optimistic", "advisory", "redis", "redlock", "zookeeper".
DBLOCK_EXPORT std::string_view to_string(Strategy s) noexcept;
// The inverse; throws UsageError naming the known strategies.
DBLOCK_EXPORT Strategy parse_strategy(std::string_view text);

struct ClientOptions {
  // The lock table: an identifier or schema.identifier ([A-Za-z_][A-Za-z0-9_]*, at most 40
  // characters each, so that the names derived from it fit every database's limit).
  // Redis, Redlock and ZooKeeper ignore it: there a name is one lock with one fence
  // sequence per server (separate applications by database number or root path).
  std::string table = "dblock_locks";
  std::size_t pool_size = 8;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds statement_timeout{5000};
  // Apply missing migrations when the client opens. Unset: on for the embedded SQLite
  // default, off for server databases (their owners run `dblock migrate`).
  std::optional<bool> auto_migrate;
  // Wake waiters when a lock is released (PostgreSQL LISTEN/NOTIFY, SQLite inotify). Off:
  // waiters poll with backoff, e.g. behind a pooler that does not pass LISTEN through.
  bool notifications = true;
};

// Called once, from the renewal thread, when a lease is lost (expired before it could be
// renewed, or taken over). Keep it short; it must not block on the lock itself.
using LostCallback = std::function<void(const std::string& name, std::uint64_t fence)>;

struct LockOptions {
  std::optional<Strategy> strategy;  // unset: the backend's natural strategy
  std::chrono::milliseconds ttl{30000};
  bool auto_renew = true;
  std::optional<std::chrono::milliseconds> renew_every;  // unset: ttl / 3
  LostCallback on_lost;
};

// One held lock as the backend sees it (Client::list, `dblock list`).
struct LeaseInfo {
  std::string name;
  std::string owner;
  std::uint64_t fence = 0;
  std::uint32_t holds = 0;
  std::chrono::system_clock::time_point acquired_at;  // database clock (Redis: the acquiring client's)
  std::chrono::system_clock::time_point expires_at;   // database clock
};

}  // namespace dblock
