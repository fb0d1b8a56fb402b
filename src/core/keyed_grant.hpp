// KeyedGrant: the handle of a grant that its driver finds again on the server by name, owner
// and fence alone (a lease row, a Redis record): the handle is that key, and the driver's
// statements do the rest. Handles with state of their own (a pinned connection, a ZooKeeper
// node) are written by their drivers.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "core/driver.hpp"

namespace dblock::detail {

// Driver: renew(name, owner, fence, ttl, holds) -> Renewal; release(name, owner, fence) -> bool;
// release_after(name, owner, fence, keep) -> bool; renewal_batch() -> RenewalBatch* (null:
// each grant renews alone); optionally forget(name, fence), told of a grant the core declared
// lost (no I/O: it runs on the renewal thread).
template <class Driver, class = void>
struct forgets : std::false_type {};
template <class Driver>
struct forgets<Driver, std::void_t<decltype(std::declval<Driver&>().forget(std::string(), std::uint64_t{}))>>
    : std::true_type {};

template <class Driver>
class KeyedGrant final : public GrantHandle {
 public:
  KeyedGrant(Driver& driver, std::string name, std::string owner, std::uint64_t fence)
      : driver_(driver), key_{std::move(name), std::move(owner), fence} {}
  Renewal renew(milliseconds ttl, int holds) override {
    return driver_.renew(key_.name, key_.owner, key_.fence, ttl, holds);
  }
  bool release() override { return driver_.release(key_.name, key_.owner, key_.fence); }
  bool release_after(milliseconds keep) override {
    return driver_.release_after(key_.name, key_.owner, key_.fence, keep);
  }
  Batched batched() noexcept override { return {driver_.renewal_batch(), &key_}; }
  void lost() noexcept override {
    if constexpr (forgets<Driver>::value) driver_.forget(key_.name, key_.fence);
  }

 private:
  Driver& driver_;  // the core that owns the driver outlives every grant
  const GrantKey key_;
};

// A granted Attempt whose handle is a KeyedGrant.
template <class Driver>
Attempt keyed_grant(Driver& driver, const AcquireRequest& r, std::uint64_t fence, milliseconds remaining) {
  return Attempt{std::make_unique<KeyedGrant<Driver>>(driver, r.name, r.owner, fence), fence, remaining, nullptr};
}

}  // namespace dblock::detail
