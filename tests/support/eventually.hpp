// Waiting on background effects in tests (a renewal thread noticing a loss, a server expiring
// a key): polls `cond` every 10 ms for up to `limit`.
#pragma once

#include <chrono>
#include <thread>

namespace dblock::test {

template <class Cond>
bool eventually(Cond cond, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

}  // namespace dblock::test
