#include "core/hangup_watch.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <system_error>
#include <vector>

namespace dblock::detail {

struct HangupWatch::State {
  std::mutex mutex;
  std::condition_variable done;  // a callback finished
  std::map<std::uint64_t, std::pair<int, std::function<void()>>> entries;
  std::uint64_t next = 1, running = 0;  // running: the id whose callback is being called
  std::thread::id thread;
  bool stop = false;
  int wake = -1;  // eventfd: the set changed, or stop
};

HangupWatch::Registration& HangupWatch::Registration::operator=(Registration&& o) noexcept {
  if (this != &o) {
    reset();
    watch_ = o.watch_;
    id_ = o.id_;
    o.watch_ = nullptr;
  }
  return *this;
}

void HangupWatch::Registration::reset() noexcept {
  if (watch_) watch_->unwatch(id_);
  watch_ = nullptr;
}

HangupWatch::HangupWatch() : state_(std::make_shared<State>()) {
  state_->wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (state_->wake < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
}

HangupWatch::~HangupWatch() {
  if (!thread_.joinable()) {  // never watched anything
    ::close(state_->wake);
    return;
  }
  {
    std::lock_guard lk(state_->mutex);
    state_->stop = true;
  }
  std::uint64_t one = 1;
  (void)!::write(state_->wake, &one, sizeof one);
  // Destroyed from a callback (it dropped the last reference to the Client): the thread ends
  // on its own, holding the state.
  if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
  else thread_.join();
}

HangupWatch::Registration HangupWatch::watch(int fd, std::function<void()> on_hangup) {
  std::uint64_t id;
  {
    std::lock_guard lk(state_->mutex);
    if (!thread_.joinable()) thread_ = std::thread(run, state_);
    id = state_->next++;
    state_->entries[id] = {fd, std::move(on_hangup)};
  }
  std::uint64_t one = 1;
  (void)!::write(state_->wake, &one, sizeof one);
  return Registration(this, id);
}

void HangupWatch::unwatch(std::uint64_t id) noexcept {
  std::unique_lock lk(state_->mutex);
  state_->entries.erase(id);
  // A callback under way finishes first, unless it is the caller (a callback that released
  // its lock).
  if (std::this_thread::get_id() != state_->thread)
    state_->done.wait(lk, [&] { return state_->running != id; });
  // The poll set still names the fd until the thread looks again: it must, before the fd
  // can be closed and reused by another connection.
  std::uint64_t one = 1;
  (void)!::write(state_->wake, &one, sizeof one);
}

void HangupWatch::run(std::shared_ptr<State> st) {
  std::unique_lock lk(st->mutex);
  st->thread = std::this_thread::get_id();
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  while (!st->stop) {
    fds.assign(1, pollfd{st->wake, POLLIN, 0});
    ids.assign(1, 0);
    for (auto& [id, entry] : st->entries) {
      fds.push_back(pollfd{entry.first, POLLRDHUP, 0});
      ids.push_back(id);
    }
    lk.unlock();
    int n = ::poll(fds.data(), fds.size(), -1);
    lk.lock();
    if (n < 0) continue;  // EINTR
    if (fds[0].revents & POLLIN) {
      std::uint64_t count;
      (void)!::read(st->wake, &count, sizeof count);
    }
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) continue;
      auto it = st->entries.find(ids[i]);
      if (it == st->entries.end()) continue;  // unwatched meanwhile
      auto callback = std::move(it->second.second);
      st->entries.erase(it);  // once
      st->running = ids[i];
      lk.unlock();
      try {
        callback();
      } catch (...) {
      }
      callback = nullptr;  // what it holds is dropped here, outside the mutex
      lk.lock();
      st->running = 0;
      st->done.notify_all();
    }
  }
  lk.unlock();
  ::close(st->wake);
}

}  // namespace dblock::detail
