// Typed errors: one base class and a few kinds a caller can act on.
#pragma once

#include <stdexcept>
#include <string>

#include "dblock/export.hpp"

namespace dblock {

enum class ErrorKind {
  usage,        // bad input: name, URL, table identifier, duration, strategy (CLI exit 64)
  unavailable,  // backend unreachable, credentials refused, connection broken (69)
  schema,       // lock table missing or migrations changed after they ran (78)
  timeout,      // a statement or connection attempt ran past its timeout (69)
  not_owner,    // release or renew by someone who does not hold the lock (70)
  lost,         // the lease was lost before it was released (76)
  internal,     // a bug or an unexpected backend answer (70)
};

class DBLOCK_EXPORT Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

struct DBLOCK_EXPORT UsageError : Error {
  explicit UsageError(const std::string& m) : Error(ErrorKind::usage, m) {}
};
struct DBLOCK_EXPORT UnavailableError : Error {
  explicit UnavailableError(const std::string& m) : Error(ErrorKind::unavailable, m) {}
};
struct DBLOCK_EXPORT SchemaError : Error {
  explicit SchemaError(const std::string& m) : Error(ErrorKind::schema, m) {}
};
struct DBLOCK_EXPORT TimeoutError : Error {
  explicit TimeoutError(const std::string& m) : Error(ErrorKind::timeout, m) {}
};
struct DBLOCK_EXPORT NotOwnerError : Error {
  explicit NotOwnerError(const std::string& m) : Error(ErrorKind::not_owner, m) {}
};
struct DBLOCK_EXPORT LockLostError : Error {
  explicit LockLostError(const std::string& m) : Error(ErrorKind::lost, m) {}
};
struct DBLOCK_EXPORT InternalError : Error {
  explicit InternalError(const std::string& m) : Error(ErrorKind::internal, m) {}
};

}  // namespace dblock
