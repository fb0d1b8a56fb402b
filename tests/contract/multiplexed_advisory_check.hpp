// Multiplexed advisory locks (issue 47), for the PostgreSQL and MariaDB tests: one Client's
// advisory locks share a few connections. 1,000 held use at most 10 of the server's; a shared
// connection ended by the server loses each of its locks, each reported once, and only those:
// the others stay held and exclusive, and each freed name can be taken by another Client.
#pragma once

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dblock/dblock.hpp"
#include "support/eventually.hpp"
#include "support/servers.hpp"

namespace dblock::test {

// This process's connections: its distinct sockets (a descriptor and its duplicate, which
// MySQL's hang-up watch polls, are one), whoever else uses the server meanwhile.
inline std::size_t process_sockets() {
  std::set<std::string> sockets;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:", 0) == 0) sockets.insert(target);
  }
  return sockets.size();
}

// `end_holder(name)` ends the server connection holding the name's advisory lock (an
// administrator's kill).
inline void check_multiplexed_advisory(const Namespace& ns, const std::function<void(const std::string&)>& end_holder) {
  const auto connections = [] { return static_cast<double>(process_sockets()); };
  using namespace std::chrono_literals;
  constexpr int count = 1000;
  auto a = ns.open(), b = ns.open();
  LockOptions o;
  o.strategy = Strategy::advisory;
  o.ttl = 3s;
  std::mutex m;
  std::multiset<std::uint64_t> lost;
  o.on_lost = [&](const std::string&, std::uint64_t fence) {
    std::lock_guard lk(m);
    lost.insert(fence);
  };
  auto name = [](int i) { return "multiplexed-" + std::to_string(i); };
  const double before = connections();
  // Four threads take them together, as a busy service would: sessions opened side by side
  // must stay within the limit too (they once reached 11).
  std::vector<std::optional<Lease>> taken(count);
  {
    std::vector<std::thread> takers;
    for (int t = 0; t < 4; ++t)
      takers.emplace_back([&, t] {
        for (int i = t; i < count; i += 4) {
          // Half by try, half by a timed wait (which the server would block on, were the name taken).
          auto lock = a->lock(name(i), o);
          taken[static_cast<std::size_t>(i)] = i % 2 == 0 ? lock.try_acquire() : lock.try_acquire(5s);
        }
      });
    for (auto& t : takers) t.join();
  }
  std::vector<Lease> held;
  for (auto& l : taken) {
    REQUIRE(l);
    held.push_back(std::move(*l));
  }
  CHECK(connections() - before <= 10);

  // A shared connection ended: its locks, and only they, are lost and free.
  end_holder(name(0));
  REQUIRE(eventually([&] { return held[0].lost(); }, 10s));
  std::this_thread::sleep_for(1500ms);  // a renewal tick: any other loss would be reported by now
  std::size_t gone = 0;
  for (int i = 0; i < count; ++i) {
    const auto& l = held[static_cast<std::size_t>(i)];
    if (!l.lost()) continue;
    ++gone;
    CHECK(b->lock(name(i), o).try_acquire());  // freed on the server, and given back at once
  }
  CHECK(gone < static_cast<std::size_t>(count));  // the other sessions' locks are not touched
  {
    std::lock_guard lk(m);
    CHECK(lost.size() == gone);  // each loss reported once
    for (auto f : lost) CHECK(lost.count(f) == 1);
  }
  for (int i = 0; i < count; i += 37)
    if (!held[static_cast<std::size_t>(i)].lost()) CHECK_FALSE(b->lock(name(i), o).try_acquire());

  // A release frees its one name: the session keeps the others.
  int released = 0;
  for (int i = 0; i < count && released < 5; ++i) {
    auto& l = held[static_cast<std::size_t>(i)];
    if (l.lost()) continue;
    l.release();
    CHECK(b->lock(name(i), o).try_acquire());
    ++released;
    if (i + 1 < count && !held[static_cast<std::size_t>(i + 1)].lost())
      CHECK_FALSE(b->lock(name(i + 1), o).try_acquire());
  }
  for (auto& l : held)
    if (!l.lost()) l.release();
  CHECK(eventually([&] { return connections() - before <= 10; }, 5s));  // no session left open but the idle ones
}

}  // namespace dblock::test
