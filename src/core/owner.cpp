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

std::string make_client_identity() {
  std::random_device rd;
  std::uint64_t instance = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{}:{}:{:016x}", host_name(), getpid(), instance);
}

std::string thread_suffix() {
  static std::atomic<unsigned> next{1};
  thread_local const std::string suffix = ":t" + std::to_string(next.fetch_add(1));
  return suffix;
}

}  // namespace dblock::detail
