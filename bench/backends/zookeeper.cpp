// dblock-bench on ZooKeeper: the zookeeper strategy next to bare C-client round trips on the
// same server, under a root of the run's own: `select1` = one zoo_exists (the round trip
// every server backend is compared with), `bare-create-delete` = what one uncontended lock
// cannot avoid: zoo_create2 of an ephemeral sequential node + zoo_delete.
#include <zookeeper/zookeeper.h>
#include <zookeeper/zookeeper_version.h>

#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/backends/registry.hpp"
#include "bench/floors/floor.hpp"
#include "bench/floors/zk_floor.hpp"
#include "bench/scenarios/peers.hpp"
#include "bench/support/util.hpp"
#include "core/url.hpp"  // the library's own URL parser: the baselines reach the same server

namespace dblock_bench {

std::optional<std::string> zookeeper_skip_reason() {
  if (!env_url("DBLOCK_TEST_ZK_URL"))
    return std::string("DBLOCK_TEST_ZK_URL is not set (eval \"$(scripts/services env zookeeper)\")");
  return std::nullopt;
}

namespace {

// A bare handle, connected, with the C client's log quiet (as dblock's sessions).
class Handle {
 public:
  explicit Handle(const std::string& hosts) {
    zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    zh_ = zookeeper_init(hosts.c_str(), nullptr, 30000, nullptr, nullptr, 0);
    if (!zh_) throw std::runtime_error("zookeeper: cannot start a client for " + hosts);
    for (int i = 0; i < 500 && zoo_state(zh_) != ZOO_CONNECTED_STATE; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (zoo_state(zh_) != ZOO_CONNECTED_STATE) throw std::runtime_error("zookeeper: no session with " + hosts);
  }
  ~Handle() { zookeeper_close(zh_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  zhandle_t* get() const { return zh_; }

  void check(int rc, const std::string& what) const {
    if (rc != ZOK) throw std::runtime_error(fmt::format("zookeeper baseline {}: {}", what, zerror(rc)));
  }
  // Deletes `path` and everything under it.
  void remove_tree(const std::string& path) {
    String_vector v{};
    if (zoo_get_children(zh_, path.c_str(), 0, &v) == ZOK) {
      std::vector<std::string> kids(v.data, v.data + v.count);
      deallocate_String_vector(&v);
      for (const auto& k : kids) remove_tree(path + "/" + k);
    }
    int rc = zoo_delete(zh_, path.c_str(), -1);
    if (rc != ZOK && rc != ZNONODE) check(rc, "delete " + path);
  }

 private:
  zhandle_t* zh_ = nullptr;
};

}  // namespace

BackendReport run_zookeeper(const Options& opt) {
  const std::string base = env_url("DBLOCK_TEST_ZK_URL");
  auto u = dblock::detail::parse_url(base);
  std::string hosts;
  for (const auto& h : u.hosts) hosts += fmt::format("{}{}:{}", hosts.empty() ? "" : ",", h.host, h.port ? h.port : 2181);
  Handle zk(hosts);
  ScratchTable table("zookeeper", [&](const std::string& name) { zk.remove_tree("/" + u.path + "/" + name); });
  const std::string url = base + "/" + table.name(), root = "/" + u.path + "/" + table.name();
  auto first = dblock::Client::open(url);
  first->migrate();  // creates the root
  fmt::print(stderr, "dblock-bench: zookeeper: root {} at {}\n", root, first->url());

  const std::string dir = root + "/bench-bare";
  int rc = zoo_create(zk.get(), dir.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
  if (rc != ZNODEEXISTS) zk.check(rc, "create " + dir);
  auto select1 = [&] {
    struct Stat st {};
    zk.check(zoo_exists(zk.get(), root.c_str(), 0, &st), "exists");
  };
  auto create_delete = [&, prefix = dir + "/0123456789abcdef0123456789abcdef__lock__"] {
    char created[512];
    struct Stat st {};
    zk.check(zoo_create2(zk.get(), prefix.c_str(), "x", 1, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL_SEQUENTIAL, created,
                         sizeof created, &st),
             "create");
    zk.check(zoo_delete(zk.get(), created, -1), "delete");
  };

  BackendReport rep;
  {
    // `srvr` (a four-letter word scripts/services allows) opens "Zookeeper version: 3.8.0-..., built on ...".
    std::string version = "?";
    const std::string srvr = tcp_ask(u.hosts[0].host, u.hosts[0].port ? u.hosts[0].port : 2181, "srvr");
    if (auto at = srvr.find("version: "); at != std::string::npos)
      version = srvr.substr(at + 9, srvr.find_first_of("-,\n", at + 9) - at - 9);  // Debian's: "3.8.0-${mvngit...}"
    rep.server = fmt::format("ZooKeeper {} ({} server{}), C client {}; writes wait for the transaction log's fsync "
                             "unless forceSync=no",
                             version, u.hosts.size(), u.hosts.size() > 1 ? "s" : "", ZOO_VERSION);
  }
  rep.notes.push_back(fmt::format(
      "zookeeper: server at {}, C client {}; root {} (created for the run, deleted at the end). Baselines "
      "(the bare C client on one session): `select1` = one `zoo_exists` of the root (1 round trip); "
      "`bare-create-delete` = `zoo_create2` of an ephemeral sequential `<uuid>__lock__` node + `zoo_delete` of it "
      "(2 round trips, 2 writes through the transaction log), what an uncontended lock cannot avoid; dblock's "
      "zookeeper acquire also lists the children (am I first?), sent right behind the create so that it rides on "
      "the create's round trip. The `handoff-polling` scenario is "
      "the same as `handoff` here: waiters always watch their predecessor",
      first->url(), ZOO_VERSION, root));

  ServerRun run;
  run.backend = "zookeeper";
  run.url = url;
  run.first = first;
  run.strategies = {dblock::Strategy::zookeeper};
  run.baselines = {{"select1", select1, {}}, {"bare-create-delete", create_delete, {}}};
  run.compared_with = {{"zookeeper", {"bare-create-delete"}}};
  if (opt.wants_scenario("handoff")) {
    const std::string floor_dir = root + "/bench-floor";
    zk.check(zoo_create(zk.get(), floor_dir.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0),
             "create " + floor_dir);
    run.floors.push_back({"bare-watch-handoff", {"zookeeper"}, [hosts, floor_dir](std::size_t w, std::size_t n) {
                            return run_zk_floor_handoff(hosts, floor_dir, w, n);
                          }});
  }
  auto report = run_server(std::move(run), opt);
  if (opt.wants_scenario("handoff")) {
    rep.notes.push_back(
        "zookeeper `bare-watch-handoff`, the hand-off floor: 8 threads on the C client, each on a session of its "
        "own, run the lock recipe dblock runs, and nothing else of dblock's: an ephemeral sequential "
        "`<32 hex>__lock__` node created with the children listed right behind it (one round trip); while a node "
        "with a lower sequence remains, a data watch on the one right before ours and, once it fires, the children "
        "listed again; the fence is the node's czxid, as dblock's; release = delete the node; no barging, latency "
        "from the release call to the next grant, as in `handoff`. The zookeeper `handoff` row: ratio to it first");
  }
  rep.rows = std::move(report.rows);
  rep.notes.insert(rep.notes.end(), report.notes.begin(), report.notes.end());
  auto peers = run_peer_scenario("zookeeper", url, {dblock::Strategy::zookeeper},
                                 {"Kazoo", "kazoo_lock.py", PeerRuntime::python,
                                  "KazooClient(hosts).Lock(root/name).acquire(timeout=60): an ephemeral sequential "
                                  "node, a waiter watches its predecessor"}, opt);
  rep.rows.insert(rep.rows.end(), peers.rows.begin(), peers.rows.end());
  rep.notes.insert(rep.notes.end(), peers.notes.begin(), peers.notes.end());
  return rep;
}

}  // namespace dblock_bench
