// WakeTable (src/core/wake_table.hpp): which waiters of a name a release wakes. Waits that a
// bug would turn into a stall end at a 10 s deadline, so a broken table fails instead of
// hanging; the one wait that must NOT be woken early is short.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>

#include "core/wake_table.hpp"
#include "support/timed_wait.hpp"

using dblock::detail::Clock;
using dblock::detail::ReleaseWatch;
using dblock::detail::WakeTable;
using dblock::test::wait_on;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<ReleaseWatch> watch(const std::shared_ptr<WakeTable>& t, const std::string& name,
                                    const std::string& owner = "me") {
  std::lock_guard lk(t->mutex);
  return WakeTable::watch_locked(t, name, owner);
}

}  // namespace

TEST_CASE("a release wakes the first exclusive waiter of a name, not the others", "[wake]") {
  auto t = std::make_shared<WakeTable>();
  auto first = watch(t, "job"), second = watch(t, "job");
  auto other = watch(t, "other");
  auto second_waits = wait_on(*second, 400ms);
  auto other_waits = wait_on(*other, 400ms);
  std::this_thread::sleep_for(50ms);
  t->bump("job");
  auto t0 = Clock::now();
  first->wait_until(t0 + 10s);  // the release is its: it returns at once
  CHECK(Clock::now() - t0 < 5s);
  CHECK(second_waits.get() >= 400ms);
  CHECK(other_waits.get() >= 400ms);
}

TEST_CASE("a first waiter that leaves hands its wake-up to the next", "[wake]") {
  auto t = std::make_shared<WakeTable>();
  auto first = watch(t, "job"), second = watch(t, "job");
  auto second_waits = wait_on(*second, 10s);
  std::this_thread::sleep_for(50ms);
  t->bump("job");
  first.reset();  // e.g. it timed out instead of retrying
  CHECK(second_waits.get() < 5s);
}

TEST_CASE("a release that names the queue's next owner wakes that owner's waiter only", "[wake]") {
  auto t = std::make_shared<WakeTable>();
  auto first = watch(t, "job", "a"), second = watch(t, "job", "b");
  auto first_waits = wait_on(*first, 400ms);
  std::this_thread::sleep_for(50ms);
  t->bump("job", "b");
  auto t0 = Clock::now();
  second->wait_until(t0 + 10s);  // named next: it returns at once, though not first in line
  CHECK(Clock::now() - t0 < 5s);
  CHECK(first_waits.get() >= 400ms);
}

TEST_CASE("a release naming another process's owner wakes nobody here", "[wake]") {
  auto t = std::make_shared<WakeTable>();
  auto first = watch(t, "job", "a");
  t->bump("job", "elsewhere");
  auto t0 = Clock::now();
  first->wait_until(t0 + 300ms);
  CHECK(Clock::now() - t0 >= 300ms);
}

TEST_CASE("a named wake-up that comes between two waits is not lost", "[wake]") {
  auto t = std::make_shared<WakeTable>();
  auto w = watch(t, "job", "a");
  t->bump("job", "a");  // while the waiter was busy with an attempt
  auto t0 = Clock::now();
  w->wait_until(t0 + 10s);
  CHECK(Clock::now() - t0 < 5s);
}

namespace {

// An armed watch's wake-up, as a future the test waits on (a broken table times out).
struct Armed {
  std::shared_ptr<std::promise<void>> fired = std::make_shared<std::promise<void>>();
  std::future<void> future = fired->get_future();
  std::function<void()> wake() {
    return [p = fired] { p->set_value(); };
  }
  bool came(std::chrono::milliseconds within) { return future.wait_for(within) == std::future_status::ready; }
};

}  // namespace

TEST_CASE("an armed watch calls back once for a release, and a disarmed one never", "[wake]") {
  auto t = std::make_shared<WakeTable>();
  auto first = watch(t, "job"), second = watch(t, "job");
  Armed a, b;
  REQUIRE(first->arm(a.wake()));
  REQUIRE(second->arm(b.wake()));
  CHECK_FALSE(a.came(50ms));
  t->bump("job");
  CHECK(a.came(10s));
  CHECK_FALSE(b.came(50ms));  // only the first in line is woken
  Armed again;
  REQUIRE(first->arm(again.wake()));
  second->disarm();
  first.reset();  // it leaves: its wake-up would go to the second, which is disarmed
  t->bump("job");
  CHECK_FALSE(b.came(50ms));
}

TEST_CASE("a release that came before the watch was armed wakes it as it is armed", "[wake]") {
  auto t = std::make_shared<WakeTable>();
  auto w = watch(t, "job");
  t->bump("job");
  Armed a;
  REQUIRE(w->arm(a.wake()));
  CHECK(a.came(10s));
  Armed interrupted;
  REQUIRE(w->arm(interrupted.wake()));
  CHECK_FALSE(interrupted.came(50ms));  // the release was seen: nothing new
  w->interrupt();
  CHECK(interrupted.came(10s));
}
