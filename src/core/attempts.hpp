// Attempts: the attempts one acquire makes once it is first in its name's line, holding the
// name's Gate, whichever thread runs them. A blocking acquire runs them on the caller's
// thread; an asynchronous one on the WaitEngine (ClientCore::step). Each step is one attempt
// at the server; what comes between two steps (a wait on the release watch, up to a time) is
// the runner's: blocking in ReleaseWatch::wait_until, or arming the watch and a timer.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/backoff.hpp"
#include "core/driver.hpp"
#include "dblock/lease.hpp"

namespace dblock::detail {

class ClientCore;
class Gate;
struct LockSpec;

class Attempts {
 public:
  // `slice`: the longest a session strategy's attempt may wait inside the server; `cancel`
  // ends such a wait at once (an asynchronous acquire's; null: a blocking one's).
  Attempts(std::shared_ptr<ClientCore> core, const LockSpec& spec, std::string owner, std::shared_ptr<Gate> gate,
           std::optional<Clock::time_point> deadline, Mode mode, Clock::time_point called, milliseconds slice,
           WaitCancel* cancel = nullptr);
  // Gives up the server's place, then the gate, unless a grant took it.
  ~Attempts();
  Attempts(const Attempts&) = delete;
  Attempts& operator=(const Attempts&) = delete;

  struct Step {
    bool ended = false;           // granted (`lease`), or the deadline passed (none)
    std::optional<Lease> lease;
    ReleaseWatch* watch = nullptr;  // not ended: what to wait on before the next step (null: only the time)
    Clock::time_point until;        // ... and until when
  };
  // One attempt. What it throws has given up the place and left the gate.
  Step step();

 private:
  Step attempt();
  std::unique_ptr<ReleaseWatch> open_watch(bool early);
  bool may_wait() const;
  void give_up() noexcept;  // the server's place, the watch, then the gate

  std::shared_ptr<ClientCore> core_;
  const LockSpec& spec_;
  const std::string owner_;
  std::shared_ptr<Gate> gate_;  // null once a grant took it or it was left
  const std::optional<Clock::time_point> deadline_;
  const Mode mode_;
  const Clock::time_point called_;
  const milliseconds slice_;
  WaitCancel* const cancel_;
  bool started_ = false;
  Backoff backoff_;
  // Armed at the first busy answer, then kept; before the first attempt where the driver
  // has one ready (an acquire that may wait): a busy answer then needs no second attempt.
  std::unique_ptr<ReleaseWatch> watch_;
  std::unique_ptr<QueuePlace> place_;       // kept between attempts
  std::optional<ServerFullError> full_;     // the last attempt's, if it found the server full
};

}  // namespace dblock::detail
