// ReleaseFeed: the thread through which a server tells a process's waiters that a lock was
// released (PostgreSQL LISTEN, Redis SUBSCRIBE). One per process, server(s) and channel
// (process_shared.hpp), started by the first watch(), so an uncontended Client opens no extra
// connection. It keeps one subscription per server it is given (one for PostgreSQL and redis,
// one per node for redlock: any node's message wakes), reads what arrives on any of them into
// a WakeTable, and reconnects a lost one with backoff. A subscription that comes or goes moves
// the table's epoch: every waiter retries, as a release may have been missed meanwhile.
//
// A backend supplies only what differs: how to subscribe to one server and how to read its
// messages (a Subscription). Where to sleep, how to stop and when a waiter may count on a
// wake-up are the same for all, and written here once.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/driver.hpp"
#include "core/wake_table.hpp"

namespace dblock::detail {

// One server's confirmed subscription, in the feed thread's hands.
class Subscription {
 public:
  virtual ~Subscription() = default;
  // The descriptor that turns readable when a message (or the server's close) arrives.
  virtual int fd() const = 0;
  // Delivers what has arrived to `table` (bump, hand_over) without blocking; throws when the
  // connection is lost or sends what is not a subscription's message.
  virtual void read(WakeTable& table) = 0;
};

// Subscribes to one server, returning once the server confirmed it (a release after that is
// heard); throws when it cannot now. Called on the feed's thread only.
using Subscribe = std::function<std::unique_ptr<Subscription>()>;

class ReleaseFeed {
 public:
  explicit ReleaseFeed(std::vector<Subscribe> servers);
  ~ReleaseFeed();  // stops the thread at once, waking every watch
  ReleaseFeed(const ReleaseFeed&) = delete;
  ReleaseFeed& operator=(const ReleaseFeed&) = delete;

  // A watch of `name` for `owner`, once a subscription is confirmed on at least one server;
  // the first call starts the thread and waits up to 2 s for that. Null when none is (the
  // waiter then polls).
  std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner);
  // The same without starting or waiting for anything (LockDriver::early_watch).
  std::unique_ptr<ReleaseWatch> watch_if_live(const std::string& name, const std::string& owner);
  // Whether a subscription is confirmed on a server now.
  bool live() const noexcept;
  // The grant a release handed to `owner`'s watch of `name`, once (WakeTable::take_handover).
  std::optional<Handover> take_handover(const std::string& name, const std::string& owner);

  struct State;  // shared with the watches

 private:
  void run();
  std::vector<Subscribe> servers_;
  std::shared_ptr<State> state_;
  int stop_pipe_[2] = {-1, -1};  // written by the destructor, so that the thread's poll ends
  std::thread thread_;
  std::once_flag started_;
};

}  // namespace dblock::detail
