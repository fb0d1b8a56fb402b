#include "backends/etcd/etcd_cluster.hpp"

#include <grpc/support/log.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "dblock/errors.hpp"

namespace dblock::detail::etcd {

namespace {

// gRPC logs connection failures to stderr (several lines per failed attempt). The CLI
// promises one line of stderr, and every failure reaches the caller as an exception anyway.
void discard_log(gpr_log_func_args*) {}

void quiet_grpc_log() {
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(&discard_log); });
}

// The channel's target. One endpoint: gRPC's own resolver ("dns:///host:port"). Several:
// gRPC's static address lists take numeric addresses only, so each host is resolved here
// (IPv4 first) into one "ipv4:a:p,b:p" (or "ipv6:") list; pick_first then fails over in order.
std::string target(const std::vector<Endpoint>& endpoints) {
  auto hostport = [](const std::string& host, int port) {
    bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  };
  if (endpoints.size() == 1) return "dns:///" + hostport(endpoints[0].host, endpoints[0].port);
  std::vector<std::string> v4, v6;
  for (const auto& e : endpoints) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(e.host.c_str(), nullptr, &hints, &found) != 0 || !found)
      throw UnavailableError("etcd: cannot resolve " + e.host);
    std::string a4, a6;
    for (auto* a = found; a; a = a->ai_next) {
      char text[NI_MAXHOST];
      if (getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) continue;
      if (a->ai_family == AF_INET && a4.empty()) a4 = text;
      if (a->ai_family == AF_INET6 && a6.empty()) a6 = text;
    }
    freeaddrinfo(found);
    if (!a4.empty()) v4.push_back(hostport(a4, e.port));
    if (!a6.empty()) v6.push_back(hostport(a6, e.port));
  }
  auto join = [](const char* scheme, const std::vector<std::string>& list) {
    std::string s = scheme;
    for (std::size_t i = 0; i < list.size(); ++i) s += (i ? "," : "") + list[i];
    return s;
  };
  if (v4.size() >= v6.size()) return join("ipv4:", v4);
  return join("ipv6:", v6);
}

// gRPC takes deadlines on the system clock only; ours are on the monotonic one.
std::chrono::system_clock::time_point deadline(Clock::time_point t) {
  return std::chrono::system_clock::now() + std::chrono::duration_cast<std::chrono::system_clock::duration>(t - Clock::now());
}

// A transaction that only reads (its compares and ranges) can be sent twice.
bool reads_only(const pb::TxnRequest& t) {
  auto reads = [](const auto& ops) {
    return std::all_of(ops.begin(), ops.end(), [](const pb::RequestOp& op) { return op.has_request_range(); });
  };
  return reads(t.success()) && reads(t.failure());
}

}  // namespace

void throw_status(const grpc::Status& status, const std::string& endpoints, const std::string& what) {
  std::string m = "etcd: " + endpoints + ": " + what + ": " + status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      throw TimeoutError(m);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      throw UnavailableError(m);
    case grpc::StatusCode::INVALID_ARGUMENT:
      throw UsageError(m);
    default:
      throw InternalError(m);
  }
}

Cluster::Cluster(const std::vector<Endpoint>& endpoints, milliseconds connect_timeout, milliseconds call_timeout,
                 Security security)
    : call_timeout_(call_timeout), security_(std::move(security)) {
  quiet_grpc_log();
  for (const auto& e : endpoints) endpoints_ += (endpoints_.empty() ? "" : ",") + e.host + ":" + std::to_string(e.port);
  grpc::ChannelArguments args;
  // A restarted server is found again within a second, not gRPC's default backoff of up to 2 min.
  // The "min reconnect backoff" is in fact each attempt's shortest deadline (gRPC's subchannel
  // gives an attempt max(its backoff, this)): at 100 ms, with the backoff capped at 1 s, a
  // connection whose TCP and HTTP/2 handshakes take over a second never came up (a loaded
  // machine under TSan, every time). An attempt may take the whole connect timeout.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
              static_cast<int>(std::clamp<milliseconds::rep>(connect_timeout.count(), 100, 1 << 30)));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto credentials = grpc::InsecureChannelCredentials();
  if (security_.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security_.ca;  // empty: gRPC's default roots
    ssl.pem_cert_chain = security_.cert;
    ssl.pem_private_key = security_.key;
    credentials = grpc::SslCredentials(ssl);
    // Several endpoints share one channel, whose name the certificates are checked against:
    // the first endpoint's host (one endpoint: its own, as gRPC does by itself).
    if (endpoints.size() > 1) args.SetSslTargetNameOverride(endpoints[0].host);
  }
  channel_ = grpc::CreateCustomChannel(target(endpoints), credentials, args);
  if (!channel_->WaitForConnected(deadline(Clock::now() + connect_timeout))) {
    // A TLS handshake that failed looks like a server that never answered: say which it may be.
    throw UnavailableError("etcd: " + endpoints_ + ": no connection within the connect timeout (" +
                           std::to_string(connect_timeout.count()) + " ms)" +
                           (security_.tls ? ", or the TLS handshake failed (the server's certificate, its CA "
                                            "(ssl-ca), our client certificate, or a server without TLS)"
                                          : ""));
  }
  kv_ = pb::KV::NewStub(channel_);
  lease_ = pb::Lease::NewStub(channel_);
  watch_ = pb::Watch::NewStub(channel_);
  auth_ = pb::Auth::NewStub(channel_);
  if (!security_.user.empty()) authenticate();
}

void Cluster::authenticate() {
  pb::AuthenticateRequest req;
  req.set_name(security_.user);
  req.set_password(security_.password);
  pb::AuthenticateResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline(Clock::now() + call_timeout_));
  ctx.set_wait_for_ready(true);
  auto s = auth_->Authenticate(&ctx, req, &resp);
  // etcd answers a wrong user or password with INVALID_ARGUMENT ("authentication failed"), and
  // a server without auth with FAILED_PRECONDITION: credentials refused either way, not input.
  if (!s.ok())
    throw UnavailableError("etcd: " + endpoints_ + ": authenticate as '" + security_.user + "': " + s.error_message());
  std::lock_guard lk(token_mutex_);
  token_ = resp.token();
}

bool Cluster::token_renewed(const grpc::Status& s) {
  // A simple token expires after the server's --auth-token-ttl without use (5 min): the call
  // was refused, not applied, so it can be sent again with a new one.
  if (s.error_code() != grpc::StatusCode::UNAUTHENTICATED || security_.user.empty()) return false;
  authenticate();
  return true;
}

std::unique_ptr<grpc::ClientContext> Cluster::context(Clock::time_point until) const {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(deadline(until));
  // A call made while the channel reconnects (a server restart) waits for it, up to its
  // deadline, instead of failing at once: gRPC sends it only once connected, so even a write
  // cannot be applied twice. Client::open waits for the first connection itself.
  c->set_wait_for_ready(true);
  std::lock_guard lk(token_mutex_);
  if (!token_.empty()) c->AddMetadata("token", token_);
  return c;
}


// A call already sent when its connection breaks (the server restarting, a reset) fails with
// UNAVAILABLE whatever wait_for_ready says. One that changes nothing, or nothing more when
// done twice, is sent again, and then waits for the reconnection; all tries share one deadline.
template <class Call>
grpc::Status Cluster::send(Call call, bool repeat) {
  constexpr milliseconds pause{20};  // a server that answers UNAVAILABLE itself is not asked in a loop
  const auto until = Clock::now() + call_timeout_;
  for (bool renewed = false;;) {
    auto ctx = context(until);
    auto s = call(*ctx);
    if (!renewed && token_renewed(s)) {
      renewed = true;
      continue;
    }
    if (!repeat || s.error_code() != grpc::StatusCode::UNAVAILABLE || Clock::now() + pause >= until) return s;
    std::this_thread::sleep_for(pause);
  }
}

seconds Cluster::grant(std::int64_t id, seconds ttl) {
  pb::LeaseGrantRequest req;
  req.set_id(id);
  req.set_ttl(ttl.count());
  pb::LeaseGrantResponse resp;
  auto s = once([&](grpc::ClientContext& ctx) { return lease_->LeaseGrant(&ctx, req, &resp); });
  if (!s.ok()) throw_status(s, endpoints_, "grant a lease");
  if (!resp.error().empty()) throw InternalError("etcd: " + endpoints_ + ": grant a lease: " + resp.error());
  return seconds{resp.ttl()};
}

bool Cluster::revoke(std::int64_t id) {
  pb::LeaseRevokeRequest req;
  req.set_id(id);
  pb::LeaseRevokeResponse resp;
  auto s = once([&](grpc::ClientContext& ctx) { return lease_->LeaseRevoke(&ctx, req, &resp); });
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return false;  // "requested lease not found"
  if (!s.ok()) throw_status(s, endpoints_, "revoke a lease");
  return true;
}

void Cluster::revoke_quietly(std::int64_t id) noexcept {
  try {
    revoke(id);
  } catch (...) {
  }
}

seconds Cluster::keep_alive(std::int64_t id) {
  // LeaseKeepAlive is a stream; one request and its answer per renewal (the watchdog paces them).
  pb::LeaseKeepAliveRequest req;
  req.set_id(id);
  pb::LeaseKeepAliveResponse resp;
  auto s = repeatable([&](grpc::ClientContext& ctx) {
    auto stream = lease_->LeaseKeepAlive(&ctx);
    bool answered = stream->Write(req) && stream->Read(&resp);
    stream->WritesDone();
    if (answered) {
      stream->Finish();
      return grpc::Status::OK;
    }
    ctx.TryCancel();
    auto f = stream->Finish();
    return f.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "no answer") : f;
  });
  if (!s.ok()) throw_status(s, endpoints_, "keep a lease alive");
  return seconds{std::max<std::int64_t>(resp.ttl(), 0)};
}

seconds Cluster::time_to_live(std::int64_t id) {
  pb::LeaseTimeToLiveRequest req;
  req.set_id(id);
  pb::LeaseTimeToLiveResponse resp;
  auto s = repeatable([&](grpc::ClientContext& ctx) { return lease_->LeaseTimeToLive(&ctx, req, &resp); });
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return seconds{0};
  if (!s.ok()) throw_status(s, endpoints_, "read a lease's time to live");
  return seconds{std::max<std::int64_t>(resp.ttl(), 0)};
}

pb::RangeResponse Cluster::range(const pb::RangeRequest& request) {
  pb::RangeResponse resp;
  auto s = repeatable([&](grpc::ClientContext& ctx) { return kv_->Range(&ctx, request, &resp); });
  if (!s.ok()) throw_status(s, endpoints_, "read " + request.key());
  return resp;
}

std::size_t Cluster::count(pb::RangeRequest request) {
  request.set_keys_only(true);
  request.set_count_only(false);
  return static_cast<std::size_t>(range(request).kvs_size());
}

pb::TxnResponse Cluster::txn(const pb::TxnRequest& request) {
  pb::TxnResponse resp;
  auto s = send([&](grpc::ClientContext& ctx) { return kv_->Txn(&ctx, request, &resp); }, reads_only(request));
  if (!s.ok()) throw_status(s, endpoints_, "transaction");
  return resp;
}

bool Cluster::txn_under_lease(const pb::TxnRequest& request, pb::TxnResponse* response) {
  auto s = once([&](grpc::ClientContext& ctx) { return kv_->Txn(&ctx, request, response); });
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return false;  // "requested lease not found"
  if (!s.ok()) throw_status(s, endpoints_, "transaction");
  return true;
}

bool Cluster::wait_deleted(const std::string& key, std::int64_t created, std::int64_t from,
                           Clock::time_point until, WaitCancel* cancel) {
  return wait_event(key, "", false, from, until, cancel, [&] {
    pb::RangeRequest r;
    r.set_key(key);
    r.set_keys_only(true);
    pb::RangeResponse got;
    auto rc = once([&](grpc::ClientContext& ctx) { return kv_->Range(&ctx, r, &got); });
    // Gone, made again since (the key we waited for was deleted before the watch began), or
    // unknown (the caller's own read will tell): look again.
    return !rc.ok() || got.kvs_size() == 0 || got.kvs(0).create_revision() != created;
  });
}

bool Cluster::wait_event(const std::string& key, const std::string& range_end, bool puts, std::int64_t from,
                         Clock::time_point until, WaitCancel* cancel, const std::function<bool()>& missed) {
  auto context = this->context(until);
  auto& ctx = *context;
  auto armed = WaitCancel::arm(cancel, [&ctx] { ctx.TryCancel(); });  // the stream ends, CANCELLED
  if (WaitCancel::cancelled(cancel)) return false;
  auto stream = watch_->Watch(&ctx);
  pb::WatchRequest req;
  auto* create = req.mutable_create_request();
  create->set_key(key);
  if (!range_end.empty()) create->set_range_end(range_end);
  // No start revision: the watch starts at the current one. A watch from a past revision is
  // "unsynced" in etcd once any other write landed since (another contender's put), and etcd
  // catches those up only every 100 ms: that was the tail of every contended hand-off. An
  // event between `from` and the watch's start is found by missed(), asked when the
  // `created` answer shows writes since `from - 1` (the revision the caller read at).
  if (!puts) create->add_filters(pb::WatchCreateRequest::NOPUT);
  bool changed = false;
  if (stream->Write(req)) {
    pb::WatchResponse resp;
    while (!changed && stream->Read(&resp)) {
      // Canceled: refused (or compacted). Either way the caller reads again.
      if (resp.canceled() || resp.compact_revision() > 0) changed = true;
      for (const auto& e : resp.events())
        if (puts || e.type() == mvccpb::Event::DELETE) changed = true;
      if (!changed && resp.created() && resp.header().revision() >= from) {
        try {
          changed = missed();
        } catch (...) {
          changed = true;  // unknown: the caller's own read will tell
        }
      }
    }
  }
  ctx.TryCancel();  // the watch's stream ends with this call
  stream->WritesDone();
  auto s = stream->Finish();
  if (changed) return true;
  // Our deadline, our own cancel, or the connection broke under the watch (a restart): no
  // event seen, and the caller looks again (its calls wait for the reconnection). Anything
  // else is the server refusing the watch.
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNAVAILABLE:
      return false;
    default:
      if (token_renewed(s)) return false;  // refused for its token: the caller looks again
      throw_status(s, endpoints_, "watch " + key);
  }
}

}  // namespace dblock::detail::etcd
