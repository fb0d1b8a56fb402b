// Leader election: one active instance among several, the others on standby. A Leadership
// campaigns in a thread of its own: on_elected starts the leader's work with this term's
// fence, on_revoked stops it the moment the lock can no longer be counted on (lost, or this
// instance resigning), and the campaign goes on. For a whole process, `dblock run --name
// service-leader -- my-service` under a supervisor that restarts it does the same
// (docs/OPERATIONS.md, "Deploying").
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
  auto client = dblock::Client::open(argv[1]);
  std::atomic<int> terms{0};
  std::atomic<std::uint64_t> fence{0};  // the leader's work tags its writes with it; 0: stand by
  std::thread work([&, until = steady_clock::now() + seconds(std::stoi(argv[2]))] {
    while (steady_clock::now() < until) {
      if (fence) { /* one step of the leader's work, tagged with fence.load() */ }
      std::this_thread::sleep_for(milliseconds(100));
    }
  });

  dblock::LeadershipOptions options;
  options.lock.ttl = seconds(10);
  options.on_elected = [&](std::uint64_t f) {
    ++terms;
    fence = f;
    std::cout << "leading with fence " << f << std::endl;
  };
  options.on_revoked = [&](std::uint64_t) {
    fence = 0;  // stop acting as the leader before returning
    std::cout << "stepping down" << std::endl;
  };
  options.on_error = [](const dblock::Error& e) { std::cerr << "leader: " << e.what() << "\n"; };
  {
    dblock::Leadership leadership(client, "service-leader", options);
    work.join();
  }  // resigns: the next instance takes over at once
  std::cout << "led " << terms << " term(s)\n";
  return terms > 0 ? 0 : 1;
}
