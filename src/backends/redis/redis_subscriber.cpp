#include "backends/redis/redis_subscriber.hpp"

#include <algorithm>

#include "backends/redis/redis_sentinel.hpp"
#include "backends/redis/redis_scripts.hpp"
#include "core/owner.hpp"
#include "core/process_shared.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::redis {

namespace {

// A message of a release (names hold no NUL; owners come last, as they may hold spaces).
// `handed` says it came from the hand-over list, the only place a grant is believed: a
// hand-over on the channel (which anyone who may PUBLISH can forge) only wakes its owner.
void deliver(WakeTable& table, const std::string& message, bool handed) {
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
  if (!handed) return table.bump(name, message.substr(at));
  Handover grant;
  try {
    grant.fence = std::stoull(field[0]);
    grant.lease = milliseconds{std::stoll(field[1])};
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
        deliver(table, std::string(r->element[2]->str, r->element[2]->len), false);
  }

 private:
  Connection conn_;
  int fd_ = -1;
};

// The process's hand-over list: one BLPOP outstanding at a time, sent again after each answer.
// What is pushed while none is outstanding (or while the connection is re-made) waits in the
// list, so nothing is missed that way; a message that comes late is ignored (its token names
// an earlier attempt, RedisDriver::take_handover).
class HandedList final : public Subscription {
 public:
  HandedList(const Target& target, std::string key)
      : conn_(target, std::min(target.connect_timeout, milliseconds{1000})), key_(std::move(key)) {
    conn_.command({"PING"});  // connected and authenticated, as SUBSCRIBE's confirmation shows
    fd_ = conn_.context()->fd;
    pop();
  }
  int fd() const override { return fd_; }
  void read(WakeTable& table) override {
    conn_.read_available();
    while (auto r = conn_.take_buffered()) {
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING)
        deliver(table, std::string(r->element[1]->str, r->element[1]->len), true);
      else if (r->type != REDIS_REPLY_NIL)
        throw InternalError("redis: unexpected answer to BLPOP");
      pop();
    }
  }

 private:
  void pop() {
    conn_.append({"BLPOP", key_, "0"});
    conn_.flush();
  }
  Connection conn_;
  const std::string key_;
  int fd_ = -1;
};

}  // namespace

std::shared_ptr<RedisFeed> shared_release_feed(const std::vector<Target>& servers, const std::string& channel,
                                               bool handovers) {
  std::string key = channel + (handovers ? " handed" : "");
  std::vector<Subscribe> subscribe;
  for (const auto& t : servers) {
    key += '\n' + (t.sentinels ? t.sentinels->key() : t.host + ':' + std::to_string(t.port)) + '/' +
           std::to_string(t.db) + ' ' + t.user + ' ' + t.password;
    subscribe.push_back([t, channel] { return std::make_unique<RedisSubscription>(t, channel); });
  }
  return process_shared<RedisFeed>(key, [&] {
    std::string list;
    if (handovers) {
      list = keys::handed_prefix + random_hex128();
      subscribe.push_back([t = servers.front(), list] { return std::make_unique<HandedList>(t, list); });
    }
    return std::make_shared<RedisFeed>(std::move(subscribe), list);
  });
}

}  // namespace dblock::detail::redis
