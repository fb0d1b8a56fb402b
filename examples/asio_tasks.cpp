// Many coroutines on one thread contending for a few locks, with Boost.Asio (C++20): each
// `co_await`s its lock and its release and holds no thread while it waits, so the service's
// one event-loop thread runs them all. Each name is held by one task at a time, and its fences rise in the
// order its tasks were granted.
//
//   asio_tasks URL TASKS NAMES     e.g. asio_tasks sqlite:/tmp/tasks.db 200 4
#include <dblock/asio.hpp>
#include <dblock/dblock.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <optional>
#include <string>

namespace asio = boost::asio;

namespace {

// What the tasks saw. Every coroutine runs on the io_context's one thread: no mutex needed.
struct Tally {
  std::map<std::string, int> inside;               // holders of each name now
  std::map<std::string, std::uint64_t> last_fence;  // the newest fence of each name
  int done = 0, overlaps = 0, backwards = 0;
};

asio::awaitable<void> task(dblock::Lock lock, Tally& tally) {
  // Waits for its turn without blocking the thread: the other tasks go on meanwhile.
  std::optional<dblock::Lease> lease = co_await dblock::asio::async_acquire(lock, std::nullopt, asio::use_awaitable);
  const auto& name = lock.name();
  if (++tally.inside[name] > 1) ++tally.overlaps;
  if (lease->fence() <= tally.last_fence[name]) ++tally.backwards;
  tally.last_fence[name] = lease->fence();
  asio::steady_timer work(co_await asio::this_coro::executor, std::chrono::milliseconds(1));  // the task
  co_await work.async_wait(asio::use_awaitable);
  --tally.inside[name];
  ++tally.done;
  // Given back without blocking the thread (the Lease's destructor would block it for a round
  // trip); the name's next task is granted.
  co_await dblock::asio::async_release(*lease, asio::use_awaitable);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: asio_tasks URL TASKS NAMES\n";
    return 64;
  }
  const int tasks = std::stoi(argv[2]), names = std::stoi(argv[3]);
  auto client = dblock::Client::open(argv[1]);
  asio::io_context io;
  Tally tally;
  for (int i = 0; i < tasks; ++i)
    asio::co_spawn(io, task(client->lock("task-" + std::to_string(i % names)), tally), [](std::exception_ptr e) {
      if (e) std::rethrow_exception(e);  // out of io.run(): the example fails
    });
  io.run();  // returns once every task has had its lock and finished
  std::cout << tally.done << " tasks on " << names << " names, on one thread: " << tally.overlaps
            << " overlapping holds, " << tally.backwards << " fences out of order\n";
  return tally.done == tasks && tally.overlaps == 0 && tally.backwards == 0 ? 0 : 1;
}
