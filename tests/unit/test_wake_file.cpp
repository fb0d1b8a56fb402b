// WakeFile (src/backends/sqlite/wake_file.hpp), on real files and inotify: which waiters a
// SQLite release wakes. As in test_wake_table.cpp, a wait a bug would stall ends at a 10 s
// deadline; the waits that must NOT be woken early are short.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "backends/sqlite/wake_file.hpp"
#include "support/timed_wait.hpp"

using dblock::detail::Clock;
using dblock::detail::ReleaseWatch;
using dblock::detail::sqldb::WakeFile;
using dblock::test::wait_on;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct Dir {
  fs::path path = fs::temp_directory_path() / ("dblock-wake-" + std::to_string(getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
};

std::size_t files_in(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a SQLite release that names the next owner wakes that owner's watch only", "[wake]") {
  Dir dir;
  const auto path = (dir.path / "db-dblock_locks.wake").string();
  const auto db = (dir.path / "db").string();
  auto releaser = WakeFile::open(path, db), waiters = WakeFile::open(path, db);  // as two processes would
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
  auto file = WakeFile::open(path, (dir.path / "db").string());
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

TEST_CASE("SQLite wake files take the database file's permissions", "[wake]") {
  Dir dir;
  const auto db = dir.path / "db";
  { std::ofstream create(db); }
  fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);  // 0640
  const auto path = (dir.path / "db-dblock_locks.wake").string();
  auto file = WakeFile::open(path, db.string());
  REQUIRE(file);
  auto w = file->watch("job", "host:1:a:t1");
  REQUIRE(w);
  const auto mode = [](const fs::path& p) { return fs::status(p).permissions() & fs::perms::all; };
  const auto umask_bits = [] {
    auto m = ::umask(0);
    ::umask(m);
    return static_cast<fs::perms>(m);
  }();
  CHECK(mode(path) == (fs::perms(0640) & ~umask_bits));
  CHECK(mode(path + ".d") == (fs::perms(0750) & ~umask_bits));  // x where r
  CHECK(mode(fs::directory_iterator(path + ".d")->path()) == (fs::perms(0640) & ~umask_bits));
}

TEST_CASE("a SQLite wake file is not opened through a symbolic link", "[wake]") {
  Dir dir;
  const auto target = dir.path / "elsewhere";
  const auto path = (dir.path / "db-dblock_locks.wake").string();
  fs::create_symlink(target, path);
  CHECK_FALSE(WakeFile::open(path, (dir.path / "db").string()));  // waiters poll instead
  CHECK_FALSE(fs::exists(target));  // and nothing was created where the link points

  // Nor the waiters' directory: a watch still works, on the table's file alone.
  const auto other = (dir.path / "db-other.wake").string();
  fs::create_directories(dir.path / "planted");
  fs::create_directory_symlink(dir.path / "planted", other + ".d");
  auto file = WakeFile::open(other, (dir.path / "db").string());
  REQUIRE(file);
  auto w = file->watch("job", "host:1:a:t1");
  REQUIRE(w);
  CHECK(files_in(dir.path / "planted") == 0);
  auto waits = wait_on(*w, 10s);
  std::this_thread::sleep_for(50ms);
  file->released("job", "host:1:a:t1");  // no file of its own: the table's wakes it
  CHECK(waits.get() < 5s);
}

TEST_CASE("an armed SQLite watch calls back from the poller for a release and for an interrupt", "[wake]") {
  Dir dir;
  const auto path = (dir.path / "db-dblock_locks.wake").string();
  auto file = WakeFile::open(path, (dir.path / "db").string());
  REQUIRE(file);
  auto w = file->watch("job", "host:1:a:t1");
  REQUIRE(w);
  auto fired = std::make_shared<std::promise<void>>();
  auto came = fired->get_future();
  REQUIRE(w->arm([fired] { fired->set_value(); }));
  CHECK(came.wait_for(50ms) == std::future_status::timeout);
  file->released("job", "");
  CHECK(came.wait_for(10s) == std::future_status::ready);
  std::atomic<bool> called{false};
  REQUIRE(w->arm([&called] { called = true; }));
  w->disarm();
  file->released("job", "");
  std::this_thread::sleep_for(50ms);
  CHECK_FALSE(called);  // disarmed
  auto later = std::make_shared<std::promise<void>>();
  auto kept = later->get_future();
  REQUIRE(w->arm([later] { later->set_value(); }));  // the release while disarmed is not lost
  CHECK(kept.wait_for(10s) == std::future_status::ready);
  auto interrupted = std::make_shared<std::promise<void>>();
  auto stopped = interrupted->get_future();
  REQUIRE(w->arm([interrupted] { interrupted->set_value(); }));
  CHECK(stopped.wait_for(50ms) == std::future_status::timeout);
  w->interrupt();
  CHECK(stopped.wait_for(10s) == std::future_status::ready);
}
