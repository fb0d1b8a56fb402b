#include "core/owner.hpp"

#include <unistd.h>

#include <atomic>
#include <random>

#include <fmt/format.h>

namespace dblock::detail {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

std::uint64_t random64() {
  // Seeded with 128 bits (one 32-bit seed would make two of 10,000 processes share a
  // sequence about once in a hundred fleets), and again in a forked child, which would
  // otherwise repeat its parent's.
  thread_local pid_t seeded_in = 0;
  thread_local std::mt19937_64 rng;
  if (const pid_t pid = getpid(); pid != seeded_in) {
    std::random_device rd;
    std::seed_seq seed{rd(), rd(), rd(), rd()};
    rng.seed(seed);
    seeded_in = pid;
  }
  return rng();
}

std::string random_hex128() {
  const auto high = random64();
  return fmt::format("{:016x}{:016x}", high, random64());
}

std::string make_client_identity() { return fmt::format("{}:{}:{:016x}", host_name(), getpid(), random64()); }

std::string thread_suffix() {
  static std::atomic<unsigned> next{1};
  thread_local const std::string suffix = ":t" + std::to_string(next.fetch_add(1));
  return suffix;
}

}  // namespace dblock::detail
