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
  // Unwatches when destroyed or reset: after that the callback is not running and never runs.
  class Registration {
   public:
    Registration() = default;
    Registration(HangupWatch* watch, std::uint64_t id) : watch_(watch), id_(id) {}
    Registration(Registration&& o) noexcept : watch_(o.watch_), id_(o.id_) { o.watch_ = nullptr; }
    Registration& operator=(Registration&& o) noexcept;
    ~Registration() { reset(); }
    void reset() noexcept;

   private:
    HangupWatch* watch_ = nullptr;
    std::uint64_t id_ = 0;
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
  void unwatch(std::uint64_t id) noexcept;
  static void run(std::shared_ptr<State> st);
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace dblock::detail
