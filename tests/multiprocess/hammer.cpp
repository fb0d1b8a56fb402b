// A helper process for the multi-process tests, using only the public API.
//   dblock_hammer hold URL STRATEGY NAME TTL_MS READY_FILE
//       acquire NAME, create READY_FILE, then sleep until killed (a holder that dies).
//   dblock_hammer count URL STRATEGY NAME ITERATIONS THREADS COUNTER_FILE FENCE_LOG
//       each thread, ITERATIONS times: acquire, read the counter, yield, write it + 1,
//       append the fence to FENCE_LOG, release. The counter is protected by the lock only.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "dblock/dblock.hpp"

namespace {

long read_counter(const std::string& path) {
  std::ifstream in(path);
  long v = 0;
  in >> v;
  return v;
}

int count(const std::string& url, dblock::Strategy strategy, const std::string& name, int iterations, int threads,
          const std::string& counter, const std::string& fences) {
  auto client = dblock::Client::open(url);
  dblock::LockOptions o;
  o.strategy = strategy;
  o.ttl = std::chrono::seconds(10);
  auto lock = client->lock(name, o);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      for (int i = 0; i < iterations; ++i) {
        auto lease = lock.acquire();
        long v = read_counter(counter);
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // widen the race window
        {
          std::ofstream out(counter, std::ios::trunc);
          out << v + 1 << "\n";
        }
        {
          std::ofstream log(fences, std::ios::app);
          log << lease.fence() << "\n";
        }
        lease.release();
      }
    });
  for (auto& w : workers) w.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 6 && a[0] == "hold") {
      auto client = dblock::Client::open(a[1]);
      dblock::LockOptions o;
      o.strategy = dblock::parse_strategy(a[2]);
      o.ttl = std::chrono::milliseconds(std::stol(a[4]));
      auto lease = client->lock(a[3], o).acquire();
      std::ofstream(a[5]) << lease.fence() << "\n";
      for (;;) pause();
    }
    if (a.size() == 8 && a[0] == "count")
      return count(a[1], dblock::parse_strategy(a[2]), a[3], std::stoi(a[4]), std::stoi(a[5]), a[6], a[7]);
    std::cerr << "usage: dblock_hammer hold|count ...\n";
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "dblock_hammer: " << e.what() << "\n";
    return 70;
  }
}
