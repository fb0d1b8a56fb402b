#include "core/event_thread.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>

namespace dblock::detail {

struct EventThread::State {
  std::mutex mutex;
  std::condition_variable has_work, ran;
  std::deque<std::function<void()>> queue;
  Ticket posted = 0, done = 0;
  bool stop = false;
  std::thread::id id;  // the event thread's, once started
};

EventThread::EventThread() : state_(std::make_shared<State>()) {}

EventThread::~EventThread() {
  {
    std::lock_guard lk(state_->mutex);
    state_->stop = true;
  }
  state_->has_work.notify_one();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
  else thread_.join();
}

EventThread::Ticket EventThread::post(std::function<void()> work) {
  Ticket ticket;
  {
    std::lock_guard lk(state_->mutex);
    if (!thread_.joinable()) {
      thread_ = std::thread(run, state_);
      state_->id = thread_.get_id();
    }
    state_->queue.push_back(std::move(work));
    ticket = ++state_->posted;
  }
  state_->has_work.notify_one();
  return ticket;
}

void EventThread::wait(Ticket ticket) const noexcept {
  std::unique_lock lk(state_->mutex);
  if (ticket == 0 || state_->id == std::this_thread::get_id()) return;
  state_->ran.wait(lk, [&] { return state_->done >= ticket; });
}

void EventThread::run(std::shared_ptr<State> st) {
  std::unique_lock lk(st->mutex);
  for (;;) {
    st->has_work.wait(lk, [&] { return st->stop || !st->queue.empty(); });
    if (st->queue.empty()) return;  // stopping, and nothing left to run
    auto work = std::move(st->queue.front());
    st->queue.pop_front();
    lk.unlock();
    try {
      work();
    } catch (...) {  // the service's callback must not stop the ones after it
    }
    work = nullptr;  // what it captured goes before the wait ends (a Client's last reference)
    lk.lock();
    ++st->done;
    st->ran.notify_all();
  }
}

}  // namespace dblock::detail
