// A worker pool limited across machines: at most SLOTS tasks run at once however many workers
// there are. The limit is a semaphore, one lock name with SLOTS permits: a worker holds a
// permit while it works, and waits for one while SLOTS others do. Here the workers are
// threads, each with a Client of its own as a separate machine would have.
//
//   worker_pool URL WORKERS SLOTS TASKS     e.g. worker_pool sqlite:/tmp/pool.db 6 2 12
#include <dblock/dblock.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: worker_pool URL WORKERS SLOTS TASKS\n";
    return 64;
  }
  const std::string url = argv[1];
  const int workers = std::stoi(argv[2]), slots = std::stoi(argv[3]), tasks = std::stoi(argv[4]);
  std::atomic<int> next_task{0}, running{0}, most{0};
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      auto client = dblock::Client::open(url);
      dblock::LockOptions options;
      options.permits = static_cast<std::uint32_t>(slots);  // every holder must give the same number
      auto slot = client->lock("pool-slots", options);
      for (;;) {
        auto permit = slot.acquire();  // waits while SLOTS other workers hold one
        int task = next_task++;
        if (task >= tasks) break;
        int now = ++running;
        most = std::max(most.load(), now);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the task
        --running;
      }  // the permit is given back at the end of each turn
    });
  }
  for (auto& t : pool) t.join();
  std::cout << tasks << " tasks, at most " << most << " at once (slots: " << slots << ")\n";
  return most <= slots ? 0 : 1;
}
