// Backoff (src/core/backoff.hpp): bounds of every pause, growth, reset. Purely arithmetic:
// next() only computes a pause, nothing here sleeps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <random>

#include "core/backoff.hpp"

using dblock::detail::Backoff;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {
constexpr int iterations = 20'000;
}

TEST_CASE("Backoff: pauses never exceed the default cap of 100 ms and never fall below 100 us", "[backoff]") {
  Backoff b;
  for (int i = 0; i < iterations; ++i) {
    auto p = b.next(milliseconds(0));
    INFO("iteration " << i << ": " << p.count() << " us");
    REQUIRE(p <= microseconds(100'000));
    REQUIRE(p >= microseconds(100));
  }
}

TEST_CASE("Backoff: the 100 us floor holds even for a zero first step", "[backoff]") {
  Backoff b(milliseconds(0), milliseconds(100));
  for (int i = 0; i < 1000; ++i) {
    auto p = b.next(milliseconds(i % 3));
    REQUIRE(p >= microseconds(100));
    REQUIRE(p <= microseconds(100'000));
  }
}

TEST_CASE("Backoff: a known holder_remaining caps the pause at holder_remaining + 0.5 ms", "[backoff]") {
  Backoff b;
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> remaining_ms(1, 250);
  std::uniform_int_distribution<int> reset_one_in(0, 50);
  for (int i = 0; i < iterations; ++i) {
    if (reset_one_in(rng) == 0) b.reset();
    milliseconds h(remaining_ms(rng));
    auto p = b.next(h);
    INFO("iteration " << i << ": holder_remaining " << h.count() << " ms, pause " << p.count() << " us");
    REQUIRE(p <= std::chrono::duration_cast<microseconds>(h) + microseconds(500));
    REQUIRE(p <= microseconds(100'000));
    REQUIRE(p >= microseconds(100));
  }
}

TEST_CASE("Backoff: holder_remaining of 1 ms caps a fully grown step", "[backoff]") {
  Backoff b;
  for (int i = 0; i < 20; ++i) b.next(milliseconds(0));  // grow to the cap
  for (int i = 0; i < 1000; ++i) {
    auto p = b.next(milliseconds(1));
    REQUIRE(p <= microseconds(1500));
    REQUIRE(p >= microseconds(100));
  }
}

TEST_CASE("Backoff: zero holder_remaining means unknown and does not cap", "[backoff]") {
  Backoff b;
  for (int i = 0; i < 20; ++i) b.next(milliseconds(0));
  // Fully grown, the pause is at least a few ms whatever the jitter.
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(b.next(milliseconds(0)) > microseconds(1500));
  }
}

TEST_CASE("Backoff: a custom cap is never exceeded", "[backoff]") {
  Backoff b(milliseconds(5), milliseconds(20));
  for (int i = 0; i < iterations; ++i) {
    auto p = b.next(milliseconds(0));
    REQUIRE(p <= microseconds(20'000));
    REQUIRE(p >= microseconds(100));
  }
}

TEST_CASE("Backoff: a cap below the first step is raised to the first step", "[backoff]") {
  Backoff b(milliseconds(10), milliseconds(1));
  for (int i = 0; i < 1000; ++i) {
    auto p = b.next(milliseconds(0));
    REQUIRE(p <= microseconds(10'000));
    REQUIRE(p >= microseconds(100));
  }
}

TEST_CASE("Backoff: pauses start at about the first step and grow", "[backoff]") {
  for (int trial = 0; trial < 200; ++trial) {
    Backoff b;  // first 1 ms, cap 100 ms
    auto first = b.next(milliseconds(0));
    REQUIRE(first <= microseconds(1000));
    // Growth is at most exponential: the k-th pause is at most first_step * 2^k.
    microseconds bound(1000), last{};
    for (int k = 1; k < 12; ++k) {
      bound = std::min(bound * 2, microseconds(100'000));
      last = b.next(milliseconds(0));
      REQUIRE(last <= bound);
    }
    // ...and it did grow: well past the first step (equal jitter keeps at least half a step).
    CHECK(last >= microseconds(10'000));
    CHECK(last > first);
  }
}

TEST_CASE("Backoff: reset() returns to small pauses", "[backoff]") {
  Backoff b;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 15; ++i) b.next(milliseconds(0));
    auto grown = b.next(milliseconds(0));
    REQUIRE(grown >= microseconds(10'000));
    b.reset();
    auto p = b.next(milliseconds(0));
    INFO("round " << round << ": after reset " << p.count() << " us");
    REQUIRE(p <= microseconds(1000));
    REQUIRE(p >= microseconds(100));
    // The step grows again from the first one, not from where it was.
    REQUIRE(b.next(milliseconds(0)) <= microseconds(2000));
  }
}
