// dblock-bench on etcd: the etcd strategy next to bare gRPC calls on the same server, written
// directly on the stubs the library generates (rpc.grpc.pb.h), under a prefix of the run's
// own: `select1` = one `Range` of one key (the round trip every server backend is compared
// with), `bare-put-delete` = a `Put` under a lease granted once + a `DeleteRange` (what an
// uncontended lock cannot avoid: two writes), `bare-lease-put-delete` = the same with a
// `LeaseGrant` before and a `LeaseRevoke` after (what a lease per acquire costs: an unrenewed
// lock's; renewed ones share the Client's lease), `bare-recipe` = the lock recipe's own two
// Txns (put-if-absent with the first key's read, compare-and-delete),
// and for the hand-off `bare-watch-handoff`: 8 threads, each on a channel and a lease of its
// own, running etcd's lock recipe by hand (put-if-absent, watch the predecessor's deletion,
// delete to release).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "bench/backends/registry.hpp"
#include "bench/floors/floor.hpp"
#include "bench/scenarios/handoff_tally.hpp"
#include "bench/scenarios/peers.hpp"
#include "bench/support/util.hpp"
#include "core/pem_file.hpp"  // the library's own reading of ssl-* files
#include "core/url.hpp"  // the library's own URL parser: the baselines reach the same server
#include "rpc.grpc.pb.h"

namespace dblock_bench {

std::optional<std::string> etcd_skip_reason() {
  if (!env_url("DBLOCK_TEST_ETCD_URL"))
    return std::string("DBLOCK_TEST_ETCD_URL is not set (eval \"$(scripts/services env etcd)\")");
  return std::nullopt;
}

namespace {

namespace pb = etcdserverpb;
using Clock = std::chrono::steady_clock;

std::string prefix_end(std::string p) {  // clientv3.GetPrefixRangeEnd
  while (!p.empty()) {
    if (static_cast<unsigned char>(p.back()) < 0xff) {
      p.back() = static_cast<char>(p.back() + 1);
      return p;
    }
    p.pop_back();
  }
  return std::string(1, '\0');
}

void check(const grpc::Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(fmt::format("etcd baseline {}: {}", what, s.error_message()));
}

// The lock recipe's acquire (etcd's concurrency.Mutex): put `key` under `lease` unless it
// exists, and read the first key of `prefix` by creation in the same Txn.
pb::TxnRequest put_if_absent(const std::string& key, const std::string& prefix, std::int64_t lease) {
  pb::TxnRequest t;
  auto* absent = t.add_compare();
  absent->set_key(key);
  absent->set_target(pb::Compare::CREATE);
  absent->set_result(pb::Compare::EQUAL);
  absent->set_create_revision(0);
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value("x");
  put->set_lease(lease);
  auto* first = t.add_success()->mutable_request_range();
  first->set_key(prefix);
  first->set_range_end(prefix_end(prefix));
  first->set_sort_target(pb::RangeRequest::CREATE);
  first->set_sort_order(pb::RangeRequest::ASCEND);
  first->set_limit(1);
  first->set_keys_only(true);  // as dblock reads it: only the key and its creation
  return t;
}

// A bare connection: a channel of its own (plaintext to `target`, or the one given) and the
// three stubs.
struct Bare {
  explicit Bare(const std::string& target) : Bare(grpc::CreateChannel(target, grpc::InsecureChannelCredentials())) {}
  explicit Bare(std::shared_ptr<grpc::Channel> c)
      : channel(std::move(c)),
        kv(pb::KV::NewStub(channel)),
        lease(pb::Lease::NewStub(channel)),
        watch(pb::Watch::NewStub(channel)) {
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)))
      throw std::runtime_error("etcd baseline: no connection");
  }
  std::int64_t grant(std::int64_t ttl_s, std::int64_t id = 0) {
    grpc::ClientContext ctx;
    pb::LeaseGrantRequest req;
    req.set_id(id);
    req.set_ttl(ttl_s);
    pb::LeaseGrantResponse resp;
    check(lease->LeaseGrant(&ctx, req, &resp), "LeaseGrant");
    if (!resp.error().empty()) throw std::runtime_error("etcd baseline LeaseGrant: " + resp.error());
    return resp.id();
  }
  void revoke(std::int64_t id) {
    grpc::ClientContext ctx;
    pb::LeaseRevokeRequest req;
    req.set_id(id);
    pb::LeaseRevokeResponse resp;
    check(lease->LeaseRevoke(&ctx, req, &resp), "LeaseRevoke");
  }
  void put(const std::string& key, std::int64_t lease_id) {
    grpc::ClientContext ctx;
    pb::PutRequest req;
    req.set_key(key);
    req.set_value("x");
    req.set_lease(lease_id);
    pb::PutResponse resp;
    check(kv->Put(&ctx, req, &resp), "Put");
  }
  void del(const std::string& key, const std::string& end = {}) {
    grpc::ClientContext ctx;
    pb::DeleteRangeRequest req;
    req.set_key(key);
    if (!end.empty()) req.set_range_end(end);
    pb::DeleteRangeResponse resp;
    check(kv->DeleteRange(&ctx, req, &resp), "DeleteRange");
  }
  pb::TxnResponse txn(const pb::TxnRequest& req) {
    grpc::ClientContext ctx;
    pb::TxnResponse resp;
    check(kv->Txn(&ctx, req, &resp), "Txn");
    return resp;
  }
  pb::RangeResponse range(const pb::RangeRequest& req) {
    grpc::ClientContext ctx;
    pb::RangeResponse resp;
    check(kv->Range(&ctx, req, &resp), "Range");
    return resp;
  }

  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Watch::Stub> watch;
};

// The lock recipe's own two writes (etcd's concurrency.Mutex, `etcdctl lock`), which a lock
// cannot do without: a plain Put would overwrite a holder's key and a plain DeleteRange a
// successor's. Acquire: put `prefix`k under `lease` unless it exists and read the prefix's
// first key by creation in the same Txn; release: delete it only if it is the key we created.
void bare_recipe(Bare& bare, const std::string& prefix, std::int64_t lease) {
  const std::string key = prefix + "k";
  auto got = bare.txn(put_if_absent(key, prefix, lease));
  if (!got.succeeded()) throw std::runtime_error("etcd bare-recipe: the key was there already");
  pb::TxnRequest release;
  auto* ours = release.add_compare();
  ours->set_key(key);
  ours->set_target(pb::Compare::CREATE);
  ours->set_result(pb::Compare::EQUAL);
  ours->set_create_revision(got.header().revision());
  release.add_success()->mutable_request_delete_range()->set_key(key);
  if (!bare.txn(release).succeeded()) throw std::runtime_error("etcd bare-recipe: our key was gone");
}

// One waiter of the bare hand-off: etcd's lock recipe (Go's concurrency.Mutex) on the raw
// stubs, with one lease for the thread's whole run (as a Go session has): put our key if
// absent and read the first key in one Txn; while a key created before ours remains, watch
// the last such key's deletion from the revision read + 1; release = DeleteRange of our key.
// Timed as run_handoff times dblock's: from just before the holder's release to when the
// next holder knows it holds; no barging (a thread contends again only once another won).
void bare_handoff_worker(const std::string& target, const std::string& prefix, HandoffTally& sh, std::size_t warmup,
                         std::size_t n) {
  try {
    Bare b(target);
    const auto lease_id = b.grant(600);
    const std::string key = prefix + fmt::format("{:x}", lease_id);
    std::size_t released_grant = static_cast<std::size_t>(-1);
    for (;;) {
      {
        std::unique_lock lk(sh.m);
        sh.cv.wait(lk, [&] { return sh.stop || sh.grants != released_grant; });
        if (sh.stop) break;
      }
      pb::TxnRequest t = put_if_absent(key, prefix, lease_id);
      pb::TxnResponse tr;
      {
        grpc::ClientContext ctx;
        check(b.kv->Txn(&ctx, t, &tr), "Txn");
      }
      if (!tr.succeeded()) throw std::runtime_error("etcd bare hand-off: our key already existed");
      const std::int64_t mine = tr.header().revision();
      bool held = tr.responses(1).response_range().kvs_size() > 0 &&
                  tr.responses(1).response_range().kvs(0).create_revision() == mine;
      bool quit = false;
      while (!held && !quit) {
        pb::RangeRequest before = t.success(1).request_range();
        before.set_sort_order(pb::RangeRequest::DESCEND);
        before.set_max_create_revision(mine - 1);
        auto r = b.range(before);
        if (r.kvs_size() == 0) {
          held = true;
          break;
        }
        grpc::ClientContext ctx;  // bounded, so that a stop is seen within a second
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
        auto stream = b.watch->Watch(&ctx);
        pb::WatchRequest w;
        auto* create = w.mutable_create_request();
        create->set_key(r.kvs(0).key());
        create->set_start_revision(r.header().revision() + 1);
        create->add_filters(pb::WatchCreateRequest::NOPUT);
        bool deleted = false;
        if (stream->Write(w)) {
          pb::WatchResponse resp;
          while (!deleted && stream->Read(&resp))
            for (const auto& e : resp.events())
              if (e.type() == mvccpb::Event::DELETE) deleted = true;
        }
        ctx.TryCancel();
        stream->Finish();
        std::lock_guard lk(sh.m);
        quit = sh.stop;
      }
      auto got = Clock::now();
      if (quit) {
        b.del(key);
        break;
      }
      {
        std::lock_guard lk(sh.m);
        if (sh.stop) {
          quit = true;
        } else {
          sh.granted(static_cast<std::uint64_t>(mine), got, warmup, n);  // the key's revision is its fence
          released_grant = sh.grants;
        }
      }
      if (!quit) {
        std::lock_guard lk(sh.m);
        sh.released_at = Clock::now();
      }
      b.del(key);
      if (quit) break;
    }
    b.revoke(lease_id);
  } catch (...) {
    sh.fail(std::current_exception());
  }
}

std::vector<double> run_bare_handoff(const std::string& target, const std::string& prefix, std::size_t warmup,
                                     std::size_t n) {
  fmt::print(stderr, "dblock-bench: etcd/bare-watch-handoff: {} threads, {} + {} warm-up hand-offs\n", kHandoffWorkers,
             n, warmup);
  HandoffTally sh("etcd/bare-watch-handoff");
  std::vector<std::thread> threads;
  for (int i = 0; i < kHandoffWorkers; ++i)
    threads.emplace_back(bare_handoff_worker, target, prefix, std::ref(sh), warmup, n);
  sh.await(threads, n);
  auto s = summarize(sh.samples);
  fmt::print(stderr, "dblock-bench: etcd/bare-watch-handoff: {} hand-offs, p50 {:.1f} us, p99 {:.1f} us\n", s.samples,
             s.p50_us, s.p99_us);
  return std::move(sh.samples);
}

}  // namespace

std::function<void()> etcd_bare_cycle(const std::string& url, const std::string& /*table*/) {
  const auto u = dblock::detail::parse_url(url);
  if (u.hosts.empty()) throw std::runtime_error("etcd: no endpoint in " + u.redacted());
  const std::string target = fmt::format("{}:{}", u.hosts[0].host, u.hosts[0].port ? u.hosts[0].port : 2379);
  // The URL's transport, as the library reads it (etcds://, or any ssl-* parameter). No token:
  // where etcd's auth is on, the client certificate's name is the user.
  auto credentials = grpc::InsecureChannelCredentials();
  if (u.scheme != "etcd" || !u.query.empty()) {
    grpc::SslCredentialsOptions ssl;
    auto param = [&](const char* key) {
      auto at = u.query.find(key);
      return at == u.query.end() ? std::string() : dblock::detail::read_pem_file("etcd", key, at->second);
    };
    ssl.pem_root_certs = param("ssl-ca");
    ssl.pem_cert_chain = param("ssl-cert");
    ssl.pem_private_key = param("ssl-key");
    credentials = grpc::SslCredentials(ssl);
  }
  struct Recipe {  // the channel and a lease of its own, revoked with it
    Recipe(std::shared_ptr<grpc::Channel> c, std::string p) : bare(std::move(c)), lease(bare.grant(600)), prefix(std::move(p)) {}
    ~Recipe() {
      try {
        bare.revoke(lease);
      } catch (...) {  // its keys go with the lease's TTL anyway
      }
    }
    Bare bare;
    std::int64_t lease;
    std::string prefix;
  };
  auto r = std::make_shared<Recipe>(grpc::CreateChannel(target, credentials), "/" + u.path + "/bench-tls-bare-recipe/");
  return [r] { bare_recipe(r->bare, r->prefix, r->lease); };
}

BackendReport run_etcd(const Options& opt) {
  const std::string base = env_url("DBLOCK_TEST_ETCD_URL");
  auto u = dblock::detail::parse_url(base);
  if (u.hosts.empty()) throw std::runtime_error("etcd: no endpoint in " + base);
  const std::string target = fmt::format("{}:{}", u.hosts[0].host, u.hosts[0].port ? u.hosts[0].port : 2379);
  Bare bare(target);
  const std::string top = "/" + u.path;
  ScratchTable table("etcd", [&](const std::string& name) {
    auto p = top + "/" + name + "/";
    bare.del(p, prefix_end(p));
  });
  const std::string url = base + "/" + table.name(), root = top + "/" + table.name();
  auto first = dblock::Client::open(url);
  fmt::print(stderr, "dblock-bench: etcd: prefix {} at {}\n", root, first->url());

  const std::string key = root + "/bench-bare/k";
  const auto run_lease = bare.grant(3600);  // the bare pair's lease, granted once
  auto select1 = [&] {
    pb::RangeRequest r;
    r.set_key(key);
    bare.range(r);
  };
  auto put_delete = [&] {
    bare.put(key, run_lease);
    bare.del(key);
  };
  const std::string recipe_prefix = root + "/bench-bare-recipe/";
  auto recipe = [&] { bare_recipe(bare, recipe_prefix, run_lease); };
  auto lease_put_delete = [&] {
    auto id = bare.grant(30);
    bare.put(key, id);
    bare.del(key);
    bare.revoke(id);
  };

  BackendReport rep;
  {
    // etcd answers HTTP/1 on its client port too: {"etcdserver":"3.4.23","etcdcluster":"3.4.0"}.
    std::string version = "?";
    const std::string answer = tcp_ask(u.hosts[0].host, u.hosts[0].port ? u.hosts[0].port : 2379,
                                       "GET /version HTTP/1.0\r\nHost: etcd\r\n\r\n");
    if (auto at = answer.find("\"etcdserver\":\""); at != std::string::npos)
      version = answer.substr(at + 14, answer.find('"', at + 14) - at - 14);
    rep.server = fmt::format("etcd {} (a single member), gRPC {}; a write waits for the WAL's fsync", version,
                             grpc::Version());
  }
  rep.notes.push_back(fmt::format(
      "etcd: server at {} (a single member; etcd fsyncs its WAL before it answers a write), gRPC {}; prefix {} "
      "(made for the run, deleted at the end). Baselines (the bare generated stubs on one channel): `select1` = one "
      "`Range` of one key (1 round trip, a linearizable read: no disk write); `bare-put-delete` = `Put` of a key "
      "under a lease granted once for the run + `DeleteRange` of it (2 round trips, 2 writes), what an uncontended "
      "lock cannot avoid; `bare-lease-put-delete` = `LeaseGrant` + `Put` + `DeleteRange` + `LeaseRevoke` (4 round "
      "trips, 4 writes), what a lease per acquire costs (dblock's unrenewed locks; renewed ones share one lease per "
      "Client and TTL: acquire = Txn put-if-absent with the first key's read, release = Txn compare-and-delete); "
      "`bare-recipe` = those two Txns themselves under the run's lease (etcd's lock recipe, `etcdctl lock`'s "
      "statements: a lock cannot use a plain Put, which overwrites a holder's key, nor a plain DeleteRange, which "
      "deletes a successor's). "
      "`bare-watch-handoff`: 8 threads, "
      "each with its own channel and one lease for the run, etcd's lock recipe by hand (Txn put-if-absent + read the "
      "first key; Range of the last key created before ours; Watch of its deletion; DeleteRange to release). The "
      "`handoff-polling` scenario is the same as `handoff` here: waiters always watch their predecessor",
      first->url(), grpc::Version(), root));

  ServerRun run;
  run.backend = "etcd";
  run.url = url;
  run.first = first;
  run.strategies = {dblock::Strategy::etcd};
  run.baselines = {{"select1", select1, {}},
                   {"bare-put-delete", put_delete, {}},
                   {"bare-lease-put-delete", lease_put_delete, {}},
                   {"bare-recipe", recipe, {}}};
  run.compared_with = {{"etcd", {"bare-put-delete", "bare-lease-put-delete", "bare-recipe"}}};
  if (opt.wants_scenario("handoff"))
    run.floors.push_back({"bare-watch-handoff", {"etcd"}, [target, dir = root + "/bench-bare-handoff/"](
                                                              std::size_t w, std::size_t n) {
                            return run_bare_handoff(target, dir, w, n);
                          }});
  auto report = run_server(std::move(run), opt);
  bare.revoke(run_lease);
  rep.rows = std::move(report.rows);
  rep.notes.insert(rep.notes.end(), report.notes.begin(), report.notes.end());
  auto peers = run_peer_scenario(
      "etcd", url, {dblock::Strategy::etcd},
      {"python-etcd3", "etcd3_lock.py", PeerRuntime::python,
       "etcd3.client(host, port).lock(name, ttl=30).acquire(timeout=60) / .release(): a lease granted per "
       "acquire, a Txn put-if-never-created of /locks/NAME; a refused waiter watches the key for its next "
       "event and tries again (every waiter wakes at a release); release = Txn compare-value-and-delete, the "
       "lease left to expire"},
      opt);
  rep.rows.insert(rep.rows.end(), peers.rows.begin(), peers.rows.end());
  rep.notes.insert(rep.notes.end(), peers.notes.begin(), peers.notes.end());
  return rep;
}

}  // namespace dblock_bench
