/// @file
/// Strategies and the plain option structs (aggregates with defaults).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "dblock/events.hpp"
#include "dblock/export.hpp"

namespace dblock {

/// How a backend holds a lock (docs/CONTRACT.md): leases with a TTL (insert, optimistic,
/// redis, redlock) or session locks freed when their connection goes (for-update, advisory,
/// zookeeper, etcd).
enum class Strategy { insert, for_update, optimistic, advisory, redis, redlock, zookeeper, etcd };

/// "insert", "for-update", "optimistic", "advisory", "redis", "redlock", "zookeeper", "etcd".
DBLOCK_EXPORT std::string_view to_string(Strategy s) noexcept;
/// The inverse; throws UsageError naming the known strategies.
DBLOCK_EXPORT Strategy parse_strategy(std::string_view text);

/// How a grant holds its lock: alone (exclusive: a mutex, a read/write lock's writer, one
/// permit of a semaphore) or beside other shared holders (a read/write lock's readers).
enum class Mode { exclusive, shared };

/// "exclusive", "shared".
DBLOCK_EXPORT std::string_view to_string(Mode m) noexcept;

/// The most permits a semaphore may have (LockOptions::permits).
inline constexpr std::uint32_t max_permits = 10000;

/// How Client::open connects (all optional).
struct ClientOptions {
  /// The lock table: an identifier or schema.identifier ([A-Za-z_][A-Za-z0-9_]*, at most 40
  /// characters each, so that the names derived from it fit every database's limit).
  /// Redis, Redlock, ZooKeeper and etcd ignore it: there a name is one lock with one fence
  /// sequence per server (separate applications by database number or root path).
  std::string table = "dblock_locks";
  std::size_t pool_size = 8;                         ///< connections kept for lease statements
  std::chrono::milliseconds connect_timeout{5000};   ///< bound on opening one connection
  std::chrono::milliseconds statement_timeout{5000};  ///< bound on one statement or round trip
  /// Apply missing migrations when the client opens. Unset: on for the embedded SQLite
  /// default, off for server databases (their owners run `dblock migrate`).
  std::optional<bool> auto_migrate;
  /// Wake waiters when a lock is released (PostgreSQL LISTEN/NOTIFY, SQLite inotify). Off:
  /// waiters poll with backoff, e.g. behind a pooler that does not pass LISTEN through.
  bool notifications = true;
  /// Told of every acquire, release, renewal, loss and sweep, for the service's own metrics
  /// (dblock/events.hpp); Client::stats() keeps the totals either way.
  EventCallback on_event;
};

/// Called once when a lease is lost (expired before it could be renewed, or taken over), on
/// the Client's event thread, where all of a Client's callbacks (on_lost, on_event) run one
/// after the other in the order they happened. The thread that found the loss (the deadline's,
/// the renewal's, the watch on session locks' connections, or the caller's on a re-entry or
/// release) only queues it and goes on: a slow on_lost delays the callbacks behind it, never
/// another lease's loss, renewal or release. It is the only report of a loss for holds taken
/// with Lock::lock() (whose unlock() never throws); a Lease also shows it in Lease::lost()
/// (true before on_lost is called) and Lease::release(). It may release the lease (unlock),
/// take other locks or list them; it must not wait for a thread that is releasing this lease:
/// a release that finds the lease lost returns (or throws) only once its on_lost has returned.
using LostCallback = std::function<void(const std::string& name, std::uint64_t fence)>;

/// How Client::lock holds a lock (all optional).
struct LockOptions {
  std::optional<Strategy> strategy;  ///< unset: the backend's natural strategy
  std::chrono::milliseconds ttl{30000};  ///< the lease: how long a silent holder keeps the lock
  bool auto_renew = true;                 ///< renew in the background while held
  std::optional<std::chrono::milliseconds> renew_every;  ///< unset: ttl / 3
  /// Told once if the lease is lost while held (LostCallback): set it whenever the lock is
  /// held with lock()/unlock(), which report a loss in no other way.
  LostCallback on_lost;
  /// Lock at least for this long (ShedLock's lockAtLeastFor): a release sooner than this
  /// after the grant does not free the lock but leaves the lease to expire at that time, on
  /// the server's clock, so that the same job started again a little later (a cron entry on
  /// a machine whose clock is a few seconds off) finds it taken. No acquire takes such a
  /// kept lease over, not even its owner's; `list` shows it with holds 0. Lease strategies
  /// only (insert, optimistic, redis, redlock): Client::lock refuses it for the others.
  std::optional<std::chrono::milliseconds> hold_at_least;
  /// A semaphore: at most this many holders of the name at once, each with a lease and a
  /// fence of its own (1..max_permits; 1, the default, is a mutex). Every acquirer of a name
  /// must give the same number: a mismatch is a UsageError. Client::lock refuses it by name
  /// for a strategy that does not offer semaphores, and the shared calls for a semaphore.
  std::uint32_t permits = 1;
  /// Exclusive acquires on the lease strategies of SQL databases and on strategy redis: waiters
  /// are granted in the order they first found the name busy (each keeps a ticket while it
  /// waits), so a holder that asks again at once after its release queues behind them.
  /// false: the unfair fast path, where whoever asks first after a release wins (a waiter
  /// writes no ticket). advisory on PostgreSQL, zookeeper and etcd queue in the server and are
  /// fair either way; redlock is not queued (the order would have to hold on a majority of
  /// nodes), nor are readers and semaphore holders.
  bool fair = true;
};

/// One held lock as the backend sees it (Client::list, `dblock list`).
struct LeaseInfo {
  std::string name;         ///< the lock's name
  std::string owner;        ///< host:pid:instance:thread of the holder
  std::uint64_t fence = 0;  ///< the grant's fencing token
  std::uint32_t holds = 0;  ///< re-entrant holds of its owner
  Mode mode = Mode::exclusive;  ///< shared: one of a read/write lock's readers
  std::chrono::system_clock::time_point acquired_at;  ///< database clock (Redis: the acquiring client's)
  std::chrono::system_clock::time_point expires_at;   ///< database clock
};

}  // namespace dblock
