#include "backends/sqlite/wake_file.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace dblock::detail::sqldb {
namespace {

class InotifyWatch final : public ReleaseWatch {
 public:
  explicit InotifyWatch(int fd) : fd_(fd) {}
  ~InotifyWatch() override { close(fd_); }
  void wait_until(Clock::time_point until) override {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 60'000))) > 0) {
      char buf[4096];  // drain, so the next wait blocks until the next release
      while (read(fd_, buf, sizeof buf) > 0) {
      }
    }
  }

 private:
  int fd_;
};

}  // namespace

std::shared_ptr<WakeFile> WakeFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return nullptr;
  return std::shared_ptr<WakeFile>(new WakeFile(path, fd));
}

WakeFile::~WakeFile() { close(fd_); }

void WakeFile::released(const std::string&) noexcept {
  timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  futimens(fd_, now);  // an IN_ATTRIB event for every watcher; best effort
}

std::unique_ptr<ReleaseWatch> WakeFile::watch(const std::string&, const std::string&) {
  // inotify instances are limited per user (max_user_instances); without one, waiters poll.
  int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return nullptr;
  if (inotify_add_watch(fd, path_.c_str(), IN_ATTRIB | IN_MODIFY) < 0) {
    close(fd);
    return nullptr;
  }
  return std::make_unique<InotifyWatch>(fd);
}

}  // namespace dblock::detail::sqldb
