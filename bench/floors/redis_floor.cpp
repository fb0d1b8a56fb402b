#include "bench/floors/redis_floor.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <poll.h>

#include <cstdint>
#include <memory>
#include <stdexcept>

#include "bench/floors/floor.hpp"
#include "core/url.hpp"  // the library's own URL parser: the floor reaches the same server

namespace dblock_bench {

namespace {

struct Free {
  void operator()(redisContext* c) const { redisFree(c); }
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, Free>;

// A connection to the URL's (first) server, authenticated as the URL says.
class RedisConn {
 public:
  explicit RedisConn(const std::string& url) {
    auto u = dblock::detail::parse_url(url);
    const auto& hp = u.hosts.at(0);
    c_.reset(redisConnect(hp.host.empty() ? "127.0.0.1" : hp.host.c_str(), hp.port ? hp.port : 6379));
    if (!c_ || c_->err)
      throw std::runtime_error("redis floor: cannot connect: " + std::string(c_ ? c_->errstr : "?"));
    if (!u.password.empty()) {
      if (u.user.empty())
        command({"AUTH", u.password});
      else
        command({"AUTH", u.user, u.password});
    }
  }
  // One command, one round trip; an error reply throws.
  Reply command(const std::vector<std::string>& args) {
    std::vector<const char*> p;
    std::vector<size_t> len;
    for (const auto& a : args) p.push_back(a.c_str()), len.push_back(a.size());
    Reply r(static_cast<redisReply*>(
        redisCommandArgv(c_.get(), static_cast<int>(args.size()), p.data(), len.data())));
    if (!r) throw std::runtime_error("redis floor: " + std::string(c_->errstr));
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("redis floor: " + std::string(r->str, r->len));
    return r;
  }
  long long integer(const std::vector<std::string>& args) {
    auto r = command(args);
    if (r->type != REDIS_REPLY_INTEGER)
      throw std::runtime_error("redis floor: " + args.at(0) + " did not answer a number");
    return r->integer;
  }
  redisContext* get() const { return c_.get(); }

 private:
  std::unique_ptr<redisContext, Free> c_;
};

// The grant: the key, then the fence, in one atomic step; 0 when the key is taken.
const char* const kTake =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end "
    "return 0";
// The release: only the owner's key goes, and the waiters hear of it.
const char* const kFree =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "redis.call('DEL', KEYS[1]); redis.call('PUBLISH', ARGV[2], KEYS[1]); return 1 end return 0";

struct Keys {
  std::string key, fence, channel;
};

class RedisFloorSession final : public FloorSession {
 public:
  RedisFloorSession(const std::string& url, const Keys& k, int i)
      : c_(url), k_(k), owner_(fmt::format("floor-{}", i)) {
    take_ = script(kTake);
    free_ = script(kFree);
  }
  std::uint64_t grant() override {
    return static_cast<std::uint64_t>(c_.integer({"EVALSHA", take_, "2", k_.key, k_.fence, owner_, "30000"}));
  }
  void release(std::uint64_t) override {
    if (c_.integer({"EVALSHA", free_, "1", k_.key, owner_, k_.channel}) != 1)
      throw std::runtime_error("redis floor hand-off: the release found the key not ours");
  }

 private:
  std::string script(const char* text) {
    auto r = c_.command({"SCRIPT", "LOAD", text});
    return std::string(r->str, r->len);
  }
  RedisConn c_;
  const Keys& k_;
  std::string owner_, take_, free_;
};

// The subscriber: one connection, one wake per message.
void listen(const std::string& url, const std::string& channel, FloorWakes& wakes) {
  RedisConn c(url);
  c.command({"SUBSCRIBE", channel});  // answers once subscribed
  wakes.ready();
  while (!wakes.stopped()) {
    pollfd p{c.get()->fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if (redisBufferRead(c.get()) != REDIS_OK) throw std::runtime_error("redis floor: the subscription broke");
    void* r = nullptr;
    while (redisGetReplyFromReader(c.get(), &r) == REDIS_OK && r) {
      Reply reply(static_cast<redisReply*>(r));
      r = nullptr;
      if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
          reply->element[0]->type == REDIS_REPLY_STRING &&
          std::string(reply->element[0]->str, reply->element[0]->len) == "message")
        wakes.one();
    }
  }
}

}  // namespace

std::vector<double> run_redis_floor_handoff(const std::string& url, const std::string& prefix,
                                            std::size_t warmup, std::size_t n) {
  const Keys k{prefix + ":floor", prefix + ":floor:fence", prefix + ":floor:released"};
  FloorSpec spec;
  spec.label = "redis/bare-pubsub-handoff";
  spec.open = [&](int i) { return std::make_unique<RedisFloorSession>(url, k, i); };
  spec.listen = [&](FloorWakes& wakes) { listen(url, k.channel, wakes); };
  return run_floor_handoff(spec, warmup, n);
}

}  // namespace dblock_bench
