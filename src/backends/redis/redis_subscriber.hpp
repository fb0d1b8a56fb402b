// Release wake-ups over Redis pub/sub: one thread per process, servers and channel (shared by
// every Client on them, see shared_subscriber), started by the first watch(), SUBSCRIBEs
// `<table>:released` on every server it is given (one for redis, each node for redlock: any
// node's publish wakes) and bumps the generation of the names waited for. A broken
// subscription wakes every waiter (a release may have been missed) and reconnects with
// backoff.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/redis/redis_connection.hpp"
#include "core/driver.hpp"
#include "core/wake_table.hpp"

namespace dblock::detail::redis {

class Subscriber {
 public:
  Subscriber(std::vector<Target> servers, std::string channel);
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Null when no subscription could be confirmed soon (the waiter then polls). Otherwise
  // the SUBSCRIBE is confirmed on at least one server before this returns, so that a
  // release after it is seen. A message "NAME" wakes the name's first watch in this process;
  // "NAME\0OWNER" (a fair queue's release: OWNER is next) only the watch made for OWNER.
  std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner);
  // The same without starting or waiting for anything: null unless subscribed already.
  std::unique_ptr<ReleaseWatch> watch_if_subscribed(const std::string& name, const std::string& owner);
  // "NAME\0\0FENCE LEASE TOKEN OWNER": the release handed the name to OWNER, whose watch wakes;
  // its next attempt takes the grant from here instead of asking the server.
  std::optional<Handover> take_handover(const std::string& name, const std::string& owner);

  struct State;  // shared with the watches

 private:
  void run();
  std::vector<Target> servers_;
  std::string channel_;
  std::shared_ptr<State> state_;
  int wake_pipe_[2] = {-1, -1};  // written by the destructor so the thread stops at once
  std::thread thread_;
  std::once_flag started_;
};

// The process's Subscriber for these servers and channel, made on first use and shared by
// the Clients on them while any uses it: a release then wakes one waiter per process (the
// WakeTable's queue), not one per Client, and each server keeps one subscribed connection per
// process.
std::shared_ptr<Subscriber> shared_subscriber(const std::vector<Target>& servers, const std::string& channel);

}  // namespace dblock::detail::redis
