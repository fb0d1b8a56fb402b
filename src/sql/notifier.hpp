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
  // Null: cannot now.
  virtual std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) = 0;
};

}  // namespace dblock::detail::sqldb
