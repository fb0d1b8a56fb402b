/// @file
/// Client: the entry point, one per backend per process; thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dblock/export.hpp"
#include "dblock/lock.hpp"
#include "dblock/options.hpp"
#include "dblock/settings.hpp"

namespace dblock {

namespace detail {
class ClientCore;
}
template <class Transaction>
class LockTable;

/// The entry point: one per backend per process, shared (Client::open returns a shared_ptr),
/// thread-safe. Locks, leases and the renewal threads keep it alive while they need it.
class DBLOCK_EXPORT Client {
 public:
  /// url: sqlite:PATH, postgresql://…, mysql://…, redis://…, redis-sentinel://…/mastername,
  /// redlock://host:port,…, zookeeper://host:port/root or etcd://host:port,…/prefix; each
  /// backend's page under docs/backends/ has its grammar ("URL").
  /// Throws UsageError on a bad URL or options, UnavailableError when the backend cannot be
  /// reached, SchemaError when the lock table is missing (run `dblock migrate`).
  static std::shared_ptr<Client> open(std::string_view url, ClientOptions options = {});

  /// Throws the UsageError that open(url)->lock(name, options) would for a strategy the URL's
  /// backend does not offer, a malformed name or bad options, from the URL alone: nothing is
  /// connected to or created. For a command to refuse bad input before open() creates a
  /// SQLite file or a lock table (`dblock run` does). What only the backend knows (its own
  /// name rules, whether a strategy offers semaphores) is left to lock().
  static void check_lock(std::string_view url, const std::string& name, const LockOptions& options = {});

  /// A handle on one named lock: it does **not** take the lock and holds nothing. The lock
  /// is held only once the returned Lock's lock(), try_lock(), acquire() or try_acquire()
  /// (or their timed and shared forms) succeeds; dblock.hpp says which of the two models to
  /// use. Validates the name (1..255 bytes of UTF-8, no NUL), the strategy and the options
  /// now, so bad input fails here with a UsageError and nothing is written. Handles on one
  /// name from one Client are one lock (a thread holding it through one re-enters through
  /// another), but unlock() must be called on the Lock, or a copy of the Lock, that lock()
  /// was called on.
  [[nodiscard]] Lock lock(std::string name, LockOptions options = {});

  /// Applies missing migrations (idempotent); returns the scripts applied now.
  std::vector<std::string> migrate();
  std::size_t sweep(std::size_t batch = 1000); ///< delete expired leases in short batches; the count
  std::vector<LeaseInfo> list();               ///< locks held now (not expired), by name
  bool force_release(const std::string& name); ///< the operator's escape hatch; true if it was held
  /// Reads the server settings that exclusion and fences rely on (fsync, synchronous commit,
  /// Redis persistence and eviction, ...), one line each with a verdict (dblock/settings.hpp).
  /// Settings that cannot be read are `unknown`; throws only when the server cannot be reached.
  std::vector<SettingCheck> check_settings();

  /// Totals of what this client did since it was opened (dblock/events.hpp).
  ClientStats stats() const noexcept;

  std::string_view backend() const noexcept;   ///< "sqlite", ...
  std::vector<Strategy> strategies() const;    ///< offered here; the first is the default
  std::string url() const;                     ///< with any password replaced by ****
  /// This client's owner identity prefix: host:pid:instance (a thread's suffix, or an
  /// asynchronous acquire's own, is added per hold).
  const std::string& identity() const noexcept;

  /// Cancels the asynchronous acquires still under way (their callbacks get CancelledError);
  /// closes the connections once no Lock or Lease uses the client any more.
  ~Client();
  /// @name Not copyable: share the std::shared_ptr instead.
  ///@{
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ///@}

 private:
  template <class Transaction>
  friend class LockTable;  // its fences and table are the client's
  explicit Client(std::shared_ptr<detail::ClientCore> core) noexcept;
  std::shared_ptr<detail::ClientCore> core_;
};

}  // namespace dblock
