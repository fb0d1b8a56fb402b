// The etcd cluster behind a URL's endpoints: one gRPC channel, the few calls dblock makes on
// it (etcd's v3 API: KV, Lease, Watch, Authenticate), and the one place where gRPC statuses
// become dblock errors. Every call has a deadline (the statement timeout), so none hangs on a
// dead server; within it, a read or keep-alive whose connection broke under it is sent again.
// The channel is plain or TLS (with a client certificate), and with a user every call carries
// its auth token, taken again when the server no longer knows it.
//
// Thread-safety: a gRPC channel and its stubs are safe to share; each call has a context of
// its own, so any thread may call; the token has its mutex.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/driver.hpp"
#include "rpc.grpc.pb.h"

namespace dblock::detail::etcd {

namespace pb = etcdserverpb;
using std::chrono::seconds;

// Throws the dblock error for a failed call; `what` says which call on what, for the
// one-line message.
[[noreturn]] void throw_status(const grpc::Status& status, const std::string& endpoints, const std::string& what);

struct Endpoint {
  std::string host;
  int port = 0;
};

// How the channel is secured and who we are (etcd_backend.cpp reads them from the URL).
struct Security {
  bool tls = false;
  std::string ca;    // PEM: the CAs the server's certificate must chain to (empty: the system's)
  std::string cert;  // PEM: our certificate chain and its key, for --client-cert-auth
  std::string key;
  std::string user;  // etcd's auth: Authenticate's token on every call (empty: none, or the
  std::string password;  // client certificate's common name when the server takes that)
};

class Cluster {
 public:
  // Connects to one of `endpoints`; throws UnavailableError unless a connection is up within
  // `connect_timeout`.
  Cluster(const std::vector<Endpoint>& endpoints, milliseconds connect_timeout, milliseconds call_timeout,
          Security security = {});

  // "host:port,host:port", for messages.
  const std::string& endpoints() const noexcept { return endpoints_; }

  // A lease with the id we chose (so that it can be named before the answer comes back) and
  // `ttl`; answers the TTL the server granted (it raises one below its minimum).
  seconds grant(std::int64_t id, seconds ttl);
  // Revokes the lease and so deletes its keys. False: there was no such lease (expired).
  bool revoke(std::int64_t id);
  // revoke() that never throws, for destructors: a lease we could not revoke expires by itself.
  void revoke_quietly(std::int64_t id) noexcept;
  // One keep-alive: the lease's TTL restarts; answers it, or 0 when the lease is gone.
  seconds keep_alive(std::int64_t id);
  // The time the lease has left (0: gone).
  seconds time_to_live(std::int64_t id);

  pb::RangeResponse range(const pb::RangeRequest& request);
  // How many keys range(request) answers. Not its `count`: etcd counts a range before its
  // revision filters (max_create_revision, ...) apply, count_only too.
  std::size_t count(pb::RangeRequest request);
  pb::TxnResponse txn(const pb::TxnRequest& request);
  // txn() for a transaction that puts under a lease: false (and nothing done) when the
  // server has no such lease any more (it expired, or was revoked).
  bool txn_under_lease(const pb::TxnRequest& request, pb::TxnResponse* response);

  // Waits until `key`, as created at revision `created`, is deleted at revision `from` or
  // later, or until `until`. True: it was deleted (or may have been), and the caller must look
  // again. A key of the same name created since is another key: a Client's keys are named by
  // its lease, so a holder that releases and queues again at once puts the same name back.
  // A cancel of `cancel` ends the wait at once (false).
  bool wait_deleted(const std::string& key, std::int64_t created, std::int64_t from, Clock::time_point until,
                    WaitCancel* cancel = nullptr);
  // The same for any key in [key, range_end) (range_end empty: `key` alone), deleted or, with
  // `puts`, written. The watch starts at the current revision; when that is past `from - 1`,
  // missed() says whether such an event came before the watch did (true, or a throw: the
  // caller must look again).
  bool wait_event(const std::string& key, const std::string& range_end, bool puts, std::int64_t from,
                  Clock::time_point until, WaitCancel* cancel, const std::function<bool()>& missed);

 private:
  std::unique_ptr<grpc::ClientContext> context(Clock::time_point until) const;
  // Sends call(context) once, or, `repeat`ed, again while its connection breaks under it. A
  // call refused for an expired token is sent again after authenticate() either way.
  template <class Call>
  grpc::Status send(Call call, bool repeat);
  template <class Call>
  grpc::Status repeatable(Call call) { return send(call, true); }
  template <class Call>
  grpc::Status once(Call call) { return send(call, false); }
  // Takes a token for the URL's user; throws UnavailableError when refused.
  void authenticate();
  // The call failed for its token: a new one was taken, and it may be sent again.
  bool token_renewed(const grpc::Status& s);

  std::string endpoints_;
  milliseconds call_timeout_;
  Security security_;
  mutable std::mutex token_mutex_;
  std::string token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Auth::Stub> auth_;
  std::unique_ptr<pb::KV::Stub> kv_;
  std::unique_ptr<pb::Lease::Stub> lease_;
  std::unique_ptr<pb::Watch::Stub> watch_;
};

}  // namespace dblock::detail::etcd
