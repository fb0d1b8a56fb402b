// HangupWatch on socket pairs: the peer's close is reported once; an unwatched socket never is.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "core/hangup_watch.hpp"
#include "support/eventually.hpp"

using namespace std::chrono_literals;
using dblock::detail::HangupWatch;
using dblock::test::eventually;

namespace {
struct Pair {
  int fd[2];
  Pair() { REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0); }
  ~Pair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_peer() {
    ::close(fd[1]);
    fd[1] = -1;
  }
};
}  // namespace

TEST_CASE("hangup watch: a peer's close is reported once, data is not", "[unit]") {
  HangupWatch watch;
  Pair a, b;
  std::atomic<int> calls_a{0}, calls_b{0};
  auto ra = watch.watch(a.fd[0], [&] { calls_a++; });
  auto rb = watch.watch(b.fd[0], [&] { calls_b++; });
  REQUIRE(::write(a.fd[1], "x", 1) == 1);  // data to read is no hang-up
  std::this_thread::sleep_for(100ms);
  CHECK(calls_a == 0);
  a.close_peer();
  REQUIRE(eventually([&] { return calls_a.load() == 1; }, 2s));
  std::this_thread::sleep_for(100ms);
  CHECK(calls_a == 1);  // once
  CHECK(calls_b == 0);
}

TEST_CASE("hangup watch: after reset the callback never runs; a callback may reset itself", "[unit]") {
  HangupWatch watch;
  Pair a, b;
  std::atomic<int> calls{0};
  auto ra = watch.watch(a.fd[0], [&] { calls++; });
  ra.reset();
  a.close_peer();
  std::this_thread::sleep_for(100ms);
  CHECK(calls == 0);

  std::mutex m;  // orders the assignment below before the callback, for TSan too
  HangupWatch::Registration rb;
  auto registration = watch.watch(b.fd[0], [&] {
    std::lock_guard lk(m);
    rb.reset();  // as a release from on_lost does: must not wait for itself
    calls++;
  });
  {
    std::lock_guard lk(m);
    rb = std::move(registration);
  }
  b.close_peer();
  REQUIRE(eventually([&] { return calls.load() == 1; }, 2s));
}
