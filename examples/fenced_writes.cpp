// Why a lock comes with a fence. A holder can be paused (a GC, a swap storm, SIGSTOP) past its
// lease; meanwhile another takes the lock and writes. When the first one wakes up, its write
// must be refused: the resource remembers the highest fence it has seen and rejects lower ones.
// Here the resource is a struct in memory; in a real service it is a column checked in the
// same UPDATE (`... WHERE fence_seen < :fence`), a storage API's conditional write, and so on.
//
//   fenced_writes URL
#include <dblock/dblock.hpp>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

namespace {
struct Resource {
  std::uint64_t fence_seen = 0;
  std::string value;
  bool write(std::uint64_t fence, const std::string& v) {
    if (fence < fence_seen) return false;  // a holder superseded by a newer grant
    fence_seen = fence;
    value = v;
    return true;
  }
};
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fenced_writes URL\n";
    return 64;
  }
  using namespace std::chrono_literals;
  Resource resource;
  auto a = dblock::Client::open(argv[1]), b = dblock::Client::open(argv[1]);
  dblock::LockOptions short_lease;
  short_lease.ttl = 300ms;
  short_lease.auto_renew = false;  // stands for a holder too paused to renew
  auto slow = a->lock("report", short_lease).acquire();
  std::this_thread::sleep_for(400ms);  // the pause: the lease expires meanwhile
  auto fast = b->lock("report").acquire();
  bool newer = resource.write(fast.fence(), "written by b");
  bool stale = resource.write(slow.fence(), "written by a, too late");
  std::cout << "b (fence " << fast.fence() << ") wrote: " << (newer ? "accepted" : "refused") << "\n"
            << "a (fence " << slow.fence() << ", lost: " << std::boolalpha << slow.lost() << ") wrote: "
            << (stale ? "accepted" : "refused") << "\n"
            << "the resource holds: " << resource.value << "\n";
  try {
    slow.release();
  } catch (const dblock::LockLostError& e) {
    std::cout << "a's release: " << e.what() << "\n";
  }
  return newer && !stale ? 0 : 1;
}
