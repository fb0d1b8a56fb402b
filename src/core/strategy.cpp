#include <array>
#include <string>
#include <utility>

#include "core/driver.hpp"
#include "dblock/errors.hpp"
#include "dblock/options.hpp"

namespace dblock {
namespace {
struct Known {
  Strategy strategy;
  std::string_view name;
  bool lease;
};
constexpr std::array<Known, 8> known{{
    {Strategy::insert, "insert", true},
    {Strategy::for_update, "for-update", false},
    {Strategy::optimistic, "optimistic", true},
    {Strategy::advisory, "advisory", false},
    {Strategy::redis, "redis", true},
    {Strategy::redlock, "redlock", true},
    {Strategy::zookeeper, "zookeeper", false},
    {Strategy::etcd, "etcd", false},
}};
}  // namespace

std::string_view to_string(Strategy s) noexcept {
  for (auto& k : known)
    if (k.strategy == s) return k.name;
  return "unknown";
}

std::string_view to_string(Mode m) noexcept { return m == Mode::shared ? "shared" : "exclusive"; }

std::string detail::not_offered(Strategy strategy, std::string_view backend, const std::vector<Strategy>& offered) {
  std::string offers;
  for (auto s : offered) offers += (offers.empty() ? "" : ", ") + std::string(to_string(s));
  return "strategy '" + std::string(to_string(strategy)) + "' is not offered by the " + std::string(backend) +
         " backend (it offers " + offers + ")";
}

bool detail::is_lease(Strategy s) noexcept {
  for (auto& k : known)
    if (k.strategy == s) return k.lease;
  return false;
}

Strategy parse_strategy(std::string_view text) {
  for (auto& k : known)
    if (k.name == text) return k.strategy;
  throw UsageError("unknown strategy '" + std::string(text) +
                   "': expected insert, for-update, optimistic, advisory, redis, redlock, zookeeper or etcd");
}

}  // namespace dblock
