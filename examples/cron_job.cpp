// A job that cron starts on several machines, which must run once per schedule: the first
// machine to take the lock runs it; the others find it taken and exit 75. hold_at_least keeps
// the lock taken for a while after a short job, so a machine whose clock is a few seconds
// late, starting the same job after the first finished, still skips it.
//
//   cron_job URL [HOLD_AT_LEAST]      e.g. cron_job sqlite:/var/lib/app/locks.db 30s
#include <dblock/dblock.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: cron_job URL [HOLD_AT_LEAST]\n";
    return 64;
  }
  try {
    auto client = dblock::Client::open(argv[1]);
    dblock::LockOptions options;
    options.hold_at_least = dblock::parse_duration(argc == 3 ? argv[2] : "30s");
    auto lease = client->lock("nightly-report", options).try_acquire();
    if (!lease) {
      std::cout << "nightly-report: another machine has run it\n";
      return 75;
    }
    // The job. Whatever it writes elsewhere should carry the fence (see fenced_writes.cpp).
    std::cout << "nightly-report: running with fence " << lease->fence() << "\n";
    lease->release();  // the lock stays taken until hold_at_least after the grant
    return 0;
  } catch (const dblock::Error& e) {
    std::cerr << "cron_job: " << e.what() << "\n";
    return 69;
  }
}
