// Leader election: one active instance among several, the others on standby. Leadership is a
// renewed lease; the loss callback tells the leader the moment it can no longer count on it,
// and it steps down (stops acting) before another instance can take over. For a whole
// process, `dblock run --name service-leader -- my-service` does the same: the command runs
// only while the lock is held and is stopped when it is lost.
//
//   leader URL SECONDS     runs for SECONDS, leading whenever it holds the lock
#include <dblock/dblock.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: leader URL SECONDS\n";
    return 64;
  }
  using namespace std::chrono;
  const auto until = steady_clock::now() + seconds(std::stoi(argv[2]));
  auto client = dblock::Client::open(argv[1]);
  std::atomic<bool> lost{false};
  dblock::LockOptions options;
  options.ttl = seconds(10);
  options.on_lost = [&](const std::string&, std::uint64_t) { lost = true; };
  auto lock = client->lock("service-leader", options);
  int terms = 0;
  while (steady_clock::now() < until) {
    auto term = lock.try_acquire(milliseconds(500));  // standby: wait for the leader to go
    if (!term) continue;
    ++terms;
    lost = false;
    std::cout << "leading with fence " << term->fence() << "\n";
    while (!lost && steady_clock::now() < until) {
      // The leader's work, each step tagged with term->fence() wherever it writes.
      std::this_thread::sleep_for(milliseconds(100));
    }
    if (lost) std::cout << "lost the lease: stepping down\n";
    try {
      term->release();
    } catch (const dblock::LockLostError&) {
    }
  }
  std::cout << "led " << terms << " term(s)\n";
  return terms > 0 ? 0 : 1;
}
