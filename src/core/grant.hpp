// Grant: one successful acquire as the backend granted it (one fence, one GrantHandle).
// Re-entrant acquires by the same owner share one Grant; each Lease is one hold.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/driver.hpp"
#include "core/gate.hpp"
#include "core/hangup_watch.hpp"
#include "core/reporter.hpp"

namespace dblock::detail {

class ClientCore;

struct Grant {
  std::shared_ptr<ClientCore> core;  // keeps the client (and driver) alive while held
  std::shared_ptr<Gate> gate;
  std::string name, owner;  // the owner holds the gate for this grant
  std::uint64_t fence = 0;
  Mode mode = Mode::exclusive;
  milliseconds ttl{0}, renew_every{0};
  bool auto_renew = true;
  LostCallback on_lost;
  std::optional<milliseconds> hold_at_least;  // LockOptions::hold_at_least
  Clock::time_point granted_at;               // when the acquire's answer came back
  Reporter* reporter = nullptr;               // the client's (kept alive by `core`)

  // One call on the handle at a time: the watchdog's renewals, the owner's re-entries and
  // releases (a session lock's pinned connection serves them all). Take it with take().
  std::mutex use;
  std::unique_ptr<GrantHandle> handle;  // guarded by use
  // Set, under `use`, while the watchdog renews this grant in a batch with others (Watchdog::
  // renew_batch). The batch holds none of its grants' mutexes while its statement runs, which
  // would be hundreds at once: each grant is marked instead, and take() waits for the mark to
  // clear, so that a call on the handle still never overlaps its renewal.
  bool in_batch = false;  // guarded by use
  std::condition_variable batch_done;
  std::unique_lock<std::mutex> take() {
    std::unique_lock lk(use);
    batch_done.wait(lk, [&] { return !in_batch; });
    return lk;
  }
  // While held: the handle's socket watched for the server closing it (session locks).
  // Cancelled under `use` before the handle frees or closes anything (the last release, the
  // watchdog's let_go), so a socket number reused by another connection is never reported for
  // this grant; never *waited for* under `use` (see HangupWatch::Registration::wait).
  HangupWatch::Registration hangup;  // guarded by use
  int holds = 0;                        // guarded by use: the one count of this owner's holds
  bool released = false;                // guarded by use: the last hold went

  // Local, conservative deadline on the monotonic clock: send time of the last successful
  // acquire/renewal plus the time the server said was left, less one tick of the server's
  // clock. Servers count expiry in whole milliseconds: a row valid for `ttl` from a clock
  // reading truncated (or rounded) to the millisecond expires up to 1 ms before `ttl` has
  // passed since that statement ran, which on an in-process SQLite or a local server can be
  // within the same millisecond as the send.
  static constexpr milliseconds server_tick{1};
  void set_deadline(Clock::time_point sent, milliseconds remaining) noexcept {
    deadline_.store((sent + remaining - server_tick).time_since_epoch().count());
  }
  void expire_now() noexcept { deadline_.store(Clock::now().time_since_epoch().count()); }
  Clock::time_point deadline() const noexcept { return Clock::time_point(Clock::duration(deadline_.load())); }

  bool lost() const noexcept { return lost_.load() || Clock::now() >= deadline(); }
  // Marks the grant lost and queues on_lost on the Client's event thread, exactly once however
  // many threads notice. The thread that noticed (the deadline's, the renewal's, the hang-up
  // watch's) goes on at once: a slow on_lost never delays another grant's loss report.
  void mark_lost() noexcept {
    std::lock_guard lk(told_mutex_);  // so that wait_told never reads a loss not yet queued
    if (lost_.exchange(true)) return;
    reporter->lost(name, fence, Clock::now() - granted_at);
    if (on_lost) try {
        told_ = reporter->post([told = on_lost, name = name, fence = fence] { told(name, fence); });
      } catch (...) {  // out of memory: the loss still reads in lost() and fails the release
      }
  }
  // Returns once the on_lost queued by mark_lost has returned (at once if none was, or on the
  // event thread itself). The owner's release waits here, holding nothing on_lost may take.
  void wait_told() const noexcept {
    EventThread::Ticket told;
    {
      std::lock_guard lk(told_mutex_);
      told = told_;
    }
    reporter->wait(told);
  }

 private:
  std::atomic<Clock::rep> deadline_{0};
  std::atomic<bool> lost_{false};
  mutable std::mutex told_mutex_;  // a leaf: held only to mark the loss and queue on_lost
  EventThread::Ticket told_ = 0;   // guarded by told_mutex_
};

}  // namespace dblock::detail
