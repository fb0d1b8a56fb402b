#include "backends/sqlite/wake_file.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "core/fnv1a.hpp"
#include "core/wait_engine.hpp"

namespace dblock::detail::sqldb {
namespace {

// Idle inotify instances kept per wake file; the default limit is 128 per user.
constexpr std::size_t max_idle = 8;

void drain(int fd) {
  char buf[4096];
  while (read(fd, buf, sizeof buf) > 0) {
  }
}

class InotifyWatch final : public ReleaseWatch {
 public:
  InotifyWatch(std::shared_ptr<WakeFile> file, int fd, std::vector<int> wds, std::string own)
      : file_(std::move(file)), fd_(fd), wds_(std::move(wds)), own_(std::move(own)),
        interrupt_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~InotifyWatch() override {
    disarm();  // before the descriptors are given back
    for (int wd : wds_) inotify_rm_watch(fd_, wd);
    if (!own_.empty()) unlink(own_.c_str());
    file_->give_back(fd_);
    if (interrupt_ >= 0) close(interrupt_);
  }
  void wait_until(Clock::time_point until) override {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    pollfd p[2] = {{fd_, POLLIN, 0}, {interrupt_, POLLIN, 0}};  // a negative fd is skipped
    if (poll(p, 2, static_cast<int>(std::clamp<long long>(left, 0, 60'000))) > 0 && (p[0].revents & POLLIN))
      drain(fd_);  // so that the next wait blocks until the next release
  }
  void interrupt() noexcept override {
    const std::uint64_t one = 1;
    if (interrupt_ >= 0) (void)!write(interrupt_, &one, sizeof one);
  }
  // The same poll, by the WaitEngine's steppers; the interrupt's eventfd is never drained, so
  // that every later wait returns at once too.
  bool arm(std::function<void()> wake) override {
    disarm();
    armed_ = WaitEngine::get().when_readable({fd_, interrupt_}, [fd = fd_, wake = std::move(wake)] {
      drain(fd);
      wake();
    });
    return armed_ != 0;
  }
  void disarm() noexcept override { WaitEngine::get().forget_readable(std::exchange(armed_, 0)); }

 private:
  std::shared_ptr<WakeFile> file_;
  int fd_;
  std::vector<int> wds_;  // the table's file, and ours if we have one
  std::string own_;       // our wake file, "" when we have none
  int interrupt_;  // an eventfd that interrupt() makes readable; -1 if none could be made
  std::uint64_t armed_ = 0;  // the engine's id while armed (arm and disarm: the waiter's thread)
};

}  // namespace

std::shared_ptr<WakeFile> WakeFile::open(const std::string& path, const std::string& database) {
  // Before the database exists, SQLite's default for it (the umask applies to both alike).
  struct stat st {};
  const unsigned mode = ::stat(database.c_str(), &st) == 0 ? st.st_mode & 0666 : 0644;
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return nullptr;
  return std::shared_ptr<WakeFile>(new WakeFile(path, fd, mode));
}

WakeFile::~WakeFile() {
  close(fd_);
  for (int fd : idle_) close(fd);
}

// Every process must name an owner's file alike, whatever its build: FNV-1a, not std::hash.
std::string WakeFile::owner_path(const std::string& owner) const { return path_ + ".d/" + fnv1a64_hex(owner); }

void WakeFile::released(const std::string&, const std::string& next) noexcept {
  timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  // An IN_ATTRIB event for the next owner's watch alone, else for every watcher; best effort.
  if (!next.empty() && utimensat(AT_FDCWD, owner_path(next).c_str(), now, AT_SYMLINK_NOFOLLOW) == 0) return;
  futimens(fd_, now);
}

int WakeFile::take() {
  {
    std::lock_guard lk(mutex_);
    if (!idle_.empty()) {
      int fd = idle_.back();
      idle_.pop_back();
      drain(fd);  // what came after its last wait, and the removal notices of its watches
      return fd;
    }
  }
  // inotify instances are limited per user (max_user_instances); without one, waiters poll.
  return inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
}

void WakeFile::give_back(int fd) noexcept {
  {
    std::lock_guard lk(mutex_);
    if (idle_.size() < max_idle) {
      idle_.push_back(fd);
      return;
    }
  }
  close(fd);
}

std::unique_ptr<ReleaseWatch> WakeFile::watch(const std::string&, const std::string& owner) {
  int fd = take();
  if (fd < 0) return nullptr;
  int table = inotify_add_watch(fd, path_.c_str(), IN_ATTRIB | IN_MODIFY | IN_DONT_FOLLOW);
  if (table < 0) {
    give_back(fd);
    return nullptr;
  }
  std::vector<int> wds{table};
  // Our own file, where a release that names us next wakes us alone; without it we wake with
  // the table's herd only. The first waiter makes the directory: a database nobody waits on
  // has none.
  // The directory gets x where the database has r; one that is not a directory of its own
  // (a symbolic link) is not used.
  std::string own = owner_path(owner);
  const std::string dir = path_ + ".d";
  struct stat st {};
  int f = (mkdir(dir.c_str(), mode_ | ((mode_ & 0444) >> 2)) == 0 || errno == EEXIST) &&
                  lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)
              ? ::open(own.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode_)
              : -1;
  if (f >= 0) close(f);
  int mine = f >= 0 ? inotify_add_watch(fd, own.c_str(), IN_ATTRIB | IN_DONT_FOLLOW) : -1;
  if (mine >= 0) {
    wds.push_back(mine);
  } else {
    if (f >= 0) unlink(own.c_str());
    own.clear();
  }
  return std::make_unique<InotifyWatch>(shared_from_this(), fd, std::move(wds), std::move(own));
}

}  // namespace dblock::detail::sqldb
