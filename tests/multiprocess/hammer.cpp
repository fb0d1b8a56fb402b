// A helper process for the multi-process tests, using only the public API.
//   dblock_hammer hold URL TABLE STRATEGY NAME TTL_MS READY_FILE [shared]
//       acquire NAME (shared: as a reader), write its fence to READY_FILE, then sleep until
//       killed (a holder that dies).
//   dblock_hammer count URL TABLE STRATEGY NAME ITERATIONS THREADS COUNTER_FILE FENCE_LOG
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

dblock::ClientOptions table_options(const std::string& table) {
  dblock::ClientOptions o;
  o.table = table;
  return o;
}

int count(const std::string& url, const std::string& table, dblock::Strategy strategy, const std::string& name, int iterations, int threads,
          const std::string& counter, const std::string& fences) {
  auto client = dblock::Client::open(url, table_options(table));
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
    if ((a.size() == 7 || (a.size() == 8 && a[7] == "shared")) && a[0] == "hold") {
      auto client = dblock::Client::open(a[1], table_options(a[2]));
      dblock::LockOptions o;
      o.strategy = dblock::parse_strategy(a[3]);
      o.ttl = std::chrono::milliseconds(std::stol(a[5]));
      auto lock = client->lock(a[4], o);
      auto lease = a.size() == 8 ? lock.acquire_shared() : lock.acquire();
      {
        std::ofstream tmp(a[6] + ".tmp");
        tmp << lease.fence() << "\n";
      }
      std::rename((a[6] + ".tmp").c_str(), a[6].c_str());  // readers never see it half-written
      for (;;) pause();
    }
    if (a.size() == 9 && a[0] == "count")
      return count(a[1], a[2], dblock::parse_strategy(a[3]), a[4], std::stoi(a[5]), std::stoi(a[6]), a[7], a[8]);
    std::cerr << "usage: dblock_hammer hold|count ...\n";
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "dblock_hammer: " << e.what() << "\n";
    return 70;
  }
}
