#include "backends/redis/redis_tls.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "core/url.hpp"
#include "dblock/errors.hpp"

namespace dblock::detail::redis {

namespace {

// OpenSSL's newest error on this thread, in words (its queue is emptied).
std::string openssl_error() {
  char text[256] = "unknown error";
  unsigned long e = 0, last = 0;
  while ((e = ERR_get_error()) != 0) last = e;
  if (last) ERR_error_string_n(last, text, sizeof text);
  return text;
}

// The socket under OpenSSL, as a BIO of our own: OpenSSL's socket BIO writes with write(2),
// which raises SIGPIPE on a connection the server closed and so kills a process that does not
// ignore it (our users'). This one sends with MSG_NOSIGNAL, as the plaintext path does, which
// costs no system call more (blocking SIGPIPE around each write, as libpq does, costs four).
// The descriptor is hiredis' (it closes it); the BIO only borrows it.
int bio_fd(BIO* b) { return static_cast<int>(reinterpret_cast<std::intptr_t>(BIO_get_data(b))); }

bool retriable(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

int bio_write(BIO* b, const char* data, int size) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::send(bio_fd(b), data, static_cast<std::size_t>(size), MSG_NOSIGNAL);
  if (n < 0 && retriable(errno)) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int bio_read(BIO* b, char* data, int size) {
  BIO_clear_retry_flags(b);
  const ssize_t n = ::recv(bio_fd(b), data, static_cast<std::size_t>(size), 0);
  if (n < 0 && retriable(errno)) BIO_set_retry_read(b);
  return static_cast<int>(n);
}

long bio_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }  // nothing is buffered here

BIO* socket_bio(int fd) {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "dblock socket");
    if (m && (BIO_meth_set_write(m, bio_write) != 1 || BIO_meth_set_read(m, bio_read) != 1 ||
              BIO_meth_set_ctrl(m, bio_ctrl) != 1)) {
      BIO_meth_free(m);
      m = nullptr;
    }
    return m;
  }();
  BIO* b = method ? BIO_new(method) : nullptr;
  if (!b) return nullptr;
  BIO_set_data(b, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)));
  BIO_set_init(b, 1);
  return b;
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// errno for a failed SSL_read or SSL_write: a timeout stays EAGAIN; a connection that ended
// without a word is a reset; TLS's own failure is EPROTO, with its words in `error`.
void set_errno(SSL* ssl, int rc, int saved, std::string& error) {
  error.clear();
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      errno = EAGAIN;
      break;
    case SSL_ERROR_ZERO_RETURN:
      errno = EPIPE;
      break;
    case SSL_ERROR_SYSCALL:
      errno = saved ? saved : ECONNRESET;
      break;
    default:
      error = openssl_error();
      errno = EPROTO;
  }
}

}  // namespace

TlsContext::TlsContext(const std::string& ca_file, const std::string& cert_file, const std::string& key_file) {
  ERR_clear_error();
  ctx_ = SSL_CTX_new(TLS_client_method());
  if (!ctx_) throw InternalError("redis: cannot make a TLS context: " + openssl_error());
  auto fail = [&](const std::string& what) {
    std::string why = openssl_error();
    SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    throw UsageError("redis: " + what + ": " + why);
  };
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  if (!ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr) != 1) fail("ssl-ca file '" + ca_file + "'");
  } else if (SSL_CTX_set_default_verify_paths(ctx_) != 1) {
    fail("the system's CA certificates");
  }
  if (!cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx_, cert_file.c_str()) != 1) fail("ssl-cert file '" + cert_file + "'");
    if (SSL_CTX_use_PrivateKey_file(ctx_, key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      fail("ssl-key file '" + key_file + "'");
    if (SSL_CTX_check_private_key(ctx_) != 1) fail("ssl-key '" + key_file + "' is not ssl-cert's key");
  }
}

TlsContext::~TlsContext() {
  if (ctx_) SSL_CTX_free(ctx_);
}

TlsStream::TlsStream(const TlsContext& context, int fd, const std::string& host, const std::string& where) : fd_(fd) {
  ERR_clear_error();
  ssl_ = SSL_new(context.get());
  BIO* bio = ssl_ ? socket_bio(fd) : nullptr;
  if (!bio) {
    if (ssl_) SSL_free(ssl_);
    throw InternalError("redis: cannot start TLS to " + where + ": " + openssl_error());
  }
  SSL_set_bio(ssl_, bio, bio);  // one BIO both ways: the SSL owns it (one reference)
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  bool named = is_ip_address(host) ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1
                                   : X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0) == 1 &&
                                         SSL_set_tlsext_host_name(ssl_, host.c_str()) == 1;
  int rc = 0;
  if (named) rc = SSL_connect(ssl_);
  if (rc != 1) {
    std::string why;
    long verified = SSL_get_verify_result(ssl_);
    const int saved = errno, e = SSL_get_error(ssl_, rc);
    if (!named) why = "cannot check the name " + host;
    else if (verified != X509_V_OK) why = X509_verify_cert_error_string(verified);
    // A blocking socket's timeout reads as "try again" (a server that does not speak TLS
    // waits for the rest of what it takes for a command).
    else if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE || (e == SSL_ERROR_SYSCALL && saved == EAGAIN))
      why = "no answer within the connect timeout (a server without TLS on that port?)";
    else if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) why = "the server closed the connection";
    else why = openssl_error();
    SSL_free(ssl_);
    ssl_ = nullptr;
    throw UnavailableError("redis: " + where + ": TLS handshake failed: " + why);
  }
}

TlsStream::~TlsStream() {
  if (ssl_) SSL_free(ssl_);
}

ssize_t TlsStream::write(const char* data, std::size_t size) {
  ERR_clear_error();
  int n = SSL_write(ssl_, data, static_cast<int>(std::min<std::size_t>(size, 1 << 30)));
  if (n > 0) return n;
  set_errno(ssl_, n, errno, error_);
  return -1;
}

ssize_t TlsStream::read(char* data, std::size_t size) {
  ERR_clear_error();
  int n = SSL_read(ssl_, data, static_cast<int>(std::min<std::size_t>(size, 1 << 30)));
  if (n > 0) return n;
  const int saved = errno;
  const int e = SSL_get_error(ssl_, n);
  // A close, with TLS's close_notify or (as a restarting server does) without.
  if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && saved == 0 && ERR_peek_error() == 0)) return 0;
  set_errno(ssl_, n, saved, error_);
  return -1;
}

bool TlsStream::pending() const { return SSL_pending(ssl_) > 0; }

std::string TlsStream::version() const { return SSL_get_version(ssl_); }

bool TlsStream::idle_after_records() {
  const int flags = fcntl(fd_, F_GETFL);
  if (flags < 0 || fcntl(fd_, F_SETFL, flags | O_NONBLOCK) < 0) return false;
  ERR_clear_error();
  char c;
  int n = SSL_peek(ssl_, &c, 1);
  const bool idle = n <= 0 && SSL_get_error(ssl_, n) == SSL_ERROR_WANT_READ;
  fcntl(fd_, F_SETFL, flags);
  return idle;
}

std::shared_ptr<const TlsContext> tls_of(const Url& url) {
  std::string ca, cert, key;
  bool tls = url.scheme == "rediss";
  for (const auto& [name, value] : url.query) {
    if (name == "ssl-ca") ca = value;
    else if (name == "ssl-cert") cert = value;
    else if (name == "ssl-key") key = value;
    else throw UsageError("unknown " + url.scheme + " URL parameter '" + name + "' (known: ssl-ca, ssl-cert, ssl-key)");
    tls = true;
  }
  if (cert.empty() != key.empty()) throw UsageError("bad " + url.scheme + " URL: ssl-cert and ssl-key go together");
  return tls ? std::make_shared<const TlsContext>(ca, cert, key) : nullptr;
}

}  // namespace dblock::detail::redis
