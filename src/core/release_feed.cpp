#include "core/release_feed.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <exception>

namespace dblock::detail {

// What waiters and the feed's thread share: the wake table, and how many servers have a
// confirmed subscription now.
struct ReleaseFeed::State : WakeTable {
  int live = 0;
  void subscriptions(int delta) {
    std::lock_guard lk(mutex);
    live += delta;
    bump_epoch_locked();
  }
};

namespace {

// One server in the thread's hands: its subscription while it has one, otherwise when to try
// again. The backoff doubles while a server stays away, so that a feed does not compete every
// half second with the Clients for the last connection slot of a full server.
struct Link {
  const Subscribe* subscribe;
  std::unique_ptr<Subscription> sub;
  Clock::time_point next_try{};
  milliseconds backoff{200};

  void failed() {
    sub.reset();
    next_try = Clock::now() + backoff;
    backoff = std::min(backoff * 2, milliseconds{5000});
  }
};

}  // namespace

ReleaseFeed::ReleaseFeed(std::vector<Subscribe> servers)
    : servers_(std::move(servers)), state_(std::make_shared<State>()) {
  if (pipe(stop_pipe_) == 0)
    for (int fd : stop_pipe_) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

ReleaseFeed::~ReleaseFeed() {
  {
    std::lock_guard lk(state_->mutex);
    state_->stop = true;
    state_->changed.notify_all();
    state_->wake_all_locked();
  }
  if (stop_pipe_[1] >= 0) {
    char c = 1;
    (void)!write(stop_pipe_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : stop_pipe_)
    if (fd >= 0) close(fd);
}

void ReleaseFeed::run() {
  auto st = state_;
  std::vector<Link> links;
  for (const auto& s : servers_) links.push_back(Link{&s, nullptr, {}, milliseconds{200}});
  for (;;) {
    {
      std::lock_guard lk(st->mutex);
      if (st->stop) return;
    }
    auto now = Clock::now();
    auto next_wake = now + milliseconds{1000};
    for (auto& l : links) {
      if (l.sub) continue;
      if (now < l.next_try) {
        next_wake = std::min(next_wake, l.next_try);
        continue;
      }
      try {
        l.sub = (*l.subscribe)();
        l.backoff = milliseconds{200};
        st->subscriptions(+1);
      } catch (const std::exception&) {
        l.failed();
        next_wake = std::min(next_wake, l.next_try);
      }
    }
    std::vector<pollfd> fds{{stop_pipe_[0], POLLIN, 0}};
    std::vector<Link*> polled;
    for (auto& l : links)
      if (l.sub) {
        fds.push_back({l.sub->fd(), POLLIN, 0});
        polled.push_back(&l);
      }
    const auto wait = std::chrono::ceil<milliseconds>(next_wake - Clock::now()).count();
    if (poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(wait, 0))) < 0) continue;
    if (fds[0].revents) return;  // the destructor wrote: stop
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Link& l = *polled[i - 1];
      try {
        l.sub->read(*st);
      } catch (const std::exception&) {  // the server closed it, or garbage: subscribe again
        l.failed();
        st->subscriptions(-1);
      }
    }
  }
}

bool ReleaseFeed::live() const noexcept {
  std::lock_guard lk(state_->mutex);
  return state_->live > 0 && !state_->stop;
}

std::optional<Handover> ReleaseFeed::take_handover(const std::string& name, const std::string& owner) {
  return state_->take_handover(name, owner);
}

std::unique_ptr<ReleaseWatch> ReleaseFeed::watch_if_live(const std::string& name, const std::string& owner) {
  std::lock_guard lk(state_->mutex);
  if (state_->live == 0 || state_->stop) return nullptr;
  return WakeTable::watch_locked(state_, name, owner);
}

std::unique_ptr<ReleaseWatch> ReleaseFeed::watch(const std::string& name, const std::string& owner) {
  std::call_once(started_, [this] { thread_ = std::thread([this] { run(); }); });
  std::unique_lock lk(state_->mutex);
  // The first waiter waits (briefly) for a confirmed subscription; without one, it polls.
  state_->changed.wait_for(lk, std::chrono::seconds(2), [&] { return state_->live > 0 || state_->stop; });
  if (state_->live == 0 || state_->stop) return nullptr;
  return WakeTable::watch_locked(state_, name, owner);
}

}  // namespace dblock::detail
