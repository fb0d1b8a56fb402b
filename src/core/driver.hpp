// The two internal seams every backend implements.
//
//   Backend     one per Client: connections, migrations, sweep, list, and a LockDriver
//               for each strategy it offers.
//   LockDriver  one strategy on one backend, reduced to "do I have it?": one attempt to
//               acquire, renew, release. Waiting, re-entry bookkeeping, local queueing,
//               renewal and loss reporting are written once, in ClientCore and Watchdog
//               (Curator's split between recipe and driver).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dblock/options.hpp"
#include "dblock/settings.hpp"

namespace dblock::detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct AcquireRequest {
  const std::string& name;
  const std::string& owner;
  milliseconds ttl;
  // How long the driver may block inside the server (session strategies: lock_timeout,
  // GET_LOCK's timeout). Lease drivers make one non-blocking attempt and ignore it.
  milliseconds wait;
};

struct Attempt {
  bool acquired = false;
  std::uint64_t fence = 0;  // acquired: the grant's fence
  // acquired: our lease's time left on the server's clock when the statement ran.
  // busy: the holder's time left (zero when unknown), so waiters never sleep past it.
  milliseconds remaining{0};
};

struct Renewal {
  bool held = false;        // false: the lease is not ours any more (lost)
  milliseconds remaining{0};
};

// A subscription to "this name may have been freed", armed before an attempt so that a
// release between the attempt and the wait is not missed.
class ReleaseWatch {
 public:
  virtual ~ReleaseWatch() = default;
  // Returns at `until` or earlier, when a release may have happened (spurious wake-ups allowed).
  virtual void wait_until(Clock::time_point until) = 0;
};

class LockDriver {
 public:
  virtual ~LockDriver() = default;
  virtual Attempt try_acquire(const AcquireRequest& request) = 0;
  // Both check ownership and write in one atomic statement. Errors throw; a clear "not
  // ours" answer is `held == false` / `false`.
  virtual Renewal renew(const std::string& name, const std::string& owner, std::uint64_t fence,
                        milliseconds ttl) = 0;
  virtual bool release(const std::string& name, const std::string& owner, std::uint64_t fence) = 0;
  // Release notifications for waiters (SQLite: inotify on a wake file; PostgreSQL: LISTEN;
  // Redis: pub/sub). Null: the backend has none, and waiters back off and poll.
  virtual std::unique_ptr<ReleaseWatch> watch(const std::string& name) {
    (void)name;
    return nullptr;
  }
  // The caller gave up on `name` (a timed acquire ended without the lock, or threw): a
  // driver that keeps a place in a queue across try_acquire calls (ZooKeeper's queued node)
  // drops it here. Never called while `owner` holds the lock.
  virtual void abandon(const std::string& name, const std::string& owner) noexcept {
    (void)name;
    (void)owner;
  }
  // The core declared this grant lost (its local deadline passed, or renew said so): a
  // session driver frees what the server still holds for it, so it blocks nobody.
  virtual void lost(const std::string& name, const std::string& owner, std::uint64_t fence) noexcept {
    (void)name;
    (void)owner;
    (void)fence;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual std::vector<Strategy> strategies() const = 0;  // the first is the default
  // Throws UsageError for a strategy this backend does not offer.
  virtual std::unique_ptr<LockDriver> make_driver(Strategy strategy) = 0;
  // Throws UsageError for a name this backend cannot lock (beyond the checks every backend
  // makes, validate_name): one that would clash with the backend's own keys.
  virtual void check_name(const std::string& name) const { (void)name; }
  virtual std::vector<std::string> migrate() = 0;  // the scripts applied now
  virtual std::size_t sweep(std::size_t batch) = 0;
  virtual std::vector<LeaseInfo> list() = 0;
  virtual bool force_release(const std::string& name) = 0;
  // The server settings the guarantees rely on, read now (`dblock doctor`). A setting that
  // cannot be read is an `unknown` line, not an error; an unreachable server throws.
  virtual std::vector<SettingCheck> check_settings() = 0;
};

struct Url;
// The one place that maps URL schemes to backends (src/backends/registry.cpp).
std::unique_ptr<Backend> open_backend(const Url& url, const ClientOptions& options);

}  // namespace dblock::detail
