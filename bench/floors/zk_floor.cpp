#include "bench/floors/zk_floor.hpp"

#include <fmt/format.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "bench/scenarios/handoff_tally.hpp"
#include "bench/support/run.hpp"  // kHandoffWorkers

namespace dblock_bench {

namespace {

using Clock = HandoffTally::Clock;

// One thread's session, and what its watches and pipelined calls report (on the C client's
// threads) to it.
class ZkFloorSession {
 public:
  ZkFloorSession(const std::string& hosts, const std::string& dir, int i)
      : dir_(dir), prefix_(fmt::format("{}/{:032x}__lock__", dir, i + 1)) {
    zh_ = zookeeper_init(hosts.c_str(), nullptr, 30000, nullptr, nullptr, 0);
    if (!zh_) throw std::runtime_error("zookeeper floor: cannot start a client for " + hosts);
    for (int k = 0; k < 500 && zoo_state(zh_) != ZOO_CONNECTED_STATE; ++k)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (zoo_state(zh_) != ZOO_CONNECTED_STATE)
      throw std::runtime_error("zookeeper floor: no session with " + hosts);
  }
  ~ZkFloorSession() { zookeeper_close(zh_); }  // before the members the C client's threads report to
  ZkFloorSession(const ZkFloorSession&) = delete;
  ZkFloorSession& operator=(const ZkFloorSession&) = delete;

  // Creates our node and lists the children right behind it, sent back to back: one round
  // trip (the server answers a session's requests in order, so the listing has the node).
  // Returns our node's name and czxid.
  std::pair<std::string, std::uint64_t> create_and_list(std::vector<std::string>* children) {
    Pipelined p;
    check(zoo_acreate2(zh_, prefix_.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL,
                       &Pipelined::on_create, &p),
          "create");
    check(zoo_aget_children(zh_, dir_.c_str(), 0, &Pipelined::on_list, &p), "list");
    std::unique_lock lk(p.mutex);
    p.done.wait(lk, [&] { return p.pending == 0; });
    check(p.create_rc, "create");
    check(p.list_rc, "list");
    *children = std::move(p.names);
    return {p.created.substr(p.created.rfind('/') + 1), static_cast<std::uint64_t>(p.czxid)};
  }
  void list(std::vector<std::string>* children) {
    String_vector v{};
    check(zoo_get_children(zh_, dir_.c_str(), 0, &v), "list");
    children->assign(v.data, v.data + v.count);
    deallocate_String_vector(&v);
  }
  // A data watch on `node`: false when it is gone already (then nothing is watched).
  bool watch(const std::string& node) {
    {
      std::lock_guard lk(m_);
      fired_ = false;
    }
    char byte;
    int len = 1;
    int rc =
        zoo_wget(zh_, (dir_ + "/" + node).c_str(), &ZkFloorSession::on_watch, this, &byte, &len, nullptr);
    if (rc == ZNONODE) return false;
    check(rc, "watch");
    return true;
  }
  // Until the watch fired, or 100 ms (the caller checks for the stop and waits again).
  bool wait_fired() {
    std::unique_lock lk(m_);
    return fired_cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return fired_; });
  }
  void remove(const std::string& node) { check(zoo_delete(zh_, (dir_ + "/" + node).c_str(), -1), "delete"); }

 private:
  struct Pipelined {
    std::mutex mutex;
    std::condition_variable done;
    int pending = 2;
    int create_rc = ZSYSTEMERROR, list_rc = ZSYSTEMERROR;
    std::string created;
    std::int64_t czxid = 0;
    std::vector<std::string> names;

    static void on_create(int rc, const char* path, const struct Stat* st, const void* data) {
      auto* p = static_cast<Pipelined*>(const_cast<void*>(data));
      std::lock_guard lk(p->mutex);
      p->create_rc = rc;
      if (rc == ZOK) p->created = path, p->czxid = st->czxid;
      if (--p->pending == 0) p->done.notify_all();
    }
    static void on_list(int rc, const struct String_vector* v, const void* data) {
      auto* p = static_cast<Pipelined*>(const_cast<void*>(data));
      std::lock_guard lk(p->mutex);
      p->list_rc = rc;
      if (rc == ZOK) p->names.assign(v->data, v->data + v->count);
      if (--p->pending == 0) p->done.notify_all();
    }
  };
  static void on_watch(zhandle_t*, int, int, const char*, void* self) {
    auto* s = static_cast<ZkFloorSession*>(self);
    std::lock_guard lk(s->m_);
    s->fired_ = true;
    s->fired_cv_.notify_all();
  }
  static void check(int rc, const char* what) {
    if (rc != ZOK) throw std::runtime_error(fmt::format("zookeeper floor {}: {}", what, zerror(rc)));
  }

  std::mutex m_;
  std::condition_variable fired_cv_;
  bool fired_ = false;
  const std::string dir_, prefix_;
  zhandle_t* zh_ = nullptr;
};

// The child right before `mine` in sequence order (the last 10 digits), or "" when ours is first.
std::string predecessor(std::vector<std::string> children, const std::string& mine) {
  auto seq = [](const std::string& c) { return c.size() >= 10 ? c.substr(c.size() - 10) : c; };
  std::sort(children.begin(), children.end(), [&](const auto& a, const auto& b) { return seq(a) < seq(b); });
  auto at = std::find(children.begin(), children.end(), mine);
  if (at == children.end()) throw std::runtime_error("zookeeper floor: our node " + mine + " is gone");
  return at == children.begin() ? std::string() : *(at - 1);
}

void worker(ZkFloorSession& s, HandoffTally& t, std::size_t warmup, std::size_t n) {
  try {
    std::size_t released_grant = static_cast<std::size_t>(-1);
    std::vector<std::string> children;
    for (;;) {
      {  // no barging: contend again only once another thread got the lock
        std::unique_lock lk(t.m);
        t.cv.wait(lk, [&] { return t.stop || t.grants != released_grant; });
        if (t.stop) return;
      }
      auto [mine, czxid] = s.create_and_list(&children);
      bool quit = false;
      for (auto before = predecessor(children, mine); !before.empty() && !quit;) {
        if (s.watch(before))
          while (!s.wait_fired()) {
            std::lock_guard lk(t.m);
            if ((quit = t.stop)) break;
          }
        if (quit) break;
        s.list(&children);
        before = predecessor(children, mine);
      }
      const auto got = Clock::now();
      {
        std::lock_guard lk(t.m);
        quit = quit || t.stop;
        if (!quit) {
          t.granted(czxid, got, warmup, n);  // dblock's fence: the node's czxid
          released_grant = t.grants;
          t.released_at = Clock::now();
        }
      }
      s.remove(mine);
      if (quit) return;
    }
  } catch (...) {
    t.fail(std::current_exception());
  }
}

}  // namespace

std::vector<double> run_zk_floor_handoff(const std::string& hosts, const std::string& dir, std::size_t warmup,
                                         std::size_t n) {
  const std::string label = "zookeeper/bare-watch-handoff";
  fmt::print(stderr, "dblock-bench: {}: {} threads, {} + {} warm-up hand-offs\n", label, kHandoffWorkers, n,
             warmup);
  std::vector<std::unique_ptr<ZkFloorSession>> sessions;  // outlive the threads
  for (int i = 0; i < kHandoffWorkers; ++i)
    sessions.push_back(std::make_unique<ZkFloorSession>(hosts, dir, i));
  HandoffTally t(label);
  t.samples.reserve(n);
  std::vector<std::thread> threads;
  for (auto& s : sessions) threads.emplace_back(worker, std::ref(*s), std::ref(t), warmup, n);
  t.await(threads, n);
  auto sum = summarize(t.samples);
  fmt::print(stderr, "dblock-bench: {}: {} hand-offs, p50 {:.1f} us, p99 {:.1f} us\n", label, sum.samples,
             sum.p50_us, sum.p99_us);
  return std::move(t.samples);
}

}  // namespace dblock_bench
