// A small file that the torture run's processes share, changed under flock(2): the resource
// and the occupancy table are each one.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace dblock::torture {

class SharedFile {
 public:
  // `what` names the file in errors ("the resource").
  SharedFile(std::string path, const std::string& what) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw std::runtime_error("cannot open " + what + " " + path_);
  }
  ~SharedFile() { ::close(fd_); }
  SharedFile(const SharedFile&) = delete;
  SharedFile& operator=(const SharedFile&) = delete;

  // f() under the file's exclusive lock (retried when a signal interrupts the wait).
  template <class F>
  auto locked(F&& f) {
    while (::flock(fd_, LOCK_EX) != 0) {
    }
    struct Unlock {
      int fd;
      ~Unlock() { ::flock(fd, LOCK_UN); }
    } unlock{fd_};
    return f();
  }
  int fd() const noexcept { return fd_; }
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace dblock::torture
