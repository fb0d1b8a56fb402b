/// @file
/// Boost.Asio completion tokens for Lock::async_acquire and Lease::async_release: a callback,
/// `use_future`, or, in a C++20 coroutine,
/// `co_await dblock::asio::async_acquire(lock, wait, boost::asio::use_awaitable)`.
/// Header-only, in the CMake target dblock::asio (dblock::dblock and Boost's headers): the
/// library itself does not depend on Boost.
///
/// The operation completes with `void(std::exception_ptr, std::optional<Lease>)`: in a
/// coroutine, co_await returns the optional Lease (empty when the wait ran out) and throws the
/// error. The handler runs on its associated executor (the coroutine's, for use_awaitable),
/// never on dblock's event thread, and the work it stands for keeps that executor's
/// io_context running while the lock is waited for.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "dblock/lock.hpp"

namespace dblock::asio {

namespace detail {

// A handler (often move-only) and a work guard on its executor, which keeps its io_context
// running while dblock works, in one shared state: dblock's callbacks are std::functions,
// which copy.
template <class Handler>
struct Completion {
  Handler handler;
  boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work;
};
template <class Handler>
std::shared_ptr<Completion<Handler>> completion(Handler handler) {
  auto executor = boost::asio::get_associated_executor(handler);
  return std::make_shared<Completion<Handler>>(
      Completion<Handler>{std::move(handler), boost::asio::make_work_guard(executor)});
}
// Calls the handler with `args` on its executor, never on dblock's event thread.
template <class Handler, class... Args>
void complete(const std::shared_ptr<Completion<Handler>>& c, Args... args) {
  auto ex = c->work.get_executor();
  boost::asio::post(ex, [c, args = std::make_tuple(std::move(args)...)]() mutable {
    c->work.reset();
    std::apply([&](auto&... a) { std::move(c->handler)(std::move(a)...); }, args);
  });
}

}  // namespace detail

/// The completion signature of async_acquire.
using AcquireSignature = void(std::exception_ptr, std::optional<Lease>);

/// Lock::async_acquire, completed through an Asio completion token. `wait` as there (unset:
/// until held; 0: one attempt). `pending`, when given, receives the handle whose cancel() ends
/// the wait (the operation then completes with CancelledError).
template <class CompletionToken>
auto async_acquire(Lock& lock, std::optional<std::chrono::milliseconds> wait, Mode mode, PendingAcquire* pending,
                   CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, AcquireSignature>(
      [&lock, wait, mode, pending](auto handler) {
        auto done = detail::completion(std::move(handler));
        auto started = lock.async_acquire(
            [done](std::exception_ptr error, std::optional<Lease> lease) {
              detail::complete(done, error, std::move(lease));
            },
            wait, mode);
        if (pending) *pending = std::move(started);
      },
      token);
}

/// The same, exclusive, with no handle to cancel it.
template <class CompletionToken>
auto async_acquire(Lock& lock, std::optional<std::chrono::milliseconds> wait, CompletionToken&& token) {
  return async_acquire(lock, wait, Mode::exclusive, nullptr, std::forward<CompletionToken>(token));
}

/// The completion signature of async_release.
using ReleaseSignature = void(std::exception_ptr);

/// Lease::async_release, completed through an Asio completion token: in a coroutine,
/// `co_await dblock::asio::async_release(lease, boost::asio::use_awaitable)` returns once the
/// lock is given back, and throws what Lease::release() would (LockLostError).
template <class CompletionToken>
auto async_release(Lease& lease, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, ReleaseSignature>(
      [&lease](auto handler) {
        auto done = detail::completion(std::move(handler));
        lease.async_release([done](std::exception_ptr error) { detail::complete(done, error); });
      },
      token);
}

}  // namespace dblock::asio
