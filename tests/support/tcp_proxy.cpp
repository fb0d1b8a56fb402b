#include "support/tcp_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace dblock::test {

namespace {

constexpr std::size_t buffer_cap = 256 * 1024;  // per direction: stop reading beyond it

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("tcp proxy: " + what + ": " + std::strerror(errno));
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Closes with a reset (RST) instead of an orderly FIN: what a dropped connection looks like.
void reset_close(int fd) {
  if (fd < 0) return;
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

// One direction of a connection: bytes read from `from`, not yet written to `to`.
struct Direction {
  int from, to;
  std::string buf;
  bool eof = false;   // `from` sent FIN
  bool shut = false;  // FIN passed on to `to`
};

struct Pair {
  int client, server;
  Direction up, down;  // client -> server, server -> client
  bool broken = false;
  Pair(int c, int s) : client(c), server(s), up{c, s}, down{s, c} {}
  bool done() const { return broken || (up.shut && down.shut); }
  void close_reset() {
    reset_close(client);
    reset_close(server);
    client = server = -1;
  }
};

int connect_to(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) return -1;
  int fd = -1;
  for (auto* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;  // the target is local: instant
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblocking(fd);
  }
  return fd;
}

// Moves what is readable on d.from into d.buf; false on an error (the pair is broken).
bool pump_in(Direction& d) {
  char chunk[16384];
  while (d.buf.size() < buffer_cap) {
    auto n = ::recv(d.from, chunk, sizeof chunk, 0);
    if (n > 0) {
      d.buf.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      d.eof = true;
      return true;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    if (errno == EINTR) continue;
    return false;
  }
  return true;
}

bool pump_out(Direction& d) {
  while (!d.buf.empty()) {
    auto n = ::send(d.to, d.buf.data(), d.buf.size(), MSG_NOSIGNAL);
    if (n > 0) {
      d.buf.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
  if (d.eof && !d.shut) {
    ::shutdown(d.to, SHUT_WR);
    d.shut = true;
  }
  return true;
}

}  // namespace

const char* to_string(TcpProxy::Mode m) {
  switch (m) {
    case TcpProxy::Mode::pass: return "pass";
    case TcpProxy::Mode::stall: return "stall";
    case TcpProxy::Mode::drop: return "drop";
  }
  return "?";
}

TcpProxy::Mode parse_proxy_mode(const std::string& text) {
  if (text == "pass") return TcpProxy::Mode::pass;
  if (text == "stall") return TcpProxy::Mode::stall;
  if (text == "drop") return TcpProxy::Mode::drop;
  throw std::invalid_argument("tcp proxy: unknown mode '" + text + "' (pass, stall or drop)");
}

TcpProxy::TcpProxy(std::string target_host, int target_port) : host_(std::move(target_host)), target_port_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) fail("socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 128) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(listen_fd_);
    fail("listen on 127.0.0.1");
  }
  port_ = ntohs(a.sin_port);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(listen_fd_);
    fail("pipe");
  }
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() { stop(); }

void TcpProxy::stop() {
  {
    std::lock_guard lk(mutex_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  char c = 's';
  (void)!::write(wake_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
  for (int& fd : {std::ref(listen_fd_), std::ref(wake_[0]), std::ref(wake_[1])}) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void TcpProxy::set_mode(Mode m) {
  std::unique_lock lk(mutex_);
  if (stop_) throw std::logic_error("tcp proxy: set_mode after stop");
  mode_ = m;
  auto generation = ++requested_;
  char c = 'm';
  (void)!::write(wake_[1], &c, 1);
  if (!applied_cv_.wait_for(lk, std::chrono::seconds(10), [&] { return applied_ >= generation; }))
    throw std::runtime_error("tcp proxy: the proxy thread did not apply a mode change within 10 s");
}

TcpProxy::Mode TcpProxy::mode() const {
  std::lock_guard lk(mutex_);
  return mode_;
}

std::size_t TcpProxy::open_connections() const {
  std::lock_guard lk(mutex_);
  return open_;
}

std::size_t TcpProxy::accepted() const {
  std::lock_guard lk(mutex_);
  return accepted_;
}

void TcpProxy::run() {
  std::vector<std::unique_ptr<Pair>> pairs;
  Mode mode = Mode::pass;
  std::vector<pollfd> fds;
  for (;;) {
    // Apply a requested mode change (and stop) before anything else.
    {
      std::lock_guard lk(mutex_);
      if (stop_) break;
      mode = mode_;
      if (mode == Mode::drop)
        for (auto& p : pairs) p->broken = true;
    }
    for (auto it = pairs.begin(); it != pairs.end();) {
      if ((*it)->done()) {
        (*it)->close_reset();
        it = pairs.erase(it);
      } else {
        ++it;
      }
    }
    {
      std::lock_guard lk(mutex_);
      open_ = pairs.size();
      if (applied_ != requested_ && mode == mode_) {
        applied_ = requested_;
        applied_cv_.notify_all();
      }
    }

    fds.clear();
    fds.push_back({wake_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& p : pairs) {
      // Stalled: poll nothing on the connection (fd -1 is skipped), so that neither data nor
      // a close (FIN, RST) passes until the mode is pass again.
      short c = 0, s = 0;
      if (mode == Mode::pass) {
        if (!p->up.eof && p->up.buf.size() < buffer_cap) c |= POLLIN;
        if (!p->down.eof && p->down.buf.size() < buffer_cap) s |= POLLIN;
        if (!p->up.buf.empty() || (p->up.eof && !p->up.shut)) s |= POLLOUT;
        if (!p->down.buf.empty() || (p->down.eof && !p->down.shut)) c |= POLLOUT;
      }
      fds.push_back({mode == Mode::pass ? p->client : -1, c, 0});
      fds.push_back({mode == Mode::pass ? p->server : -1, s, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents & POLLIN) {
      char drain[64];
      while (::read(wake_[0], drain, sizeof drain) > 0) {
      }
    }
    if (fds[1].revents & POLLIN) {
      for (;;) {
        int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) break;
        {
          std::lock_guard lk(mutex_);
          ++accepted_;
        }
        if (mode == Mode::drop) {
          reset_close(c);
          continue;
        }
        int one = 1;
        ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int s = connect_to(host_, target_port_);
        if (s < 0) {
          reset_close(c);  // the target is down: the client sees its connection reset
          continue;
        }
        pairs.push_back(std::make_unique<Pair>(c, s));
      }
    }
    if (mode != Mode::pass) continue;
    for (std::size_t i = 0; i < pairs.size() && 2 + 2 * i + 1 < fds.size(); ++i) {
      auto& p = *pairs[i];
      auto rc = fds[2 + 2 * i].revents, rs = fds[2 + 2 * i + 1].revents;
      bool ok = true;
      if (rc & (POLLIN | POLLHUP | POLLERR)) ok = ok && pump_in(p.up);
      if (rs & (POLLIN | POLLHUP | POLLERR)) ok = ok && pump_in(p.down);
      ok = ok && pump_out(p.up) && pump_out(p.down);
      if (!ok) p.broken = true;  // one side reset or failed: reset the other side too
    }
  }
  for (auto& p : pairs) p->close_reset();
  std::lock_guard lk(mutex_);
  open_ = 0;
  applied_ = requested_;
  applied_cv_.notify_all();
}

}  // namespace dblock::test
