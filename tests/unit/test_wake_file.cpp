// WakeFile (src/backends/sqlite/wake_file.hpp), on real files and inotify: which waiters a
// SQLite release wakes. As in test_wake_table.cpp, a wait a bug would stall ends at a 10 s
// deadline; the waits that must NOT be woken early are short.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <unistd.h>

#include "backends/sqlite/wake_file.hpp"

using dblock::detail::Clock;
using dblock::detail::ReleaseWatch;
using dblock::detail::sqldb::WakeFile;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("dblock-wake-" + std::to_string(getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
};

std::future<Clock::duration> wait_on(ReleaseWatch& w, Clock::duration limit) {
  return std::async(std::launch::async, [&w, limit] {
    auto t0 = Clock::now();
    w.wait_until(t0 + limit);
    return Clock::now() - t0;
  });
}

std::size_t files_in(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a SQLite release that names the next owner wakes that owner's watch only", "[wake]") {
  Dir dir;
  const auto path = (dir.path / "db-dblock_locks.wake").string();
  auto releaser = WakeFile::open(path), waiters = WakeFile::open(path);  // as two processes would
  REQUIRE(releaser);
  REQUIRE(waiters);
  auto a = waiters->watch("job", "host:1:a:t1"), b = waiters->watch("job", "host:1:b:t2");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(files_in(path + ".d") == 2);  // one per waiting owner
  auto a_waits = wait_on(*a, 400ms);
  auto b_waits = wait_on(*b, 10s);
  std::this_thread::sleep_for(50ms);
  releaser->released("job", "host:1:b:t2");
  CHECK(b_waits.get() < 5s);
  CHECK(a_waits.get() >= 400ms);
  b.reset();
  CHECK(files_in(path + ".d") == 1);  // a watch takes its file with it
}

TEST_CASE("a SQLite release that names nobody, or an owner without a watch, wakes every watch", "[wake]") {
  Dir dir;
  const auto path = (dir.path / "db-dblock_locks.wake").string();
  auto file = WakeFile::open(path);
  REQUIRE(file);
  auto a = file->watch("job", "host:1:a:t1"), b = file->watch("job", "host:1:b:t2");
  for (const std::string next : {"", "host:1:gone:t9"}) {
    auto a_waits = wait_on(*a, 10s);
    auto b_waits = wait_on(*b, 10s);
    std::this_thread::sleep_for(50ms);
    file->released("job", next);
    CHECK(a_waits.get() < 5s);
    CHECK(b_waits.get() < 5s);
  }
  CHECK(files_in(path + ".d") == 2);  // the release made no file for the owner it named
}
