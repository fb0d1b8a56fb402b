// ClientCore: the shared state behind Client, Lock and Lease, and the one implementation of
// waiting, re-entry and release over any backend's LockDriver and GrantHandle.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/driver.hpp"
#include "core/event_thread.hpp"
#include "core/gate.hpp"
#include "core/grant.hpp"
#include "core/hangup_watch.hpp"
#include "core/reporter.hpp"
#include "core/url.hpp"
#include "core/watchdog.hpp"
#include "dblock/lease.hpp"

namespace dblock::detail {

// What Client::lock validated once: the name and the resolved strategy and driver.
struct LockSpec {
  std::string name;
  LockOptions options;
  Strategy strategy;
  LockDriver* driver;
  Shapes shapes;  // what the strategy offers beyond exclusive
};

class ClientCore {
 public:
  ClientCore(Url url, ClientOptions options, std::unique_ptr<Backend> backend);

  // Throws UsageError when the backend does not offer the strategy.
  LockDriver& driver(Strategy strategy);

  // Waits until `deadline` (forever when unset); nullopt when it passed.
  // Throws UsageError for a shape the strategy does not offer (checked before anything is
  // sent) and for a thread that holds the name in the other mode.
  std::optional<Lease> acquire(const std::shared_ptr<ClientCore>& self, const LockSpec& spec,
                               std::optional<Clock::time_point> deadline, Mode mode);
  // One hold of the grant back; throws LockLostError when the backend shows it was not ours.
  void release(const std::shared_ptr<Grant>& grant);
  // The backend's list, with the hold counts of this Client's own grants (the core keeps
  // them; a backend that cannot show them, ZooKeeper, lists 1).
  std::vector<LeaseInfo> list();

  const Url url;
  const ClientOptions options;
  const std::string identity;
  const std::unique_ptr<Backend> backend;
  // The service's callbacks run here; destroyed last, after every thread that posts to it,
  // running what they posted before it stops.
  EventThread events;
  Reporter reporter;  // outlives the watchdog, whose thread reports renewals and losses

 private:
  std::shared_ptr<Grant> live_grant(const std::string& name, const std::string& owner);
  std::optional<Lease> reenter(const std::shared_ptr<Grant>& grant, const LockSpec& spec, Clock::time_point called);
  std::shared_ptr<Grant> adopt(const std::shared_ptr<ClientCore>& self, const LockSpec& spec,
                               const std::string& owner, const std::shared_ptr<Gate>& gate, Attempt& attempt,
                               Clock::time_point sent, Mode mode);
  bool release_on_server(Grant& grant);

  std::mutex drivers_mutex_;
  std::map<Strategy, std::unique_ptr<LockDriver>> drivers_;
  std::mutex grants_mutex_;
  // Each owner's grant per name, found again by its re-entries.
  std::map<std::pair<std::string, std::string>, std::weak_ptr<Grant>> grants_;
  GateTable gates_;
  HangupWatch hangups_;  // before the watchdog: grants it still holds unwatch on destruction
  Watchdog watchdog_;  // last: destroyed first, before the drivers it calls
};

// The state behind a Lock handle (shared by its copies).
struct LockState {
  std::shared_ptr<ClientCore> core;
  LockSpec spec;
  std::mutex mutex;
  std::unordered_map<std::thread::id, std::vector<Lease>> held;  // Lockable holds per thread
};

}  // namespace dblock::detail
