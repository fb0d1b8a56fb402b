#include "bench/scenarios/table_size.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "bench/scenarios/fill.hpp"

namespace dblock_bench {

namespace {

constexpr const char* kTable = "bench_tablesize";  // lock table / key namespace / root of the scenario
constexpr std::int64_t kLiveForMs = 3'600'000;      // the fill's leases outlive any run

// Other leases present per measurement. A million znodes would take ZooKeeper minutes and
// gigabytes, so it gets a hundredth of the SQL counts; so does etcd (a million keys is most of
// its default 2 GB backend quota's working set). --quick stops after the second.
std::vector<std::size_t> levels_for(const std::string& backend, bool quick) {
  std::vector<std::size_t> levels = backend == "zookeeper" || backend == "etcd" ? std::vector<std::size_t>{1, 1'000, 10'000}
                                                           : std::vector<std::size_t>{1, 10'000, 1'000'000};
  if (quick) levels.resize(2);
  return levels;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<Row> measure(const FillTarget& t, Filler& filler, const Options& o, const std::vector<std::size_t>& levels) {
  std::vector<Row> rows;
  std::vector<std::shared_ptr<dblock::Client>> clients;  // one per strategy, as in `uncontended`
  std::vector<Series> series;
  auto first = dblock::Client::open(t.url, t.options);
  first->migrate();  // zookeeper: creates the root (auto_migrate covers the SQL tables)
  for (auto strategy : first->strategies()) {
    auto client = clients.empty() ? first : dblock::Client::open(t.url, t.options);
    dblock::LockOptions lock_options;
    lock_options.strategy = strategy;
    auto name = fmt::format("bench-tablesize-{}", dblock::to_string(strategy));
    series.push_back({std::string(dblock::to_string(strategy)), dblock_cycle(client->lock(name, lock_options)), {}});
    clients.push_back(std::move(client));
  }
  std::size_t have = 0;
  for (auto level : levels) {
    auto t0 = std::chrono::steady_clock::now();
    auto added = filler.add(have + 1, level, kLiveForMs);
    fmt::print(stderr, "dblock-bench: {} table-size: added {} other leases ({} in all) in {:.1f} s\n", t.backend,
               added, level, seconds_since(t0));
    have = level;
    for (auto& s : series) s.samples.clear();
    run_interleaved(fmt::format("{} table-size {}", t.backend, short_count(level)), series, o);
    for (auto& s : series) {
      Row row{t.backend, s.strategy, "table-size", 1, summarize(s.samples), {}};
      row.table_rows = level;
      rows.push_back(std::move(row));
    }
  }
  return rows;  // the clients go now, before the table is dropped
}

}  // namespace

BackendReport run_table_size(const Options& opt) {
  BackendReport rep;
  ScratchDir dir(opt.dir, "table-size");  // the SQLite file
  Options o = opt;  // fewer cycles than `uncontended`: each level repeats every series
  o.iterations = std::max<std::size_t>(50, opt.iterations / 3);
  o.warmup = std::clamp<std::size_t>(o.iterations / 10, 10, 100);
  std::string methods;
  for (const auto& t : fill_targets(opt, kTable, dir.path(), false)) {
    const auto levels = levels_for(t.backend, opt.quick);
    auto filler = make_filler(t, "fill-");
    filler->clear();  // what a killed run may have left
    fmt::print(stderr, "dblock-bench: {} table-size: {} at {}\n", t.backend, kTable, t.url);
    std::vector<Row> rows;
    try {
      rows = measure(t, *filler, o, levels);
    } catch (...) {
      try {
        filler->clear();  // best effort: the error that brought us here is the one to report
      } catch (...) {
      }
      throw;
    }
    auto t0 = std::chrono::steady_clock::now();
    filler->clear();
    fmt::print(stderr, "dblock-bench: {} table-size: removed the fill in {:.1f} s\n", t.backend, seconds_since(t0));
    for (auto& row : rows)
      for (const auto& base : rows)
        if (base.strategy == row.strategy && base.table_rows == levels.front()) {
          Compared c = compare(row, base);
          c.baseline = fmt::format("{} {} row{}", base.strategy, base.table_rows, base.table_rows == 1 ? "" : "s");
          row.vs = {c};
        }
    rep.rows.insert(rep.rows.end(), rows.begin(), rows.end());
    methods += fmt::format("{}{}: {}", methods.empty() ? "" : "; ", t.backend, filler->method());
  }
  if (rep.rows.empty()) return rep;
  rep.notes.push_back(fmt::format(
      "table-size: the `uncontended` cycle ({} timed cycles per series, interleaved as there) with other live "
      "leases already present (valid 1 h: none expires during the run) in a table / key namespace / root of its "
      "own ({}), dropped or deleted at the end: {} other rows or keys; zookeeper {} children of the root and etcd as many "
      "other names' keys (a million znodes or keys is too heavy for a test server); ratio = p50 / p50 of the same strategy with 1 other row. "
      "Filled outside the timed part by {}",
      o.iterations, kTable, opt.quick ? "1 and 10k" : "1, 10k and 1M", opt.quick ? "1 and 1k" : "1, 1k and 10k",
      methods));
  return rep;
}

void print_table_size_markdown(const std::vector<Row>& rows) {
  std::set<std::size_t> levels;
  for (const auto& r : rows)
    if (r.scenario == "table-size") levels.insert(r.table_rows);
  if (levels.empty()) return;
  fmt::print("\n## table-size: acquire+release p50 / p99 us (p50 / p50 at 1 row) by other leases present\n\n");
  fmt::print("| backend | strategy |");
  for (auto n : levels) fmt::print(" rows={} |", short_count(n));
  fmt::print("\n|---|---|");
  for (std::size_t i = 0; i < levels.size(); ++i) fmt::print("---:|");
  fmt::print("\n");
  std::vector<std::pair<std::string, std::string>> seen;  // backend, strategy in row order
  for (const auto& r : rows)
    if (r.scenario == "table-size" && std::find(seen.begin(), seen.end(), std::pair(r.backend, r.strategy)) == seen.end())
      seen.emplace_back(r.backend, r.strategy);
  for (const auto& [backend, strategy] : seen) {
    fmt::print("| {} | {} |", backend, strategy);
    for (auto n : levels) {
      std::string cell = "-";
      for (const auto& r : rows)
        if (r.scenario == "table-size" && r.backend == backend && r.strategy == strategy && r.table_rows == n)
          cell = fmt::format("{:.0f} / {:.0f} ({:.2f}x)", r.s.p50_us, r.s.p99_us, r.vs.empty() ? 0.0 : r.vs[0].ratio);
      fmt::print(" {} |", cell);
    }
    fmt::print("\n");
  }
  std::fflush(stdout);
}

}  // namespace dblock_bench
