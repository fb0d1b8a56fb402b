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

// ClientCore::release and Watchdog::let_go cancel under the grant's `use`, and the callback
// (the user's on_lost) may take `use` itself (it unlocks its lease). Cancelling must not wait
// for it; wait() afterwards, holding nothing, returns only once it has returned.
TEST_CASE("hangup watch: cancel never waits for a callback under way; wait does", "[unit]") {
  HangupWatch watch;
  Pair a;
  std::mutex use;  // stands for Grant::use
  std::atomic<int> entered{0}, finished{0};
  auto r = watch.watch(a.fd[0], [&] {
    entered++;
    std::lock_guard lk(use);  // on_lost releasing its lease
    finished++;
  });
  {
    std::lock_guard lk(use);
    a.close_peer();
    REQUIRE(eventually([&] { return entered.load() == 1; }, 2s));
    CHECK(r.cancel());  // the hang-up was seen first: the caller reports a loss
    CHECK(r.cancel());  // a second cancel (let_go after release) answers the same
    CHECK(finished == 0);
  }
  r.wait();
  CHECK(finished == 1);
}

TEST_CASE("hangup watch: cancelled before the hang-up, it is not reported", "[unit]") {
  HangupWatch watch;
  Pair a;
  std::atomic<int> calls{0};
  auto r = watch.watch(a.fd[0], [&] { calls++; });
  CHECK_FALSE(r.cancel());
  a.close_peer();
  std::this_thread::sleep_for(100ms);
  CHECK(calls == 0);
  r.wait();  // nothing under way: returns at once
}

// The kernel hands a closed socket's number to the next one opened. A registration cancelled
// before its socket was closed is never reported for whatever gets that number next, even
// while another registration watches the new socket under the same number.
TEST_CASE("hangup watch: a socket number reused after cancel is not reported for the old registration", "[unit]") {
  HangupWatch watch;
  std::atomic<int> old_calls{0}, new_calls{0};
  auto first = std::make_unique<Pair>();
  const int number = first->fd[0];
  auto old_registration = watch.watch(number, [&] { old_calls++; });
  CHECK_FALSE(old_registration.cancel());
  ::close(first->fd[0]);  // the handle closes its connection after the cancel
  first->fd[0] = -1;
  int fd[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd) == 0);
  int reused = fd[0] == number ? 0 : fd[1] == number ? 1 : -1;
  if (reused < 0) {  // the lowest free number is not ours: nothing to show here
    ::close(fd[0]);
    ::close(fd[1]);
    SUCCEED("the socket number was not reused");
    return;
  }
  auto new_registration = watch.watch(fd[reused], [&] { new_calls++; });
  ::close(fd[1 - reused]);  // the new connection's peer hangs up
  REQUIRE(eventually([&] { return new_calls.load() == 1; }, 2s));
  std::this_thread::sleep_for(100ms);
  CHECK(old_calls == 0);
  new_registration.reset();
  ::close(fd[reused]);
}
