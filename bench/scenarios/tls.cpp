#include "bench/scenarios/tls.hpp"

#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "bench/backends/registry.hpp"

namespace dblock_bench {

namespace {

struct TlsPair {
  const char* backend;
  const char* plain_var;  // the plain server's URL
  const char* tls_var;    // the TLS server's
};

constexpr TlsPair kPairs[] = {
    {"postgresql", "DBLOCK_TEST_PG_URL", "DBLOCK_TEST_PG_TLS_URL"},
    {"mysql", "DBLOCK_TEST_MYSQL_URL", "DBLOCK_TEST_MYSQL_TLS_URL"},
    {"redis", "DBLOCK_TEST_REDIS_URL", "DBLOCK_TEST_REDIS_TLS_URL"},
    {"etcd", "DBLOCK_TEST_ETCD_URL", "DBLOCK_TEST_ETCD_TLS_URL"},
};

}  // namespace

BackendReport run_tls(const Options& opt) {
  BackendReport rep;
  dblock::ClientOptions options;
  options.table = "bench_tls";  // SQL: created on first use on each server, kept (reused by the next run)
  options.auto_migrate = true;
  for (const auto& pair : kPairs) {
    if (!opt.wants_backend(pair.backend)) continue;
    if (!env_url(pair.plain_var) || !env_url(pair.tls_var)) {
      fmt::print(stderr, "dblock-bench: tls: {} left out: {} or {} is not set\n", pair.backend, pair.plain_var,
                 pair.tls_var);
      continue;
    }
    const std::string plain_url = env_url(pair.plain_var), tls_url = env_url(pair.tls_var);
    auto plain = dblock::Client::open(plain_url, options), tls = dblock::Client::open(tls_url, options);
    const auto strategy = plain->strategies().front();  // the backend's natural strategy
    const std::string name = fmt::format("bench-tls-{}", dblock::to_string(strategy));
    fmt::print(stderr, "dblock-bench: tls: {} {}: {} and {}\n", pair.backend, dblock::to_string(strategy),
               plain->url(), tls->url());

    // Uncontended, interleaved as in `uncontended`: each client's connection stays open.
    // Where the bench has the backend's bare statements, they run beside on either transport:
    // what TLS costs the lock's round trips without dblock.
    std::vector<Series> series{{"plaintext", dblock_cycle(plain->lock(name)), {}},
                               {"tls", dblock_cycle(tls->lock(name)), {}}};
    const auto bare_cycle = backend_spec(pair.backend).bare_cycle;
    if (bare_cycle) {
      series.push_back({"bare plaintext", bare_cycle(plain_url, options.table), {}});
      series.push_back({"bare tls", bare_cycle(tls_url, options.table), {}});
    }
    run_interleaved(fmt::format("{} tls", pair.backend), series, opt);
    Row u{pair.backend, std::string(dblock::to_string(strategy)), "tls-uncontended", 1, summarize(series[0].samples), {}};
    u.own_table = true;
    rep.rows.push_back(u);
    rep.rows.push_back(variant_row(u, "tls", summarize(series[1].samples)));
    if (bare_cycle) {
      Row b{pair.backend, "bare", "tls-uncontended", 1, summarize(series[2].samples), {}};
      rep.rows.push_back(b);
      rep.rows.push_back(variant_row(b, "tls", summarize(series[3].samples)));
    }

    // Hand-off: each side twice, alternating, so that drift over the minutes hits both.
    auto handoff = alternating_handoffs(fmt::format("{} tls", pair.backend), {{"plaintext", plain_url}, {"tls", tls_url}},
                                        options, strategy, name + "-handoff", opt);
    Row h{pair.backend, std::string(dblock::to_string(strategy)), "tls-handoff", kHandoffWorkers, summarize(handoff[0]), {}};
    h.own_table = true;
    rep.rows.push_back(h);
    rep.rows.push_back(variant_row(h, "tls", summarize(handoff[1])));
  }
  if (rep.rows.empty()) return rep;
  rep.notes.push_back(fmt::format(
      "tls: each backend's natural strategy in plaintext to the plain test server and over TLS (the server "
      "verified against the test CA, a client certificate presented) to the TLS one, which scripts/services "
      "starts with the same settings, TLS only (etcd-tls also has etcd's auth on: the URL's user and "
      "password); warm connections: the handshake is paid once per pooled connection, in the warm-up. "
      "`bare`: the lock's round trips without dblock on a connection of each transport, interleaved with the "
      "lock's cycles: on PostgreSQL and MySQL `bare-insert`'s INSERT and DELETE on the lock table (as in "
      "`uncontended`; on MySQL on the library's connection class), on Redis `SET k v NX PX 30000` + `DEL k` (the library's connection class: hiredis' reader "
      "over OpenSSL), on etcd the lock recipe's two Txns on a raw gRPC channel (on etcd-tls the client "
      "certificate's name is the user). "
      "Uncontended: {} timed cycles per side, interleaved; hand-off: {} threads, {} timed hand-offs per side in "
      "two halves, alternating sides; ratio = TLS p50 / plaintext p50",
      opt.iterations, kHandoffWorkers, 2 * std::max<std::size_t>(opt.handoffs / 2, 1)));
  return rep;
}

void print_tls_markdown(const std::vector<Row>& rows) {
  bool any = false;
  for (const auto& r : rows) any = any || r.scenario == "tls-uncontended" || r.scenario == "tls-handoff";
  if (!any) return;
  fmt::print("\n## tls: p50 us in plaintext / over TLS (ratio)\n\n| backend | strategy | uncontended | hand-off |\n|---|---|---:|---:|\n");
  for (const auto& r : rows) {
    if (r.scenario != "tls-uncontended" || r.vs.empty()) continue;  // a TLS row names the pair
    const Row* plain = nullptr;
    const Row* hp = nullptr;
    const Row* ht = nullptr;
    for (const auto& o : rows) {
      if (o.backend != r.backend) continue;
      if (o.scenario == "tls-uncontended" && o.strategy == r.vs[0].baseline) plain = &o;
      if (o.scenario == "tls-handoff" && o.strategy == r.vs[0].baseline) hp = &o;
      if (o.scenario == "tls-handoff" && o.strategy == r.strategy) ht = &o;
    }
    auto cell = [](const Row* a, const Row* b) {
      return a && b && !b->vs.empty() ? fmt::format("{:.0f} / {:.0f} ({:.2f}x)", a->s.p50_us, b->s.p50_us, b->vs[0].ratio)
                                      : std::string("-");
    };
    fmt::print("| {} | {} | {} | {} |\n", r.backend, r.vs[0].baseline, cell(plain, &r), cell(hp, ht));
  }
  std::fflush(stdout);
}

}  // namespace dblock_bench
