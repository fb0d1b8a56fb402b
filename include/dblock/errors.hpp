/// @file
/// Typed errors: one base class and a few kinds a caller can act on.
#pragma once

#include <stdexcept>
#include <string>

#include "dblock/export.hpp"

namespace dblock {

/// What went wrong, for callers that branch on it (the CLI maps each to an exit code).
enum class ErrorKind {
  usage,        ///< bad input: name, URL, table identifier, duration, strategy (CLI exit 64)
  unavailable,  ///< backend unreachable, credentials refused, connection broken (69)
  schema,       ///< lock table missing or migrations changed after they ran (78)
  timeout,      ///< a statement or connection attempt ran past its timeout (69)
  busy,         ///< the lock is held by someone else and the call cannot wait for it (75)
  not_owner,    ///< release or renew by someone who does not hold the lock (70)
  lost,         ///< the lease was lost before it was released (76)
  cancelled,    ///< an asynchronous acquire was cancelled, or its Client closed, before a grant (75)
  internal,     ///< a bug or an unexpected backend answer (70)
};

/// The base of every error dblock throws; what() is one line, never a password.
class DBLOCK_EXPORT Error : public std::runtime_error {
 public:
  /// An error of this kind with this one-line message.
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }  ///< which kind

 private:
  ErrorKind kind_;
};

/// Bad input: nothing was written.
struct DBLOCK_EXPORT UsageError : Error {
  /// With a one-line message.
  explicit UsageError(const std::string& m) : Error(ErrorKind::usage, m) {}
};
/// The backend could not be reached or refused us.
struct DBLOCK_EXPORT UnavailableError : Error {
  /// With a one-line message.
  explicit UnavailableError(const std::string& m) : Error(ErrorKind::unavailable, m) {}
};
/// The server answered but had no connection slot free: PostgreSQL's `max_connections` or a
/// role's `CONNECTION LIMIT`, MySQL's `max_connections` or an account's `max_user_connections`,
/// Redis' `maxclients`.
/// A slot frees when another client leaves, so an acquire that may still wait connects again
/// (every 0.1-1 s) until its wait ends; this is thrown when it could not wait, or its wait
/// ended with the server still full. A caller that waits in slices of its own (as `dblock run`
/// does) goes on waiting on it.
struct DBLOCK_EXPORT ServerFullError : UnavailableError {
  /// With a one-line message.
  explicit ServerFullError(const std::string& m) : UnavailableError(m) {}
};
/// The lock table is missing or its migrations changed: run `dblock migrate`.
struct DBLOCK_EXPORT SchemaError : Error {
  /// With a one-line message.
  explicit SchemaError(const std::string& m) : Error(ErrorKind::schema, m) {}
};
/// A statement or connection ran past its timeout.
struct DBLOCK_EXPORT TimeoutError : Error {
  /// With a one-line message.
  explicit TimeoutError(const std::string& m) : Error(ErrorKind::timeout, m) {}
};
/// The lock is held by someone else, and the call could not wait for it (LockTable::lock_in
/// behind a lease it cannot wait out): not a timeout, and nothing is wrong with the server.
struct DBLOCK_EXPORT BusyError : Error {
  /// With a one-line message.
  explicit BusyError(const std::string& m) : Error(ErrorKind::busy, m) {}
};
/// An unlock by a thread that holds nothing.
struct DBLOCK_EXPORT NotOwnerError : Error {
  /// With a one-line message.
  explicit NotOwnerError(const std::string& m) : Error(ErrorKind::not_owner, m) {}
};
/// The lease was lost before it was released.
struct DBLOCK_EXPORT LockLostError : Error {
  /// With a one-line message.
  explicit LockLostError(const std::string& m) : Error(ErrorKind::lost, m) {}
};
/// An asynchronous acquire (Lock::async_acquire) ended by PendingAcquire::cancel, or by its
/// Client's destruction, before it was granted: its place in the line is given up, and a
/// grant that raced the cancel is released.
struct DBLOCK_EXPORT CancelledError : Error {
  /// With a one-line message.
  explicit CancelledError(const std::string& m) : Error(ErrorKind::cancelled, m) {}
};
/// A bug, or an answer the backend should not give.
struct DBLOCK_EXPORT InternalError : Error {
  /// With a one-line message.
  explicit InternalError(const std::string& m) : Error(ErrorKind::internal, m) {}
};

}  // namespace dblock
