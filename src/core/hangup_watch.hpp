// HangupWatch: learns within milliseconds that a server closed the connection a session lock
// lives in (a backend killed, a restart), instead of at the next renewal ping. One thread per
// Client polls the sockets of its held session locks for the peer's hang-up only (POLLRDHUP):
// it never reads, so libpq keeps the connection's data to itself.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace dblock::detail {

class HangupWatch {
 public:
  // One socket watched. Unwatches when destroyed or reset: after that the callback is not
  // running and never runs.
  class Registration {
   public:
    Registration() = default;
    Registration(HangupWatch* watch, std::uint64_t id) : watch_(watch), id_(id) {}
    Registration(Registration&& o) noexcept
        : watch_(o.watch_), id_(o.id_), cancelled_(o.cancelled_), fired_(o.fired_) {
      o.watch_ = nullptr;
    }
    Registration& operator=(Registration&& o) noexcept;
    ~Registration() { reset(); }
    // cancel() and then wait().
    void reset() noexcept;
    // Stops watching without waiting for anything: after it the callback never *starts*.
    // True when it had already started (the hang-up was seen first). Safe under any mutex
    // the callback does not take; a second call answers the same and changes nothing, so
    // the owner's release and the watchdog's let_go may both call it (under the grant's
    // `use`, which orders them).
    bool cancel() noexcept;
    // After cancel(): returns once a callback that had started has returned. Blocks on the
    // callback, so it must be called holding nothing the callback may take (the core's only
    // marks the grant lost, under the grant's leaf mutex). From the watch thread itself it
    // returns at once. Changes nothing in the registration.
    void wait() const noexcept;

   private:
    HangupWatch* watch_ = nullptr;
    std::uint64_t id_ = 0;
    bool cancelled_ = false, fired_ = false;
  };
  HangupWatch();
  ~HangupWatch();
  HangupWatch(const HangupWatch&) = delete;
  HangupWatch& operator=(const HangupWatch&) = delete;

  // Calls on_hangup once, from the watch's thread, when the peer of `fd` closes it. The fd
  // must stay open until the registration is reset.
  Registration watch(int fd, std::function<void()> on_hangup);

 private:
  struct State;
  bool cancel(std::uint64_t id) noexcept;       // true: its callback had been taken
  void wait_for(std::uint64_t id) const noexcept;  // until that callback has returned
  static void run(std::shared_ptr<State> st);
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace dblock::detail
