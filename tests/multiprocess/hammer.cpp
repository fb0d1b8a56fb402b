// A helper process for the multi-process tests, using only the public API.
//   dblock_hammer hold URL TABLE STRATEGY NAME TTL_MS READY_FILE [shared | permits=N]
//       acquire NAME (shared: as a reader; permits=N: as one of a semaphore's N holders),
//       write its fence to READY_FILE, then sleep until killed (a holder that dies).
//   dblock_hammer count URL TABLE STRATEGY NAME ITERATIONS THREADS COUNTER_FILE FENCE_LOG
//       each thread, ITERATIONS times: acquire, read the counter, yield, write it + 1,
//       append the fence to FENCE_LOG, release. The counter is protected by the lock only.
//   dblock_hammer count URL TABLE STRATEGY NAME ITERATIONS THREADS COUNTER_FILE FENCE_LOG permits=N
//       the same with a semaphore of N permits: COUNTER_FILE holds "<holders now> <most at
//       once> <grants>", updated under flock(2) when a holder enters and leaves (the lock is
//       what keeps "most at once" at N or below); FENCE_LOG gets each grant's fence.
//   dblock_hammer crowd URL TABLE STRATEGY PREFIX COUNT TTL_MS READY_FILE STOP_FILE
//       acquire COUNT leases on PREFIX-0 .. PREFIX-(COUNT-1) with one Client (renewed as it
//       does, every TTL/3), create READY_FILE, hold them until STOP_FILE exists (checked every
//       100 ms), then release them; exit 1 if
//       any was lost meanwhile (on_lost, lost(), or its release finding it gone: LockLostError),
//       saying when the first loss came and the Client's last renewal before it.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
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

// DBLOCK_HAMMER_POOL_SIZE, when set, is every Client's pool_size: the crowd test's processes
// keep one connection each (a holder's acquires and renewals then take turns on it).
dblock::ClientOptions table_options(const std::string& table) {
  dblock::ClientOptions o;
  o.table = table;
  if (const char* n = std::getenv("DBLOCK_HAMMER_POOL_SIZE")) o.pool_size = std::stoul(n);
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

// One step of the semaphore count: under an exclusive flock of `path`, adds `delta` to the
// holders now (and counts a grant when entering), raising the most at once; returns the most.
long count_holders(const std::string& path, int delta) {
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0 || ::flock(fd, LOCK_EX) != 0) throw std::runtime_error("cannot lock " + path);
  long now = 0, most = 0, grants = 0;
  {
    std::ifstream in(path);
    in >> now >> most >> grants;
  }
  now += delta;
  most = std::max(most, now);
  if (delta > 0) ++grants;
  {
    std::ofstream out(path, std::ios::trunc);
    out << now << " " << most << " " << grants << "\n";
  }
  ::close(fd);  // drops the flock
  return most;
}

int count_permits(const std::string& url, const std::string& table, dblock::Strategy strategy, const std::string& name,
                  int iterations, int threads, const std::string& counter, const std::string& fences,
                  std::uint32_t permits) {
  auto client = dblock::Client::open(url, table_options(table));
  dblock::LockOptions o;
  o.strategy = strategy;
  o.ttl = std::chrono::seconds(10);
  o.permits = permits;
  auto lock = client->lock(name, o);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&] {
      for (int i = 0; i < iterations; ++i) {
        auto lease = lock.acquire();
        long most = count_holders(counter, +1);
        {
          std::ofstream log(fences, std::ios::app);
          log << lease.fence() << "\n";
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // holders overlap
        // Until the permits have been held together once, a holder waits up to 200 ms for
        // others to join it: with 5 ms holds alone, a loaded machine's slower grants (ZooKeeper
        // in CI) never overlapped, and the count could not tell a semaphore from a mutex.
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
        while (most < static_cast<long>(permits) && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          most = count_holders(counter, 0);
        }
        count_holders(counter, -1);
        lease.release();
      }
    });
  for (auto& w : workers) w.join();
  return 0;
}

int crowd(const std::string& url, const std::string& table, dblock::Strategy strategy, const std::string& prefix,
          int count, std::chrono::milliseconds ttl, const std::string& ready, const std::string& stop) {
  // When a loss comes, how long the Client's renewals had been silent says which it was: a
  // stall (the server's or this process's: no renewal for a TTL) or a row found taken.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto ms_since_start = [start] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  };
  std::atomic<long long> last_renewed_ms{-1}, first_lost_ms{-1}, renewed_before_loss_ms{-1};
  auto options = table_options(table);
  options.on_event = [&](const dblock::Event& e) {
    if (e.kind == dblock::EventKind::renewed) last_renewed_ms = ms_since_start();
  };
  auto client = dblock::Client::open(url, options);
  std::atomic<int> lost{0};
  dblock::LockOptions o;
  o.strategy = strategy;
  o.ttl = ttl;
  o.on_lost = [&](const std::string&, std::uint64_t) {
    long long none = -1;
    if (first_lost_ms.compare_exchange_strong(none, ms_since_start())) renewed_before_loss_ms = last_renewed_ms.load();
    ++lost;
  };
  std::vector<dblock::Lease> held;
  held.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) held.push_back(client->lock(prefix + "-" + std::to_string(i), o).acquire());
  std::ofstream(ready) << count << "\n";
  while (!std::ifstream(stop)) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int gone = 0;
  for (auto& l : held) try {
      if (l.lost()) ++gone;
      else l.release();
    } catch (const dblock::LockLostError&) {
      ++gone;
    }
  if (lost > 0 || gone > 0) {
    std::cerr << "dblock_hammer crowd: " << gone << " of " << count << " leases lost (on_lost told " << lost.load()
              << "; the first at " << first_lost_ms << " ms, the last renewal at " << renewed_before_loss_ms
              << " ms, after the start)\n";
    return 1;
  }
  return 0;
}

std::uint32_t permits_arg(const std::string& a) {
  if (a.rfind("permits=", 0) != 0) throw std::invalid_argument("expected permits=N, not " + a);
  return static_cast<std::uint32_t>(std::stoul(a.substr(8)));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> a(argv + 1, argv + argc);
    if ((a.size() == 7 || a.size() == 8) && a[0] == "hold") {
      const bool shared = a.size() == 8 && a[7] == "shared";
      auto client = dblock::Client::open(a[1], table_options(a[2]));
      dblock::LockOptions o;
      o.strategy = dblock::parse_strategy(a[3]);
      o.ttl = std::chrono::milliseconds(std::stol(a[5]));
      if (a.size() == 8 && !shared) o.permits = permits_arg(a[7]);
      auto lock = client->lock(a[4], o);
      auto lease = shared ? lock.acquire_shared() : lock.acquire();
      {
        std::ofstream tmp(a[6] + ".tmp");
        tmp << lease.fence() << "\n";
      }
      std::rename((a[6] + ".tmp").c_str(), a[6].c_str());  // readers never see it half-written
      for (;;) pause();
    }
    if (a.size() == 9 && a[0] == "count")
      return count(a[1], a[2], dblock::parse_strategy(a[3]), a[4], std::stoi(a[5]), std::stoi(a[6]), a[7], a[8]);
    if (a.size() == 10 && a[0] == "count")
      return count_permits(a[1], a[2], dblock::parse_strategy(a[3]), a[4], std::stoi(a[5]), std::stoi(a[6]), a[7],
                           a[8], permits_arg(a[9]));
    if (a.size() == 9 && a[0] == "crowd")
      return crowd(a[1], a[2], dblock::parse_strategy(a[3]), a[4], std::stoi(a[5]),
                   std::chrono::milliseconds(std::stol(a[6])), a[7], a[8]);
    std::cerr << "usage: dblock_hammer hold|count|crowd ...\n";
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "dblock_hammer: " << e.what() << "\n";
    return 70;
  }
}
