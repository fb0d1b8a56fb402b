// TLS for the Redis connections (rediss://, or ssl-ca / ssl-cert / ssl-key on redis://,
// redlock:// and redis-sentinel://). Debian's hiredis 0.14 has no TLS: hiredis still connects
// the socket, formats the commands and parses the replies (its reader), and OpenSSL carries
// the bytes in between (docs/backends/redis.md, "TLS").
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace dblock::detail {
struct Url;
}

namespace dblock::detail::redis {

// The certificates of a URL, loaded once per Client: the CAs the server's certificate must
// chain to (none: the system's), and a client certificate with its key (both or neither).
// Throws UsageError for a file that cannot be read or used.
class TlsContext {
 public:
  TlsContext(const std::string& ca_file, const std::string& cert_file, const std::string& key_file);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  SSL_CTX* get() const noexcept { return ctx_; }

 private:
  SSL_CTX* ctx_ = nullptr;
};

// The TLS a URL asks for: rediss://, or any ssl-ca / ssl-cert / ssl-key parameter (other
// parameters are refused: UsageError); null for plaintext.
std::shared_ptr<const TlsContext> tls_of(const Url& url);

// One connection's TLS, over a connected blocking socket whose timeouts bound every call.
// The handshake checks the certificate's chain and that it names `host` (a DNS name or an IP
// address). Throws UnavailableError naming TLS and `where` when the handshake fails.
class TlsStream {
 public:
  TlsStream(const TlsContext& context, int fd, const std::string& host, const std::string& where);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;
  // As send(2) and recv(2): bytes moved, or -1 with errno set (EAGAIN on a timeout, EPIPE or
  // ECONNRESET on a closed connection); 0 from read: the server closed it. Writing never
  // raises SIGPIPE.
  ssize_t write(const char* data, std::size_t size);
  ssize_t read(char* data, std::size_t size);
  // Decrypted bytes already read from the socket: poll() does not see them.
  bool pending() const;
  // For an idle connection that poll() calls readable: true when that was only TLS's own
  // records (TLS 1.3 sends session tickets after the handshake), false when the server closed
  // it or sent data nobody asked for.
  bool idle_after_records();
  std::string version() const;  // the protocol negotiated ("TLSv1.3")
  // Why the last read or write failed, when TLS itself said (a server's alert: "tlsv13 alert
  // certificate required"); else empty.
  const std::string& error() const noexcept { return error_; }

 private:
  SSL* ssl_ = nullptr;
  int fd_;
  std::string error_;
};

}  // namespace dblock::detail::redis
