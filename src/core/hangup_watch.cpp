#include "core/hangup_watch.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
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
  // The thread sleeps in poll() without a timeout (nothing watched for a while): only then
  // does a new registration write to `wake`. Otherwise it naps at most kNap and picks the
  // registration up then, so an acquire costs no context switch to the watch thread.
  bool sleeping = false;
  int wake = -1;  // eventfd: the set changed, or stop
};

namespace {
// How long a new registration may wait to be polled, and how long the thread keeps napping
// after its last registration went before it sleeps until woken. A connection killed within
// kNap of its grant is seen up to kNap later; later ones within milliseconds.
constexpr std::chrono::milliseconds kNap{20}, kIdle{1000};
}  // namespace

HangupWatch::Registration& HangupWatch::Registration::operator=(Registration&& o) noexcept {
  if (this != &o) {
    reset();
    watch_ = o.watch_;
    id_ = o.id_;
    cancelled_ = o.cancelled_;
    fired_ = o.fired_;
    o.watch_ = nullptr;
  }
  return *this;
}

bool HangupWatch::Registration::cancel() noexcept {
  if (watch_ && !cancelled_) {
    fired_ = watch_->cancel(id_);
    cancelled_ = true;
  }
  return fired_;
}

void HangupWatch::Registration::wait() const noexcept {
  if (watch_ && fired_) watch_->wait_for(id_);  // only a callback that was taken can be running
}

void HangupWatch::Registration::reset() noexcept {
  cancel();
  wait();
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
    // The wake-up is written under the mutex: the thread closes the eventfd once it has seen
    // `stop`, which it reads under the mutex, and a napping thread may see it without being
    // woken; written after, it could go to a closed (or reused) descriptor.
    std::lock_guard lk(state_->mutex);
    state_->stop = true;
    std::uint64_t one = 1;
    (void)!::write(state_->wake, &one, sizeof one);
  }
  // Destroyed from a callback (it dropped the last reference to the Client): the thread ends
  // on its own, holding the state.
  if (thread_.get_id() == std::this_thread::get_id()) thread_.detach();
  else thread_.join();
}

HangupWatch::Registration HangupWatch::watch(int fd, std::function<void()> on_hangup) {
  std::uint64_t id;
  bool sleeping;
  {
    std::lock_guard lk(state_->mutex);
    if (!thread_.joinable()) thread_ = std::thread(run, state_);
    id = state_->next++;
    state_->entries[id] = {fd, std::move(on_hangup)};
    sleeping = state_->sleeping;
  }
  // Waking the thread costs two context switches per acquire (advisory on PostgreSQL went
  // from 1.2x to 1.6x its bare statements); a napping thread polls the new socket within kNap.
  if (sleeping) {
    std::uint64_t one = 1;
    (void)!::write(state_->wake, &one, sizeof one);
  }
  return Registration(this, id);
}

// Two steps, cancel and wait, because the callers that must cancel at a given point hold
// the grant's `use` (before its handle closes the socket) and may not wait there: the callback
// marks the grant lost, which takes the grant's own leaf mutex and queues on_lost. (It ran the
// user's on_lost itself before the event thread did, and the rule kept releases from waiting
// under `use` for an on_lost that unlocks its own lease or takes the name again:
// tests/unit/test_hangup_watch.cpp, tests/contract/postgresql_tests.cpp.)
bool HangupWatch::cancel(std::uint64_t id) noexcept {
  bool fired;
  {
    std::lock_guard lk(state_->mutex);
    // Only two things remove an id: this, and the thread taking it to call its callback.
    fired = state_->entries.erase(id) == 0;
  }
  // The thread is not woken: it drops the fd at its next round. Not needed for correctness:
  // the thread matches what poll() reports to ids, not to fd numbers, and skips an id no
  // longer registered, so a socket closed after this and its number reused by another
  // connection is never reported for this registration, whatever an earlier poll() saw.
  return fired;
}

void HangupWatch::wait_for(std::uint64_t id) const noexcept {
  std::unique_lock lk(state_->mutex);
  // A callback under way finishes first, unless it is the caller (a callback that released
  // its lock, or another one).
  if (std::this_thread::get_id() != state_->thread) state_->done.wait(lk, [&] { return state_->running != id; });
}

void HangupWatch::run(std::shared_ptr<State> st) {
  std::unique_lock lk(st->mutex);
  st->thread = std::this_thread::get_id();
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  auto last_watched = std::chrono::steady_clock::now();
  while (!st->stop) {
    fds.assign(1, pollfd{st->wake, POLLIN, 0});
    ids.assign(1, 0);
    for (auto& [id, entry] : st->entries) {
      fds.push_back(pollfd{entry.first, POLLRDHUP, 0});
      ids.push_back(id);
    }
    const auto now = std::chrono::steady_clock::now();
    if (!st->entries.empty()) last_watched = now;
    const bool sleep = now - last_watched >= kIdle;
    st->sleeping = sleep;  // then watch() wakes us
    lk.unlock();
    int n = ::poll(fds.data(), fds.size(), sleep ? -1 : static_cast<int>(kNap.count()));
    const int error = errno;
    lk.lock();
    st->sleeping = false;
    if (n < 0) {  // EINTR; anything else (ENOMEM) must not spin the thread
      if (error != EINTR) {
        lk.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds{10});
        lk.lock();
      }
      continue;
    }
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
