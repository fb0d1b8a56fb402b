// The two internal seams every backend implements.
//
//   Backend      one per Client: connections, migrations, sweep, list, and a LockDriver
//                for each strategy it offers.
//   LockDriver   one strategy on one backend, reduced to "do I have it?": one attempt to
//                acquire, which on success hands back a GrantHandle.
//   GrantHandle  one grant as the backend holds it (its row, record, pinned connection or
//                node): renew, release, give up. Owned by the core's Grant; drivers keep no
//                map of their grants.
// Waiting, re-entry, local queueing, renewal and loss reporting are written once, in
// ClientCore and Watchdog (Curator's split between recipe and driver, DistributedLock's
// per-grant handle).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/transport.hpp"
#include "core/wait_cancel.hpp"
#include "dblock/errors.hpp"
#include "dblock/options.hpp"
#include "dblock/settings.hpp"

namespace dblock::detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Renewal {
  bool held = false;        // false: the lease is not ours any more (lost)
  milliseconds remaining{0};
};

// A grant found again on the server by its key alone (a lease row, a Redis record).
struct GrantKey {
  std::string name, owner;
  std::uint64_t fence = 0;
};

// Renewals sent to the server together: the leases of one Client that are due at one tick go
// as one statement per table (Watchdog), not as one statement and one commit each.
class RenewalBatch {
 public:
  struct Item {
    const GrantKey* key;
    milliseconds ttl;
    int holds;
  };
  virtual ~RenewalBatch() = default;
  // GrantHandle::renew for each item, in one round trip: one answer per item, in order. An
  // error throws, and every item's renewal failed (each is tried again, as a failed renewal).
  virtual std::vector<Renewal> renew(const std::vector<Item>& items) = 0;
};

// One grant on the server. The core calls it from one thread at a time (Grant::use).
class GrantHandle {
 public:
  virtual ~GrantHandle() = default;  // frees nothing on the server: release() or lost() do
  // Extends the lease to at least `ttl` from now (keeping a longer one) and records `holds`,
  // the owner's hold count, where the backend shows it (the `holds` column of `dblock list`).
  // The core is the one counter of holds (an owner is one thread of one Client, so it sees
  // every re-entry); the backend's copy is written whole, never incremented, so a retried
  // or repeated call does no harm. ttl 0 only records the count (a hold given back; its
  // `remaining` is then not used).
  // Checks ownership and writes in one atomic step. Errors throw; "not ours" is held = false.
  virtual Renewal renew(milliseconds ttl, int holds) = 0;
  // Frees the lock (the last hold went) and wakes waiters. False: it was not ours any more.
  // Safe to repeat after an error: a grant already freed answers false.
  virtual bool release() = 0;
  // A socket whose closing by the server means the grant is gone (a session lock's
  // connection), watched while the grant is held; -1: none (leases, or a driver that does
  // not tell), and the next renewal finds out.
  virtual int socket() noexcept { return -1; }
  // The last hold went, but the lock stays taken for `keep` more, judged by the server's
  // clock (LockOptions::hold_at_least): the lease is set to expire then, with holds 0, which
  // marks a lease kept after its release (no acquire takes it over before it expires, not
  // even its owner's). False: not ours any more. Lease strategies only: Client::lock refuses
  // hold_at_least for the others, whose locks go with their connection, so their handles
  // keep this default.
  virtual bool release_after(milliseconds keep) {
    (void)keep;
    throw InternalError("a session lock cannot be kept after its release");
  }
  // The core declared this grant lost (its local deadline passed, or renew said so): a
  // session lock frees what the server may still hold for it, so it blocks nobody.
  virtual void lost() noexcept {}
  // The batch this grant's renewals may go in, and its key there; no batch: renewed alone
  // (renew). Fixed for the handle's life.
  struct Batched {
    RenewalBatch* batch = nullptr;
    const GrantKey* key = nullptr;
  };
  virtual Batched batched() noexcept { return {}; }
};

// A place in the server's queue that an acquire keeps between its attempts (ZooKeeper's
// sequential node), so that a waiter does not lose its turn. Destroying it gives it up.
class QueuePlace {
 public:
  virtual ~QueuePlace() = default;
};

struct AcquireRequest {
  const std::string& name;
  const std::string& owner;
  milliseconds ttl;
  // How long the driver may block inside the server (session strategies: lock_timeout,
  // GET_LOCK's timeout). Lease drivers make one non-blocking attempt and ignore it.
  milliseconds wait;
  // The place the previous attempt of this acquire left (Attempt::place), or null.
  std::unique_ptr<QueuePlace> place;
  // Whether the core will renew the grant (LockOptions::auto_renew). A driver whose grants
  // share something kept alive (etcd's lease per Client) gives an unrenewed one its own, so
  // that it still expires after its TTL.
  bool renewed = true;
  // The shape asked for: a shared hold (a reader), or one of `permits` (a semaphore; 1 is a
  // mutex). Only what Backend::shapes offers for the driver's strategy reaches it.
  Mode mode = Mode::exclusive;
  std::uint32_t permits = 1;
  // LockOptions::fair: a busy exclusive lease attempt that will wait takes a place in the
  // name's queue (a ticket, kept in `place`), and grants go to the oldest ticket first.
  bool fair = true;
  // An asynchronous acquire's: a driver that waits inside the server arms it around that
  // wait, so that a cancel ends the wait now, not at the end of `wait`. Null: nothing cancels.
  WaitCancel* cancel = nullptr;
  bool cancelled() const { return WaitCancel::cancelled(cancel); }
};

// The shapes of lock a strategy offers beyond a plain exclusive one (docs/ARCHITECTURE.md,
// "Lock shapes"). Client::lock and the shared calls refuse the others by name, before
// anything is sent: never a silent exclusive lock instead.
struct Shapes {
  bool shared = false;     // read/write: Mode::shared holds beside each other, writers preferred
  bool semaphore = false;  // AcquireRequest::permits > 1
};

struct Attempt {
  std::unique_ptr<GrantHandle> grant;  // set when acquired
  std::uint64_t fence = 0;             // acquired: the grant's fence
  // acquired: our lease's time left on the server's clock when the statement ran.
  // busy: the holder's time left (zero when unknown), so waiters never sleep past it.
  milliseconds remaining{0};
  std::unique_ptr<QueuePlace> place;  // busy: a place kept for the next attempt

  static Attempt busy(milliseconds holder_remaining) { return Attempt{nullptr, 0, holder_remaining, nullptr}; }
  bool acquired() const noexcept { return grant != nullptr; }
};

// A subscription to "this name may have been freed", armed before an attempt so that a
// release between the attempt and the wait is not missed.
class ReleaseWatch {
 public:
  virtual ~ReleaseWatch() = default;
  // Returns at `until` or earlier, when a release may have happened (spurious wake-ups allowed).
  virtual void wait_until(Clock::time_point until) = 0;
  // From any thread: the wait_until running now, and every later one, returns at once (an
  // asynchronous acquire cancelled while its attempts wait).
  virtual void interrupt() noexcept = 0;
  // The same wait without a thread (an asynchronous acquire's, WaitEngine): `wake` runs once,
  // as soon as a wait_until would return early (a release seen since the last wait or wake,
  // an interrupt), on the thread that saw it and under the watch's own lock, so it must only
  // hand the work on; or never, once disarm() or the watch's destruction came first. False:
  // this watch cannot call back (its waiter polls instead).
  virtual bool arm(std::function<void()> wake) {
    (void)wake;
    return false;
  }
  virtual void disarm() noexcept {}
};

class LockDriver {
 public:
  virtual ~LockDriver() = default;
  // A fresh grant for `owner`, which the core knows holds no live grant of the name, so a
  // lease the server still shows for that owner is a leftover (an acquire whose answer was
  // lost, a release that failed): the lease strategies take it over with a new fence, never
  // re-enter it. A lease kept after its release (holds 0, GrantHandle::release_after) is
  // busy like anyone else's. (A session lock's leftover is a connection or session of its
  // own, busy until it goes.)
  virtual Attempt try_acquire(AcquireRequest& request) = 0;
  // Whether try_acquire itself waits, inside the server, for up to AcquireRequest::wait (the
  // session strategies; MySQL's lease strategies, on their turn keys; ZooKeeper; etcd): an
  // asynchronous acquire then needs a thread of its own while it waits at the head of its
  // line. Elsewhere an attempt is one round trip, and the wait between attempts is a watch's.
  virtual bool waits_in_server() const noexcept { return false; }
  // Release notifications for `owner`'s waiting on `name` (SQLite: inotify on a wake file;
  // PostgreSQL: LISTEN; Redis: pub/sub). Null: the backend has none, and waiters back off and
  // poll. A release that knows which owner's turn is next may wake that owner's watch only.
  virtual std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) {
    (void)name;
    (void)owner;
    return nullptr;
  }
  // The same, made before an acquire's first attempt, or null to wait for a busy answer
  // first: a driver returns one only where it costs next to nothing and needs no setting up
  // (an acquire of a free name pays for it too). It saves the attempt that must follow a
  // watch armed after a busy answer, which where a release hands the name over (Redis,
  // PostgreSQL) raced the hand-off it waits for.
  virtual std::unique_ptr<ReleaseWatch> early_watch(const std::string& name, const std::string& owner) {
    (void)name;
    (void)owner;
    return nullptr;
  }
};

// A lease strategy holds a lock as a record with a TTL on the server, freed by its expiry
// when the holder goes (insert, optimistic, redis, redlock); the others are session locks,
// freed when their connection or session ends.
bool is_lease(Strategy strategy) noexcept;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual std::vector<Strategy> strategies() const = 0;  // the first is the default
  virtual Shapes shapes(Strategy strategy) const {
    (void)strategy;
    return {};
  }
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
  // How a connection reaches the server, asked now (`dblock doctor`); none for an embedded
  // database.
  virtual std::optional<Transport> transport() { return std::nullopt; }
  // The lock table as the backend's statements name it (MySQL: with its database), for
  // LockTable; "" where there is none.
  virtual std::string table_name() const { return {}; }
  // A fence for a lock held outside the Client (a caller's MySQL transaction, dblock/mysql.hpp),
  // above every fence granted on the table before the call. UsageError where not offered.
  virtual std::uint64_t draw_fence() { throw UsageError(std::string(name()) + ": no fences are drawn apart here"); }
};

struct Url;
// The one place that maps URL schemes to backends (src/backends/registry.cpp).
std::unique_ptr<Backend> open_backend(const Url& url, const ClientOptions& options);
// What open_backend(url) would offer, from the URL's scheme alone: nothing is connected to or
// created (Client::check_lock). Throws UsageError as open_backend does for an unknown scheme.
struct Offer {
  std::string backend;               // as Backend::name() says it
  std::vector<Strategy> strategies;  // as Backend::strategies() lists them
};
Offer offer_of(const Url& url);
// "strategy 'X' is not offered by the B backend (it offers ...)".
std::string not_offered(Strategy strategy, std::string_view backend, const std::vector<Strategy>& offered);
// What Client::lock refuses in the options whatever the backend, once the strategy is known:
// the TTL, renewal period, hold_at_least and the permits' range.
void check_lock_options(const LockOptions& options, Strategy strategy);

}  // namespace dblock::detail
