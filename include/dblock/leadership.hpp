/// @file
/// Leadership: one active instance among several, kept by a renewed lock in a thread of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dblock/client.hpp"
#include "dblock/errors.hpp"
#include "dblock/export.hpp"

namespace dblock {

/// How a Leadership campaigns (all optional but the callbacks a service needs).
struct LeadershipOptions {
  /// The lock behind it. Its on_lost is still called; hold_at_least is refused.
  LockOptions lock;
  /// This instance leads from now on, with this fence: tag every write the leader makes
  /// with it. Called on the campaign thread; start the work elsewhere and return.
  std::function<void(std::uint64_t fence)> on_elected;
  /// This instance leads no more (the lock was lost, or resign() was called): stop acting
  /// as the leader before returning. Called on the campaign thread, once per on_elected.
  std::function<void(std::uint64_t fence)> on_revoked;
  /// An acquire or release failed (the backend unreachable, ...); the campaign goes on.
  std::function<void(const Error&)> on_error;
  /// How long a standby waits in one acquire before it checks whether it should stop:
  /// resign() and the destructor return within about this long.
  std::chrono::milliseconds standby_slice{500};
};

/// Campaigns for the lock `name` until destroyed: while another instance holds it, this one
/// stands by; when it gets it, on_elected; when it loses it, on_revoked, and it campaigns
/// again. The fence increases with every term, across all instances.
class DBLOCK_EXPORT Leadership {
 public:
  /// Starts campaigning at once. Throws what Client::lock throws for a bad name or options.
  Leadership(std::shared_ptr<Client> client, std::string name, LeadershipOptions options = {});
  ~Leadership();  ///< resign(); not from its own callbacks (the thread would run on in a freed object)
  /// @name Not copyable
  ///@{
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;
  ///@}

  bool leading() const noexcept;        ///< between on_elected and on_revoked
  std::uint64_t fence() const noexcept; ///< this term's fence while leading, else 0
  /// Stops campaigning: a leader is revoked (on_revoked) and gives the lock back at once,
  /// so another instance can take over. Idempotent. Called from on_elected, the term ends
  /// as soon as on_elected returns.
  void resign();

 private:
  LockOptions watched_lock_options();
  void campaign();
  // Shared with the lock's on_lost, which the event thread may call after this object has
  // released its term and gone (a loss noticed as the term ends): it must outlive both.
  struct Signal {
    std::mutex mutex;
    std::condition_variable wake;
    bool stopping = false, lost = false;
  };
  LeadershipOptions options_;
  std::shared_ptr<Signal> signal_ = std::make_shared<Signal>();
  Lock lock_;
  std::atomic<std::uint64_t> fence_{0};
  std::thread thread_;
};

}  // namespace dblock
