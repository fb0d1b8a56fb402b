// A holder in a process of its own (dblock_hammer hold), for the contract tests that kill
// one with SIGKILL: the lock it held must come back (after the TTL for leases, at once for
// session locks) with a fence above the dead holder's.
#pragma once

#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "contract/fixtures.hpp"
#include "dblock/dblock.hpp"
#include "support/eventually.hpp"
#include "support/process.hpp"

namespace dblock::test {

class HolderProcess {
 public:
  // Starts it and returns once it holds `name`. `shape`: "" (exclusive), "shared", or
  // "permits=N" (see tests/multiprocess/hammer.cpp).
  HolderProcess(const Contract& f, const Namespace& ns, const std::string& name, std::chrono::milliseconds ttl,
                const std::string& shape = "")
      : ready_(f.dir + "/ready-" + name), ttl_(ttl), lease_based_(f.lease_based) {
    std::vector<std::string> args{DBLOCK_HAMMER, "hold", ns.url, ns.options.table, std::string(to_string(f.strategy)),
                                  name, std::to_string(ttl.count()), ready_};
    if (!shape.empty()) args.push_back(shape);
    pid_ = spawn(args);
    REQUIRE(eventually([&] { return std::filesystem::exists(ready_); }));
    std::ifstream(ready_) >> fence_;
  }
  ~HolderProcess() {
    if (pid_ > 0) kill();
  }
  HolderProcess(const HolderProcess&) = delete;
  HolderProcess& operator=(const HolderProcess&) = delete;

  std::uint64_t fence() const { return fence_; }

  // SIGKILLs it and waits until it is gone; the clock for came_back() starts then.
  void kill() {
    ::kill(pid_, SIGKILL);
    wait_exit(pid_);
    pid_ = -1;
    killed_at_ = std::chrono::steady_clock::now();
  }

  // Checks a lease acquired after kill(): in time (a lease within its TTL, generously) and
  // with a fence above the dead holder's.
  void came_back(const Lease& lease) const {
    if (lease_based_) CHECK(std::chrono::steady_clock::now() - killed_at_ < ttl_ + std::chrono::seconds(5));
    CHECK(lease.fence() > fence_);
  }

 private:
  std::string ready_;
  std::chrono::milliseconds ttl_;
  bool lease_based_;
  pid_t pid_ = -1;
  std::uint64_t fence_ = 0;
  std::chrono::steady_clock::time_point killed_at_;
};

}  // namespace dblock::test
