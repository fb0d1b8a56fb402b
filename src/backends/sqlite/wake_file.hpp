// Release notifications for SQLite. Every process that uses a database file is on the same
// host (SQLite's WAL requires it), so a release touches a wake file beside the database and
// waiters watch it with inotify: a hand-off costs one file event, not a polling interval.
// Two kinds of file:
// - one per lock table (PATH): a release that names nobody next wakes every waiter of the
//   table, each of which makes one attempt (cheap on a local file) and waits again if it was
//   not its turn;
// - one per waiting owner (PATH.d/<hash of the owner>; the first waiter makes PATH.d), made
//   by its watch and removed with it: a release that names the owner whose ticket is next
//   (fair waiting) touches that file alone, so one waiter wakes instead of the table's herd.
//   If the file is not there (the waiter has not armed its watch yet, or is gone), the
//   table's file is touched instead.
// Both kinds are created with the database file's permissions (as SQLite's own -wal and -shm
// files are; the directory with x where r), so that whoever may use the database may wait on
// it and nobody else gets more, and neither is opened through a symbolic link: a link planted
// in the database's directory would make a waiter create or touch a file elsewhere. (Whoever
// can write that directory can replace the database itself: it must be private to its
// lockers, docs/backends/sqlite.md.)
// A finished watch gives its inotify instance back for the next one instead of closing it:
// closing an instance waits for the kernel to retire its marks (an SRCU grace period, 8-20 ms
// for one close in ten on this VM), which the waiter would pay right after its grant.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sql/notifier.hpp"

namespace dblock::detail::sqldb {

class WakeFile final : public Notifier, public std::enable_shared_from_this<WakeFile> {
 public:
  // The wake file PATH for the database DATABASE. Null when the file cannot be created (a
  // read-only directory, a symbolic link at PATH): waiters then poll.
  static std::shared_ptr<WakeFile> open(const std::string& path, const std::string& database);
  ~WakeFile() override;
  void released(const std::string& name, const std::string& next) noexcept override;
  std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) override;
  // An inotify instance whose watches are removed, for the next watch (InotifyWatch).
  void give_back(int inotify_fd) noexcept;

 private:
  WakeFile(std::string path, int fd, unsigned mode) : path_(std::move(path)), fd_(fd), mode_(mode) {}
  std::string owner_path(const std::string& owner) const;
  int take();  // an idle inotify instance, or a new one; -1 when none can be had
  std::string path_;
  int fd_;
  unsigned mode_;  // the database file's permission bits, for the files made here
  std::mutex mutex_;
  std::vector<int> idle_;  // at most max_idle: each counts against the user's inotify instances
};

}  // namespace dblock::detail::sqldb
