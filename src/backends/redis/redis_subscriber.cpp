#include "backends/redis/redis_subscriber.hpp"

#include <algorithm>

#include "backends/redis/redis_sentinel.hpp"
#include "core/process_shared.hpp"

namespace dblock::detail::redis {

namespace {

// A release's message (names hold no NUL; owners come last, as they may hold spaces).
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

class RedisSubscription final : public Subscription {
 public:
  RedisSubscription(const Target& target, const std::string& channel)
      // A subscriber may take its time to connect (it only speeds waiters up), but one
      // unreachable redlock node must not hold up the others for long.
      : conn_(target, std::min(target.connect_timeout, milliseconds{1000})) {
    conn_.command({"SUBSCRIBE", channel});  // returns once the server confirmed
    fd_ = conn_.context()->fd;
  }
  int fd() const override { return fd_; }
  void read(WakeTable& table) override {
    conn_.read_available();
    while (auto r = conn_.take_buffered())
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[2]->type == REDIS_REPLY_STRING)
        deliver(table, std::string(r->element[2]->str, r->element[2]->len));
  }

 private:
  Connection conn_;
  int fd_ = -1;
};

}  // namespace

std::shared_ptr<ReleaseFeed> shared_release_feed(const std::vector<Target>& servers, const std::string& channel) {
  std::string key = channel;
  std::vector<Subscribe> subscribe;
  for (const auto& t : servers) {
    key += '\n' + (t.sentinels ? t.sentinels->key() : t.host + ':' + std::to_string(t.port)) + '/' +
           std::to_string(t.db) + ' ' + t.user + ' ' + t.password;
    subscribe.push_back([t, channel] { return std::make_unique<RedisSubscription>(t, channel); });
  }
  return process_shared<ReleaseFeed>(key, [&] { return std::make_shared<ReleaseFeed>(std::move(subscribe)); });
}

}  // namespace dblock::detail::redis
