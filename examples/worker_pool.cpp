// A worker pool limited across machines: at most SLOTS tasks run at once however many workers
// there are, each worker taking one of SLOTS named locks ("pool-slot-1" ...) before it works.
// Here the workers are threads, each with a Client of its own as a separate machine would have.
// (A semaphore shape, one name with N permits, is planned; this recipe needs only locks.)
//
//   worker_pool URL WORKERS SLOTS TASKS     e.g. worker_pool sqlite:/tmp/pool.db 6 2 12
#include <dblock/dblock.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <optional>
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
    pool.emplace_back([&, w] {
      auto client = dblock::Client::open(url);
      std::vector<dblock::Lock> slot;
      for (int s = 1; s <= slots; ++s) slot.push_back(client->lock("pool-slot-" + std::to_string(s)));
      while (next_task < tasks) {
        std::optional<dblock::Lease> held;
        for (auto& s : slot)  // the first free slot; none free: wait a little on "its own" one
          if ((held = s.try_acquire())) break;
        if (!held && !(held = slot[w % slots].try_acquire(std::chrono::milliseconds(50)))) continue;
        int task = next_task++;
        if (task >= tasks) break;
        int now = ++running;
        most = std::max(most.load(), now);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the task
        --running;
      }
    });
  }
  for (auto& t : pool) t.join();
  std::cout << tasks << " tasks, at most " << most << " at once (slots: " << slots << ")\n";
  return most <= slots ? 0 : 1;
}
