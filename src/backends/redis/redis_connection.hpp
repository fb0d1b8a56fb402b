// One hiredis connection (RAII), and the one place where hiredis and Redis errors become
// dblock errors. Used by the redis backend (through a small pool), by the redlock backend
// (one per node, driven in parallel) and by the release subscriber.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/redis/redis_tls.hpp"
#include "core/connection_pool.hpp"

namespace dblock::detail::redis {

using std::chrono::milliseconds;

struct Sentinels;

// Where and how to connect. `where` names the server in messages: never the password.
struct Target {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string user;      // ACL user (Redis 6+); empty: the default user
  std::string password;  // empty: no AUTH
  int db = 0;
  milliseconds connect_timeout{5000};
  milliseconds command_timeout{5000};
  std::string where;
  // Set: host and port are not used; each connection asks these Sentinels for the master
  // (redis_sentinel.hpp).
  std::shared_ptr<const Sentinels> sentinels;
  // Set: every connection (to the server, a node, a Sentinel, the master) is TLS with these
  // certificates, and the server's certificate must name `host`.
  std::shared_ptr<const TlsContext> tls;
};

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// A Lua script: its text and SHA1, which is how EVALSHA names it on every server.
struct Script {
  std::string text;
  std::string sha;
  explicit Script(std::string t);
};

class Connection {
 public:
  // Connects, authenticates and selects the database. Throws UnavailableError (refused,
  // unreachable, credentials refused) or TimeoutError, naming target.where.
  explicit Connection(const Target& target);
  // As above with another connect timeout (a redlock node retried in the background of an
  // attempt must not block it longer than the per-node timeout).
  Connection(const Target& target, milliseconds connect_timeout);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // A command; a Redis error reply throws (see check()). Error replies a caller handles
  // itself are left to it with `raw`.
  Reply command(const std::vector<std::string>& argv);
  Reply raw(const std::vector<std::string>& argv);
  // EVALSHA, falling back once to EVAL on NOSCRIPT (a restarted or SCRIPT FLUSHed server).
  Reply eval(const Script& s, const std::vector<std::string>& keys, const std::vector<std::string>& args);

  // Pipelining, for talking to several servers at once: queue a command, then read its reply.
  void append(const std::vector<std::string>& argv);
  // Queues EVALSHA (by_sha) or EVAL of the script.
  void append_eval(const Script& s, bool by_sha, const std::vector<std::string>& keys,
                   const std::vector<std::string>& args);
  // Queues a command already in RESP form (format_eval()): Redlock formats a script's call
  // once and queues the same bytes on every node.
  void append_formatted(const std::string& command);
  Reply read();  // throws like command(), except that error replies are returned
  // Without blocking, for a caller that polls the socket itself (redlock reads the nodes in
  // the order they answer): a reply already received, or null; and one read() of what the
  // socket has (call it when poll() says readable). Both throw like read().
  Reply take_buffered();
  void read_available();
  // Sends what append*() queued. hiredis itself writes with write(2), which raises SIGPIPE
  // on a socket the server has closed and so kills a process that does not ignore it (our
  // users' processes); this sends with MSG_NOSIGNAL instead, and read() calls it first, so
  // hiredis never writes. Throws like read().
  void flush();
  void set_timeout(milliseconds t);

  // False once an I/O error or timeout left the connection in an unknown state.
  bool usable() const noexcept { return ctx_ && ctx_->err == 0; }
  // For a connection that sat idle: false if the server closed it meanwhile (a restart), so
  // that a pool hands out a fresh one instead of failing the next command. One opened through
  // Sentinels is also false once a Sentinel names another master (asked at most every
  // `reconfirm_every`): a failover that leaves the old master running (a forced failover, a
  // partition) is not told to its clients until it is reconfigured, seconds later.
  bool still_connected() noexcept;
  static constexpr milliseconds reconfirm_every{1000};
  redisContext* context() noexcept { return ctx_; }
  // For a caller that polls the socket itself and found an idle connection readable: true when
  // that was only TLS's own records (session tickets), so the connection is still good.
  bool only_tls_records() noexcept { return tls_ && !tls_->pending() && tls_->idle_after_records(); }
  // "TLSv1.3", or "" for plaintext.
  std::string tls_version() const { return tls_ ? tls_->version() : std::string(); }
  const std::string& where() const noexcept { return where_; }

  // Replies to earlier commands that their caller stopped waiting for (Redlock's nodes
  // once a majority has answered), oldest first: they arrive ahead of the next command's,
  // and the next reader hands each to its function (which may be empty) and drops it.
  std::deque<std::function<void(const redisReply&)>> unread;

  // Throws the dblock error for this connection's I/O failure.
  [[noreturn]] void fail_io();
  // Throws the dblock error for an error reply (NOSCRIPT included: callers check it first).
  // On a connection that follows a Sentinel-managed master, an answer saying this server is
  // no longer (or not yet) the master also makes it unusable, so that the pool drops it.
  [[noreturn]] void fail_reply(const redisReply& r);
  // Makes the connection unusable (the pool drops it), saying why.
  void abandon(const char* why) noexcept;

 private:
  void open(const Target& t, milliseconds connect_timeout);
  void open_node(const Target& t, milliseconds connect_timeout);
  void open_primary(const Target& t, milliseconds connect_timeout);  // redis_sentinel.cpp
  bool master_still_here() noexcept;                                  // redis_sentinel.cpp
  // The bytes over the socket hiredis connected: TLS's or the socket's own. hiredis only
  // formats commands into its output buffer and parses replies with its reader.
  ssize_t send_some(const char* data, std::size_t size);
  ssize_t receive_some(char* data, std::size_t size);
  redisContext* ctx_ = nullptr;
  std::unique_ptr<TlsStream> tls_;
  std::string where_;
  milliseconds command_timeout_;
  bool follows_primary_ = false;  // opened through Sentinels
  // Opened through Sentinels: how to ask them, the master found, and when one last named it.
  std::unique_ptr<Target> asked_;
  std::string master_host_;
  int master_port_ = 0;
  std::chrono::steady_clock::time_point confirmed_{};
};

// EVALSHA (by_sha) or EVAL of the script with these keys and args, in RESP form.
std::string format_eval(const Script& s, bool by_sha, const std::vector<std::string>& keys,
                        const std::vector<std::string>& args);

// Helpers to read replies.
bool is_error(const redisReply& r, const char* prefix = nullptr);
std::int64_t as_int(const redisReply& r);  // an integer reply (or a numeric string)

// A small pool of connections to one server (ClientOptions::pool_size): commands of
// concurrent threads (waiters, the renewal thread, releases) do not queue behind each other.
using ConnectionPool = detail::ConnectionPool<Connection>;
// Its limits for `size` connections to t: a get() waits at most one command and one connect.
ConnectionPool::Limits pool_limits(const Target& t, std::size_t size);
ConnectionPool::Open opener(Target t);

}  // namespace dblock::detail::redis
