// A program outside the dblock tree, built against the installed package.
#include <dblock/dblock.hpp>
#include <iostream>
#include <mutex>

int main(int argc, char** argv) {
  if (argc != 2) return 64;
  auto client = dblock::Client::open(argv[1]);
  auto lock = client->lock("consumer");
  std::lock_guard guard(lock);
  std::cout << "consumer holds '" << lock.name() << "' with fence " << lock.fence() << "\n";
  return lock.fence() > 0 ? 0 : 1;
}
