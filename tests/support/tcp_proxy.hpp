// A TCP fault proxy for the network fault tests: listens on 127.0.0.1 (an ephemeral port),
// forwards every connection to one target, and can be switched at run time between
//   pass   forward both ways;
//   stall  keep every connection open but forward nothing, in either direction, and accept new
//          connections without forwarding anything on them either: a blackholed network as the
//          client sees it (its writes are accepted by the proxy's kernel, no answer ever comes);
//   drop   reset every current connection (both sides, RST) and reset new ones at once;
// and back to pass (bytes held back by a stall are then forwarded, as a network that heals
// delivers the retransmitted segments). One thread, POSIX sockets and poll().
#pragma once

#include <cstdint>
#include <mutex>
#include <condition_variable>
#include <string>
#include <thread>

namespace dblock::test {

class TcpProxy {
 public:
  enum class Mode { pass, stall, drop };

  // Starts listening and forwarding at once; throws std::runtime_error if it cannot listen.
  TcpProxy(std::string target_host, int target_port);
  ~TcpProxy();  // stop()
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  // Switches the mode; returns once the proxy thread applied it (drop: every connection
  // open at the call has been reset).
  void set_mode(Mode m);
  Mode mode() const;
  // Connections currently open through the proxy, and accepted since the start.
  std::size_t open_connections() const;
  std::size_t accepted() const;
  // Stops the thread and closes every socket (idempotent).
  void stop();

 private:
  void run();

  std::string host_;
  int target_port_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  mutable std::mutex mutex_;
  std::condition_variable applied_cv_;
  Mode mode_ = Mode::pass;
  std::uint64_t requested_ = 0, applied_ = 0;  // mode change generations
  std::size_t open_ = 0, accepted_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

const char* to_string(TcpProxy::Mode m);
// "pass", "stall" or "drop"; throws std::invalid_argument otherwise.
TcpProxy::Mode parse_proxy_mode(const std::string& text);

}  // namespace dblock::test
