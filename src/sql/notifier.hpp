// Notifier: how a SQL backend tells waiters that a lock was freed, if it can. The lease
// drivers call acquired() after a grant, released() after a release that freed the lock
// (not after a re-entrant hold's), dropped() when a lease turns out lost, and hand watch()
// to the waiting loop.
#pragma once

#include <memory>
#include <string>

#include "core/driver.hpp"

namespace dblock::detail::sql {

class Notifier {
 public:
  virtual ~Notifier() = default;
  // A grant (or re-entry) of `name` by this client: a backend whose waiters block on
  // something the holder keeps (MySQL) takes it here.
  virtual void acquired(const std::string& name) noexcept { (void)name; }
  virtual void released(const std::string& name) noexcept = 0;
  // The lease on `name` is no longer ours, without a release (it expired or was taken).
  virtual void dropped(const std::string& name) noexcept { (void)name; }
  virtual std::unique_ptr<ReleaseWatch> watch(const std::string& name) = 0;  // null: cannot now
};

}  // namespace dblock::detail::sql
