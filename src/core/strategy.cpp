#include <array>
#include <string>
#include <utility>

#include "dblock/errors.hpp"
#include "dblock/options.hpp"

namespace dblock {
namespace {
constexpr std::array<std::pair<Strategy, std::string_view>, 7> names{{
    {Strategy::insert, "insert"},
    {Strategy::for_update, "for-update"},
    {Strategy::optimistic, "optimistic"},
    {Strategy::advisory, "advisory"},
    {Strategy::redis, "redis"},
    {Strategy::redlock, "redlock"},
    {Strategy::zookeeper, "zookeeper"},
}};
}  // namespace

std::string_view to_string(Strategy s) noexcept {
  for (auto& [strategy, name] : names)
    if (strategy == s) return name;
  return "unknown";
}

Strategy parse_strategy(std::string_view text) {
  for (auto& [strategy, name] : names)
    if (name == text) return strategy;
  throw UsageError("unknown strategy '" + std::string(text) +
                   "': expected insert, for-update, optimistic, advisory, redis, redlock or zookeeper");
}

}  // namespace dblock
