/// @file
/// What a Client reports to a service's own metrics: one Event per thing that happened
/// (ClientOptions::on_event) and running totals (Client::stats()). dblock picks no metrics
/// library; a service forwards these to whichever it already uses.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "dblock/export.hpp"

namespace dblock {

/// The kinds of Event.
enum class EventKind {
  acquired,  ///< a hold was granted: a new grant (holds 1) or a re-entry (holds > 1)
  busy,      ///< an acquire gave up: try_lock found it held, or its deadline passed
  released,  ///< a hold was given back; holds 0 means the lock itself went
  renewed,   ///< the background renewal extended a lease (or confirmed a session lock)
  lost,      ///< a grant was lost while held (on_lost was told too)
  swept,     ///< Client::sweep removed `count` expired leases
};

/// "acquired", "busy", "released", "renewed", "lost", "swept".
DBLOCK_EXPORT std::string_view to_string(EventKind kind) noexcept;

/// One thing that happened. Fields that do not apply to a kind are zero or empty.
struct Event {
  EventKind kind;            ///< what happened
  std::string_view name;     ///< the lock's name (empty for swept); valid during the call only
  std::uint64_t fence = 0;   ///< the grant's fencing token (acquired, released, renewed, lost)
  std::uint32_t holds = 0;   ///< this owner's holds after the event (acquired, released)
  /// acquired and busy: from the call to the answer, including the wait for other holders.
  std::chrono::microseconds waited{0};
  /// released with holds 0, and lost: from the grant to the release or the loss.
  std::chrono::microseconds held{0};
  std::size_t count = 0;  ///< swept: the leases removed
};

/// Called on the Client's event thread (LostCallback), in the order the events happened: the
/// thread where an event happened only queues it, so a hook that is slow or takes a lock of its
/// own never holds up an acquire, a renewal or a loss report. Each event costs one queued call
/// (a copy of the name, one wake of that thread); nothing is queued without a hook. Do not wait
/// in it for a lock to be granted; an exception it throws is ignored.
using EventCallback = std::function<void(const Event&)>;

/// Totals since Client::open, counted whether or not an on_event callback is set.
struct ClientStats {
  std::uint64_t acquired = 0;    ///< new grants
  std::uint64_t reentered = 0;   ///< re-entrant holds of a grant already held
  std::uint64_t busy = 0;        ///< acquires that gave up
  std::uint64_t released = 0;    ///< grants freed (the last hold given back)
  std::uint64_t renewed = 0;     ///< background renewals that succeeded
  std::uint64_t lost = 0;        ///< grants lost while held
  std::uint64_t swept = 0;       ///< expired leases removed by Client::sweep
  /// Summed over every acquire, granted or busy: divide by acquired + reentered + busy for
  /// the mean wait.
  std::chrono::microseconds waited{0};
};

}  // namespace dblock
