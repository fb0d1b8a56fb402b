// EventThread: the one thread per Client that runs the service's callbacks (on_lost, on_event),
// in the order they were posted. The threads that find a loss or renew a lease (the watchdog's,
// the hang-up watch's) only post: a slow or blocking callback then delays other callbacks, never
// the detection of another grant's loss, a renewal or a release.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

namespace dblock::detail {

class EventThread {
 public:
  using Ticket = std::uint64_t;  // 0 is no work

  EventThread();
  // Runs what was posted and not run yet, then stops. From the event thread itself (a callback
  // dropping the last reference to its Client) it does not wait: the thread finishes the queue
  // on its own, on state it shares, and ends.
  ~EventThread();
  EventThread(const EventThread&) = delete;
  EventThread& operator=(const EventThread&) = delete;

  // Queues `work` (the thread starts at the first post). An exception it throws is dropped:
  // a service's callback must not stop the others'.
  Ticket post(std::function<void()> work);
  // Returns once the work of `ticket` (and all posted before it) has run; at once for ticket 0
  // and on the event thread itself, where waiting would wait for itself.
  void wait(Ticket ticket) const noexcept;

 private:
  struct State;
  static void run(std::shared_ptr<State> st);
  std::shared_ptr<State> state_;
  std::thread thread_;  // started by the first post, under State::mutex
};

}  // namespace dblock::detail
