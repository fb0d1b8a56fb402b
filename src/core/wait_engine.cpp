#include "core/wait_engine.hpp"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

namespace dblock::detail {

namespace {
constexpr auto idle_for = std::chrono::seconds{10};  // a worker with no job for this long ends
thread_local bool in_worker = false;                 // the calling thread is a worker
thread_local bool counted_idle = false;              // this worker called finishing() in its job
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
  t->jobs.emplace(when, std::move(job));
  t->changed.notify_one();
}

int WaitEngine::workers() {
  std::lock_guard lk(workers_->mutex);
  return workers_->alive;
}

}  // namespace dblock::detail
