#include "core/wait_engine.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace dblock::detail {

namespace {
constexpr auto idle_for = std::chrono::seconds{10};  // a worker with no job for this long ends
thread_local bool in_worker = false;                 // the calling thread is a worker
thread_local bool counted_idle = false;              // this worker called finishing() in its job
thread_local bool in_ready = false;                  // a stepper running an armed watch's callback
}

struct WaitEngine::Workers {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::function<void()>> jobs;
  int idle = 0;   // workers waiting for a job, or about to (WaitEngine::finishing)
  int alive = 0;

  void work() {
    in_worker = true;
    std::unique_lock lk(mutex);
    for (;;) {
      if (!counted_idle) ++idle;
      counted_idle = false;
      bool got = ready.wait_for(lk, idle_for, [&] { return !jobs.empty(); });
      --idle;
      if (!got) {
        --alive;
        return;
      }
      auto job = std::move(jobs.front());
      jobs.pop_front();
      lk.unlock();
      job();  // drops what it holds (an acquire, its Client's core) before the next wait
      job = nullptr;
      lk.lock();
    }
  }
};

// The steppers wait in one epoll: on an eventfd that a posted step makes readable, and on the
// descriptors of the armed release watches (SQLite's inotify), so that a release wakes a
// stepper directly, which runs the step it posts itself: one thread hop from the release to
// the attempt, as a thread blocked in poll() would have. A step may wait on a slow server or
// a lock (SQLite's busy handler sleeps while another connection writes, a flushed commit of
// ours), and a release's wake then waits behind it. From SQLite's release to the end of the
// woken attempt, in dblock-bench's hand-off (8 waiters, flush on), p50 / p75: two steppers
// 125-180 / 270 us, three 115 / 240 us, four 94-106 / 148-194 us, a blocked thread 85-94 /
// 123-150 us. Each adds a thread to every process that waits: with four, one Client's
// 10,000 waits reached the 8 more threads the contract test allows; three leave room.
struct WaitEngine::Steppers {
  static constexpr int count = WaitEngine::steppers;
  void start_locked();  // with `mutex` held: the epoll, the eventfd and the threads, once
  int epoll = -1, posted = -1;  // posted: the eventfd, registered with id 0
  std::mutex mutex;             // the jobs
  std::deque<std::function<void()>> jobs;
  bool started = false;
  std::mutex watches_mutex;  // the armed descriptors; held while their callback runs
  struct Watch {
    std::vector<int> fds;
    std::function<void()> ready;
  };
  std::map<std::uint64_t, Watch> watches;
  std::uint64_t next_watch = 1;

  void forget_locked(std::map<std::uint64_t, Watch>::iterator it) {
    for (int fd : it->second.fds) epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
    watches.erase(it);
  }

  std::function<void()> take() {
    std::lock_guard lk(mutex);
    if (jobs.empty()) return nullptr;
    auto job = std::move(jobs.front());
    jobs.pop_front();
    // More are queued: the other stepper takes the next (one read of the eventfd may have
    // stood for several posts).
    if (!jobs.empty()) signal();
    return job;
  }
  void signal() const noexcept {
    const std::uint64_t one = 1;
    (void)!write(posted, &one, sizeof one);
  }

  void work() {
    epoll_event events[16];
    for (;;) {
      if (auto job = take()) {
        job();  // drops what it holds (an acquire, its Client's core) before the next wait
        continue;
      }
      int n = epoll_wait(epoll, events, 16, -1);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == 0) {
          std::uint64_t count;
          (void)!read(posted, &count, sizeof count);  // another stepper may have read it first
          continue;
        }
        std::lock_guard lk(watches_mutex);
        // A watch disarmed, or fired by its other descriptor, since epoll_wait returned.
        auto it = watches.find(events[i].data.u64);
        if (it == watches.end()) continue;
        auto ready = std::move(it->second.ready);
        forget_locked(it);
        in_ready = true;  // what it posts, this thread runs next
        ready();
        in_ready = false;
      }
    }
  }
};

struct WaitEngine::Timer {
  std::mutex mutex;
  std::condition_variable changed;
  std::multimap<Clock::time_point, std::function<void()>> jobs;
  bool started = false;

  void tick() {
    std::unique_lock lk(mutex);
    for (;;) {
      if (jobs.empty()) {
        changed.wait(lk);
        continue;
      }
      auto first = jobs.begin();
      if (Clock::now() < first->first) {
        changed.wait_until(lk, first->first);
        continue;
      }
      auto job = std::move(first->second);
      jobs.erase(first);
      lk.unlock();
      job();
      job = nullptr;
      lk.lock();
    }
  }
};

WaitEngine& WaitEngine::get() {
  static WaitEngine* engine = [] {
    auto* e = new WaitEngine;
    e->workers_ = new Workers;
    e->steppers_ = new Steppers;
    e->timer_ = new Timer;
    return e;
  }();
  return *engine;
}

void WaitEngine::run(std::function<void()> job) {
  auto* w = workers_;
  std::lock_guard lk(w->mutex);
  w->jobs.push_back(std::move(job));
  // Every queued job has a waiting worker of its own, or a new one: a job may wait on the
  // server for hours, and none may wait behind it.
  if (static_cast<int>(w->jobs.size()) > w->idle) {
    ++w->alive;
    std::thread([w] { w->work(); }).detach();
  } else {
    w->ready.notify_one();
  }
}

void WaitEngine::Steppers::start_locked() {
  if (started) return;
  started = true;
  epoll = epoll_create1(EPOLL_CLOEXEC);
  posted = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = 0;
  if (epoll < 0 || posted < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, posted, &e) != 0)
    throw std::system_error(errno, std::generic_category(), "cannot start dblock's wait steppers");
  for (int i = 0; i < count; ++i) std::thread([this] { work(); }).detach();
}

void WaitEngine::post(std::function<void()> job) {
  auto* s = steppers_;
  {
    std::lock_guard lk(s->mutex);
    s->start_locked();
    s->jobs.push_back(std::move(job));
  }
  if (!in_ready) s->signal();  // else the stepper running the watch's callback takes it next
}

std::uint64_t WaitEngine::when_readable(const std::vector<int>& fds, std::function<void()> ready) {
  auto* s = steppers_;
  {
    std::lock_guard lk(s->mutex);
    s->start_locked();
  }
  std::lock_guard lk(s->watches_mutex);
  const std::uint64_t id = s->next_watch++;
  auto it = s->watches.emplace(id, Steppers::Watch{{}, std::move(ready)}).first;
  for (int fd : fds) {
    if (fd < 0) continue;
    // One-shot: a descriptor wakes one stepper once, then stays registered but silent until
    // forgotten (by its callback's run or by forget_readable).
    epoll_event e{};
    e.events = EPOLLIN | EPOLLONESHOT;
    e.data.u64 = id;
    if (epoll_ctl(s->epoll, EPOLL_CTL_ADD, fd, &e) != 0) {
      s->forget_locked(it);
      return 0;
    }
    it->second.fds.push_back(fd);
  }
  return id;
}

void WaitEngine::forget_readable(std::uint64_t id) noexcept {
  if (id == 0) return;
  auto* s = steppers_;
  std::lock_guard lk(s->watches_mutex);
  if (auto it = s->watches.find(id); it != s->watches.end()) s->forget_locked(it);
}

void WaitEngine::finishing() {
  if (!in_worker || counted_idle) return;
  std::lock_guard lk(workers_->mutex);
  ++workers_->idle;
  counted_idle = true;
}

void WaitEngine::at(Clock::time_point when, std::function<void()> job) {
  auto* t = timer_;
  std::lock_guard lk(t->mutex);
  if (!t->started) {
    t->started = true;
    std::thread([t] { t->tick(); }).detach();
  }
  // The timer sleeps until its first job: only a new first one needs it awake (an armed
  // acquire adds one per pause, mostly later than the first).
  auto added = t->jobs.emplace(when, std::move(job));
  if (added == t->jobs.begin()) t->changed.notify_one();
}

int WaitEngine::workers() {
  std::lock_guard lk(workers_->mutex);
  return workers_->alive;
}

}  // namespace dblock::detail
