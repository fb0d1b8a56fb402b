#include "backends/redis/redis_subscriber.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>

#include "backends/redis/redis_sentinel.hpp"
#include "core/process_shared.hpp"
#include "core/wake_table.hpp"

namespace dblock::detail::redis {

// What waiters and the subscriber thread share: the wake table, and how many servers have a
// confirmed SUBSCRIBE. A subscription that comes or goes moves the epoch (a release may have
// been missed meanwhile).
struct Subscriber::State : WakeTable {
  int subscribed = 0;
  void subscriptions(int delta) {
    std::lock_guard lk(mutex);
    subscribed += delta;
    bump_epoch_locked();
  }
};

namespace {

// One server's subscription in the thread's hands.
struct Link {
  Target target;
  std::unique_ptr<Connection> conn;
  Clock::time_point next_try{};
  milliseconds backoff{200};
};

// A release's message (redis_scripts.hpp, keys::channel): "NAME", "NAME\0OWNER" or
// "NAME\0\0FENCE LEASE TOKEN OWNER" (names hold no NUL; owners come last, as they may hold
// spaces).
void deliver(WakeTable& table, const std::string& message) {
  const auto nul = message.find('\0');
  if (nul == std::string::npos) return table.bump(message);
  auto name = message.substr(0, nul);
  if (nul + 1 == message.size() || message[nul + 1] != '\0') return table.bump(name, message.substr(nul + 1));
  // The three fields before the owner, each ended by a space.
  std::string field[3];
  auto at = nul + 2;
  for (auto& f : field) {
    const auto end = message.find(' ', at);
    if (end == std::string::npos) return;  // not a message of ours
    f = message.substr(at, end - at);
    at = end + 1;
  }
  Handover grant;
  try {
    grant.fence = std::stoull(field[0]);  // field[1], the lease, is read from the record
  } catch (const std::exception&) {
    return;
  }
  grant.token = field[2];
  table.hand_over(name, message.substr(at), grant);
}

}  // namespace

Subscriber::Subscriber(std::vector<Target> servers, std::string channel)
    : servers_(std::move(servers)), channel_(std::move(channel)), state_(std::make_shared<State>()) {
  if (pipe(wake_pipe_) == 0) {
    fcntl(wake_pipe_[0], F_SETFD, FD_CLOEXEC);
    fcntl(wake_pipe_[1], F_SETFD, FD_CLOEXEC);
  }
}

Subscriber::~Subscriber() {
  {
    std::lock_guard lk(state_->mutex);
    state_->stop = true;
    state_->changed.notify_all();
    state_->wake_all_locked();
  }
  if (wake_pipe_[1] >= 0) {
    char c = 1;
    (void)!write(wake_pipe_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : wake_pipe_)
    if (fd >= 0) close(fd);
}

void Subscriber::run() {
  auto st = state_;
  std::vector<Link> links;
  for (const auto& t : servers_) links.push_back(Link{t, nullptr, {}, milliseconds{200}});
  auto drop = [&](Link& l) {
    l.conn.reset();
    l.next_try = Clock::now() + l.backoff;
    l.backoff = std::min(l.backoff * 2, milliseconds{5000});
    st->subscriptions(-1);
  };
  for (;;) {
    {
      std::lock_guard lk(st->mutex);
      if (st->stop) return;
    }
    auto now = Clock::now();
    auto next_wake = now + milliseconds{1000};
    for (auto& l : links) {
      if (l.conn) continue;
      if (now < l.next_try) {
        next_wake = std::min(next_wake, l.next_try);
        continue;
      }
      try {
        // A subscriber may take its time to connect (it only speeds waiters up), but one
        // unreachable redlock node must not hold up the others for long.
        auto c = std::make_unique<Connection>(l.target, std::min(l.target.connect_timeout, milliseconds{1000}));
        auto r = c->command({"SUBSCRIBE", channel_});  // returns once the server confirmed
        l.conn = std::move(c);
        l.backoff = milliseconds{200};
        st->subscriptions(+1);
      } catch (const std::exception&) {
        l.next_try = Clock::now() + l.backoff;
        l.backoff = std::min(l.backoff * 2, milliseconds{5000});
        next_wake = std::min(next_wake, l.next_try);
      }
    }
    std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}};
    std::vector<Link*> polled;
    for (auto& l : links)
      if (l.conn) {
        fds.push_back({l.conn->context()->fd, POLLIN, 0});
        polled.push_back(&l);
      }
    auto wait = std::chrono::ceil<milliseconds>(next_wake - Clock::now()).count();
    if (poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(wait, 0))) < 0) continue;
    if (fds[0].revents) return;  // the destructor wrote: stop
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      Link& l = *polled[i - 1];
      try {
        l.conn->read_available();
        while (auto r = l.conn->take_buffered())
          if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[2]->type == REDIS_REPLY_STRING)
            deliver(*st, std::string(r->element[2]->str, r->element[2]->len));
      } catch (const Error&) {  // the server closed it, or garbage: connect again
        drop(l);
      }
    }
  }
}

std::shared_ptr<Subscriber> shared_subscriber(const std::vector<Target>& servers, const std::string& channel) {
  std::string key = channel;
  for (const auto& t : servers)
    key += '\n' + (t.sentinels ? t.sentinels->key() : t.host + ':' + std::to_string(t.port)) + '/' +
           std::to_string(t.db) + ' ' + t.user + ' ' + t.password;
  return process_shared<Subscriber>(key, [&] { return std::make_shared<Subscriber>(servers, channel); });
}

std::optional<Handover> Subscriber::take_handover(const std::string& name, const std::string& owner) {
  return state_->take_handover(name, owner);
}

std::unique_ptr<ReleaseWatch> Subscriber::watch_if_subscribed(const std::string& name, const std::string& owner) {
  std::lock_guard lk(state_->mutex);
  if (state_->subscribed == 0 || state_->stop) return nullptr;
  return WakeTable::watch_locked(state_, name, owner);
}

std::unique_ptr<ReleaseWatch> Subscriber::watch(const std::string& name, const std::string& owner) {
  std::call_once(started_, [this] { thread_ = std::thread([this] { run(); }); });
  std::unique_lock lk(state_->mutex);
  // The first waiter waits (briefly) for a confirmed SUBSCRIBE; without one, it polls.
  state_->changed.wait_for(lk, std::chrono::seconds(2), [&] { return state_->subscribed > 0 || state_->stop; });
  if (state_->subscribed == 0) return nullptr;
  return WakeTable::watch_locked(state_, name, owner);
}

}  // namespace dblock::detail::redis
