#include "bench/scenarios/pooler.hpp"

#include <cstdio>
#include <algorithm>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "bench/scenarios/contended.hpp"

namespace dblock_bench {

namespace {

constexpr int kContendedWorkers = 8;

}  // namespace

BackendReport run_pooler(const Options& opt) {
  BackendReport rep;
  if (!opt.wants_backend("postgresql")) return rep;
  const char* direct_url = env_url("DBLOCK_TEST_PG_URL");
  const char* pooled_url = env_url("DBLOCK_TEST_PGBOUNCER_URL");
  if (!direct_url || !pooled_url) {
    fmt::print(stderr, "dblock-bench: pooler: left out: DBLOCK_TEST_PG_URL or DBLOCK_TEST_PGBOUNCER_URL is not set\n");
    return rep;
  }
  dblock::ClientOptions options;
  options.table = "bench_pooler";  // created on first use, kept (reused by the next run)
  options.auto_migrate = true;
  dblock::Client::open(direct_url, options);  // migrated directly: DDL need not go through the pooler
  // The contended workers, on a copy of the options that asks for that scenario at one count.
  Options contended = opt;
  contended.scenarios = {"contended"};
  contended.skipped_scenarios.clear();
  contended.workers = {kContendedWorkers};
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic}) {
    const std::string s(dblock::to_string(strategy));
    const std::string name = "bench-pooler-" + s;
    auto direct = dblock::Client::open(direct_url, options), pooled = dblock::Client::open(pooled_url, options);
    dblock::LockOptions lo;
    lo.strategy = strategy;
    std::vector<Series> series{{"direct", dblock_cycle(direct->lock(name, lo)), {}},
                               {"pgbouncer", dblock_cycle(pooled->lock(name, lo)), {}}};
    run_interleaved("postgresql pooler " + s, series, opt);
    Row u{"postgresql", s, "pooler-uncontended", 1, summarize(series[0].samples), {}};
    u.own_table = true;
    rep.rows.push_back(u);
    rep.rows.push_back(variant_row(u, "pgbouncer", summarize(series[1].samples)));

    auto handoff = alternating_handoffs("postgresql pooler", {{"direct", direct_url}, {"pgbouncer", pooled_url}},
                                        options, strategy, name + "-handoff", opt);
    Row h{"postgresql", s, "pooler-handoff", kHandoffWorkers, summarize(handoff[0]), {}};
    h.own_table = true;
    rep.rows.push_back(h);
    rep.rows.push_back(variant_row(h, "pgbouncer", summarize(handoff[1])));

    // Worker processes on one name, each side in turn; their check throws on a violation.
    std::vector<Row> contended_rows;  // direct, then through the pooler
    for (const auto& side : std::vector<Setup>{{"direct", direct_url}, {"pgbouncer", pooled_url}}) {
      auto part = run_contended_scenario("postgresql " + side.label, side.url, options, {strategy}, contended, {});
      contended_rows.insert(contended_rows.end(), part.rows.begin(), part.rows.end());
    }
    if (contended_rows.size() == 2) {
      Row c = contended_rows[0];
      c.backend = "postgresql";
      c.scenario = "pooler-contended";
      c.vs.clear();
      rep.rows.push_back(c);
      Row p = variant_row(c, "pgbouncer", contended_rows[1].s);
      p.fairness = contended_rows[1].fairness;
      p.min_grants = contended_rows[1].min_grants;
      p.max_grants = contended_rows[1].max_grants;
      rep.rows.push_back(p);
    }
  }
  rep.notes.push_back(fmt::format(
      "pooler: `insert` and `optimistic` connecting to the test PostgreSQL directly and through PgBouncer 1.18 in "
      "transaction mode in front of it (scripts/services' pgbouncer: 20 server connections; the URL's "
      "pooler=transaction, so statements go unnamed and the release listener connects to the server itself). "
      "Uncontended: {} timed cycles per side, interleaved; hand-off: {} threads, {} timed hand-offs per side in two "
      "halves, alternating sides; contended: {} worker processes' threads on one name for {:.1f} s per side, with "
      "the contended scenario's check of exclusion and fence order; ratio = through the pooler p50 / direct p50",
      opt.iterations, kHandoffWorkers, 2 * std::max<std::size_t>(opt.handoffs / 2, 1), kContendedWorkers,
      contended_seconds(opt)));
  return rep;
}

void print_pooler_markdown(const std::vector<Row>& rows) {
  bool any = false;
  for (const auto& r : rows) any = any || r.scenario == "pooler-uncontended";
  if (!any) return;
  fmt::print("\n## pooler: p50 us direct / through PgBouncer (ratio)\n\n"
             "| strategy | uncontended | hand-off | contended wait |\n|---|---:|---:|---:|\n");
  auto find = [&](const std::string& strategy, const char* scenario) -> const Row* {
    for (const auto& r : rows)
      if (r.scenario == scenario && r.strategy == strategy) return &r;
    return nullptr;
  };
  for (const auto& r : rows) {
    if (r.scenario != "pooler-uncontended" || !r.vs.empty()) continue;  // the direct rows
    auto cell = [&](const char* scenario) {
      const Row* a = find(r.strategy, scenario);
      const Row* b = find(r.strategy + " pgbouncer", scenario);
      return a && b && !b->vs.empty() ? fmt::format("{:.0f} / {:.0f} ({:.2f}x)", a->s.p50_us, b->s.p50_us, b->vs[0].ratio)
                                      : std::string("-");
    };
    fmt::print("| {} | {} | {} | {} |\n", r.strategy, cell("pooler-uncontended"), cell("pooler-handoff"),
               cell("pooler-contended"));
  }
  std::fflush(stdout);
}

}  // namespace dblock_bench
