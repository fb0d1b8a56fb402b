// Release notifications for SQLite. Every process that uses a database file is on the same
// host (SQLite's WAL requires it), so a release touches a wake file beside the database and
// waiters watch that file with inotify: a hand-off costs one file event, not a polling
// interval. One wake file per lock table: a release wakes the table's waiters, each of
// which makes one attempt (cheap on a local file) and waits again if it was not its lock.
#pragma once

#include <memory>
#include <string>

#include "sql/notifier.hpp"

namespace dblock::detail::sqldb {

class WakeFile final : public Notifier {
 public:
  // Null when the file cannot be created (read-only directory): waiters then poll.
  static std::shared_ptr<WakeFile> open(const std::string& path);
  ~WakeFile() override;
  void released(const std::string& name) noexcept override;
  std::unique_ptr<ReleaseWatch> watch(const std::string& name, const std::string& owner) override;

 private:
  WakeFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

}  // namespace dblock::detail::sqldb
