#include "backends/redis/redis_connection.hpp"

#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "dblock/errors.hpp"

namespace dblock::detail::redis {

namespace {

timeval to_timeval(milliseconds t) {
  if (t.count() < 1) t = milliseconds{1};
  timeval tv;
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  return tv;
}

// SHA1 of a script text (OpenSSL's): EVALSHA names scripts by it, and computing it here lets
// every connection (and every redlock node) use EVALSHA without a SCRIPT LOAD first.
std::string sha1_hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(), nullptr) != 1) throw std::bad_alloc();
  std::string out;
  char hex[3];
  for (unsigned int i = 0; i < size; ++i) std::snprintf(hex, sizeof hex, "%02x", digest[i]), out += hex;
  return out;
}

}  // namespace

Script::Script(std::string t) : text(std::move(t)), sha(sha1_hex(text)) {}

namespace {
constexpr const char* kServerFull = "ERR max number of clients reached";
}  // namespace

bool is_error(const redisReply& r, const char* prefix) {
  if (r.type != REDIS_REPLY_ERROR) return false;
  if (!prefix) return true;
  return std::strncmp(r.str, prefix, std::strlen(prefix)) == 0;
}

std::int64_t as_int(const redisReply& r) {
  if (r.type == REDIS_REPLY_INTEGER) return r.integer;
  if (r.type == REDIS_REPLY_STRING) {
    try {
      return std::stoll(std::string(r.str, r.len));
    } catch (const std::exception&) {
    }
  }
  throw InternalError("redis: unexpected reply (type " + std::to_string(r.type) + ") where a number was expected");
}

Connection::Connection(const Target& target) : Connection(target, target.connect_timeout) {}

Connection::Connection(const Target& target, milliseconds connect_timeout)
    : where_(target.where), command_timeout_(target.command_timeout) {
  try {
    open(target, connect_timeout);
  } catch (...) {  // a constructor that throws runs no destructor: free the context here
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
    throw;
  }
}

Connection::~Connection() {
  if (ctx_) redisFree(ctx_);
}

void Connection::open(const Target& t, milliseconds connect_timeout) {
  if (t.sentinels) open_primary(t, connect_timeout);
  else open_node(t, connect_timeout);
}

void Connection::open_node(const Target& t, milliseconds connect_timeout) {
  ctx_ = redisConnectWithTimeout(t.host.c_str(), t.port, to_timeval(connect_timeout));
  if (!ctx_) throw UnavailableError("redis: cannot allocate a connection to " + where_);
  if (ctx_->err) {
    // hiredis reports a connect timeout as an I/O error with errno ETIMEDOUT/EINPROGRESS.
    if (errno == ETIMEDOUT || errno == EINPROGRESS || std::strstr(ctx_->errstr, "timed out"))
      throw TimeoutError("redis: connecting to " + where_ + " timed out after " +
                         std::to_string(connect_timeout.count()) + " ms");
    throw UnavailableError("redis: cannot connect to " + where_ + ": " + ctx_->errstr);
  }
  if (t.tls) {
    set_timeout(connect_timeout);  // the handshake is part of connecting
    tls_ = std::make_unique<TlsStream>(*t.tls, ctx_->fd, t.host, where_);
  }
  set_timeout(command_timeout_);
  if (!t.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!t.user.empty()) auth.push_back(t.user);
    auth.push_back(t.password);
    auto r = raw(auth);
    // The reply text never contains the password; say only that it was refused.
    if (is_error(*r, kServerFull)) fail_reply(*r);
    if (is_error(*r)) throw UnavailableError("redis: " + where_ + " refused the credentials");
  }
  if (t.db != 0) command({"SELECT", std::to_string(t.db)});
}

bool Connection::still_connected() noexcept {
  if (!usable()) return false;
  // An idle connection has nothing to read; readable means EOF (or garbage): either way unusable.
  pollfd p{ctx_->fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) != 0 && !(p.revents == POLLIN && only_tls_records())) return false;
  return !follows_primary_ || master_still_here();
}

void Connection::set_timeout(milliseconds t) {
  if (ctx_ && redisSetTimeout(ctx_, to_timeval(t)) != REDIS_OK) fail_io();
}

void Connection::fail_io() {
  std::string what = ctx_ ? ctx_->errstr : "no connection";
  int err = ctx_ ? ctx_->err : REDIS_ERR_OTHER;
  if (err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT))
    throw TimeoutError("redis: a command to " + where_ + " timed out");
  if (err == REDIS_ERR_EOF || err == REDIS_ERR_IO)
    throw UnavailableError("redis: connection to " + where_ + " lost: " + what);
  throw InternalError("redis: protocol error from " + where_ + ": " + what);
}

void Connection::abandon(const char* why) noexcept {
  if (!ctx_ || ctx_->err) return;
  ctx_->err = REDIS_ERR_OTHER;
  std::snprintf(ctx_->errstr, sizeof(ctx_->errstr), "%s", why);
}

void Connection::fail_reply(const redisReply& r) {
  std::string text(r.str, r.len);
  if (follows_primary_)
    for (const char* moved : {"LOADING", "READONLY", "MASTERDOWN"})
      if (is_error(r, moved)) abandon("not the master now");
  for (const char* down : {"LOADING", "READONLY", "MASTERDOWN", "BUSY", "TRYAGAIN", "CLUSTERDOWN"})
    if (is_error(r, down)) throw UnavailableError("redis: " + where_ + " cannot serve now: " + text);
  // A server at maxclients accepts the connection, sends this and closes it: a slot frees
  // when another client leaves, so a wait goes on (ServerFullError).
  if (is_error(r, kServerFull)) throw ServerFullError("redis: " + where_ + " has no client slot free: " + text);
  for (const char* denied : {"NOAUTH", "WRONGPASS", "NOPERM"})
    if (is_error(r, denied)) throw UnavailableError("redis: " + where_ + " refused access: " + text);
  throw InternalError("redis: " + where_ + " answered with an error: " + text);
}

Reply Connection::raw(const std::vector<std::string>& argv) {
  append(argv);
  return read();
}

Reply Connection::command(const std::vector<std::string>& argv) {
  auto r = raw(argv);
  if (is_error(*r)) fail_reply(*r);
  return r;
}

Reply Connection::eval(const Script& s, const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  append_eval(s, true, keys, args);
  auto r = read();
  if (is_error(*r, "NOSCRIPT")) {  // sending the text also caches it again
    append_eval(s, false, keys, args);
    r = read();
  }
  if (is_error(*r)) fail_reply(*r);
  return r;
}

std::string format_eval(const Script& s, bool by_sha, const std::vector<std::string>& keys,
                        const std::vector<std::string>& args) {
  // Pointers into the callers' strings, which hiredis copies into the RESP text. Small
  // fixed arrays: our scripts take at most 2 keys and 4 args.
  constexpr std::size_t inline_max = 12;
  const std::size_t n = 3 + keys.size() + args.size();
  const char* p_small[inline_max];
  std::size_t len_small[inline_max];
  std::vector<const char*> p_big;
  std::vector<std::size_t> len_big;
  if (n > inline_max) p_big.resize(n), len_big.resize(n);
  const char** p = n > inline_max ? p_big.data() : p_small;
  std::size_t* len = n > inline_max ? len_big.data() : len_small;
  char numkeys[24];
  int numkeys_len = std::snprintf(numkeys, sizeof numkeys, "%zu", keys.size());
  const std::string& body = by_sha ? s.sha : s.text;
  p[0] = by_sha ? "EVALSHA" : "EVAL";
  len[0] = by_sha ? 7 : 4;
  p[1] = body.data();
  len[1] = body.size();
  p[2] = numkeys;
  len[2] = static_cast<std::size_t>(numkeys_len);
  std::size_t i = 3;
  for (const auto& k : keys) p[i] = k.data(), len[i++] = k.size();
  for (const auto& a : args) p[i] = a.data(), len[i++] = a.size();
  char* text = nullptr;
  int size = redisFormatCommandArgv(&text, static_cast<int>(n), p, len);
  if (size < 0 || !text) throw std::bad_alloc();
  std::string out(text, static_cast<std::size_t>(size));
  redisFreeCommand(text);
  return out;
}

void Connection::append_eval(const Script& s, bool by_sha, const std::vector<std::string>& keys,
                             const std::vector<std::string>& args) {
  append_formatted(format_eval(s, by_sha, keys, args));
}

void Connection::append_formatted(const std::string& command) {
  if (!usable()) fail_io();
  if (redisAppendFormattedCommand(ctx_, command.data(), command.size()) != REDIS_OK) fail_io();
}

Reply Connection::take_buffered() {
  if (!usable()) fail_io();
  void* out = nullptr;
  if (redisGetReplyFromReader(ctx_, &out) != REDIS_OK) {
    if (out) freeReplyObject(out);
    fail_io();
  }
  return Reply(static_cast<redisReply*>(out));
}

void Connection::read_available() {
  if (!usable()) fail_io();
  char buf[16 * 1024];
  do {  // and what TLS decrypted beyond it: poll() cannot see that
    auto n = receive_some(buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      ctx_->err = n == 0 ? REDIS_ERR_EOF : REDIS_ERR_IO;
      std::snprintf(ctx_->errstr, sizeof(ctx_->errstr), "%s",
                    n == 0                               ? "Server closed the connection"
                    : tls_ && !tls_->error().empty()     ? ("TLS: " + tls_->error()).c_str()
                                                         : std::strerror(saved));
      errno = saved;
      fail_io();
    }
    if (redisReaderFeed(ctx_->reader, buf, static_cast<std::size_t>(n)) != REDIS_OK) {
      ctx_->err = REDIS_ERR_PROTOCOL;
      std::snprintf(ctx_->errstr, sizeof(ctx_->errstr), "%s", ctx_->reader->errstr);
      fail_io();
    }
  } while (tls_ && tls_->pending());
}

ssize_t Connection::send_some(const char* data, std::size_t size) {
  return tls_ ? tls_->write(data, size) : ::send(ctx_->fd, data, size, MSG_NOSIGNAL);
}

ssize_t Connection::receive_some(char* data, std::size_t size) {
  return tls_ ? tls_->read(data, size) : ::recv(ctx_->fd, data, size, 0);
}

void Connection::append(const std::vector<std::string>& argv) {
  if (!usable()) fail_io();
  std::vector<const char*> p;
  std::vector<size_t> len;
  for (const auto& a : argv) {
    p.push_back(a.data());
    len.push_back(a.size());
  }
  if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), p.data(), len.data()) != REDIS_OK) fail_io();
}

void Connection::flush() {
  if (!usable()) fail_io();
  while (sdslen(ctx_->obuf) > 0) {
    auto n = send_some(ctx_->obuf, sdslen(ctx_->obuf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int saved = errno;  // fail_io() tells a timeout (EAGAIN) by it
      ctx_->err = REDIS_ERR_IO;
      std::snprintf(ctx_->errstr, sizeof(ctx_->errstr), "%s",
                    tls_ && !tls_->error().empty() ? ("TLS: " + tls_->error()).c_str() : std::strerror(saved));
      errno = saved;
      fail_io();
    }
    // Drop what was sent from hiredis' output buffer (an sds string: sdslen/sdssetlen are
    // the header's inline accessors; its sdsrange is not exported to C++ callers).
    const auto left = sdslen(ctx_->obuf) - static_cast<std::size_t>(n);
    std::memmove(ctx_->obuf, ctx_->obuf + n, left);
    sdssetlen(ctx_->obuf, left);
    ctx_->obuf[left] = '\0';
  }
}

Reply Connection::read() {
  flush();
  for (;;) {
    if (auto r = take_buffered()) return r;
    read_available();
  }
}

ConnectionPool::Limits pool_limits(const Target& t, std::size_t size) {
  return ConnectionPool::Limits{size, size, t.command_timeout + t.connect_timeout, "redis at " + t.where};
}

ConnectionPool::Open opener(Target t) {
  return [t = std::move(t)] { return std::make_unique<Connection>(t); };
}

}  // namespace dblock::detail::redis
