// How long a wait on a ReleaseWatch lasted: the wake tests (test_wake_table.cpp,
// test_wake_file.cpp) start a wait of at most `limit` on a thread of its own, act, and read
// when it ended.
#pragma once

#include <future>

#include "core/driver.hpp"

namespace dblock::test {

inline std::future<detail::Clock::duration> wait_on(detail::ReleaseWatch& w, detail::Clock::duration limit) {
  return std::async(std::launch::async, [&w, limit] {
    auto t0 = detail::Clock::now();
    w.wait_until(t0 + limit);
    return detail::Clock::now() - t0;
  });
}

}  // namespace dblock::test
