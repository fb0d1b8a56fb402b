// Notifier: how a SQL backend tells waiters that a lock was freed, if it can. The lease
// drivers call released() after a release that freed the lock, and hand watch() to the
// waiting loop.
#pragma once

#include <memory>
#include <string>

#include "core/driver.hpp"

namespace dblock::detail::sqldb {

class Notifier {
 public:
  virtual ~Notifier() = default;
  virtual void released(const std::string& name) noexcept = 0;
  virtual std::unique_ptr<ReleaseWatch> watch(const std::string& name) = 0;  // null: cannot now
};

}  // namespace dblock::detail::sqldb
