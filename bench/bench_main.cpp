// dblock-bench: what an uncontended acquire+release costs on the embedded SQLite backend,
// per strategy, next to a bare INSERT + DELETE pair on the same file with the same pragmas.
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "bench_util.hpp"
#include "dblock/dblock.hpp"

namespace fs = std::filesystem;
using namespace dblock_bench;

namespace {

// The CSV file or the bench dir cannot be created: exit 73 (EX_CANTCREAT).
struct CantCreate : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The bench dir: a fresh mkdtemp dir, removed at the end, or the user's, kept.
class BenchDir {
 public:
  explicit BenchDir(const std::string& wanted) {
    std::error_code ec;
    if (!wanted.empty()) {
      fs::create_directories(wanted, ec);
      if (!fs::is_directory(wanted))
        throw CantCreate(fmt::format("cannot create directory '{}': {}", wanted, ec.message()));
      path_ = fs::absolute(wanted).string();
      return;
    }
    std::string tmpl = "/tmp/dblock-bench.XXXXXX";
    if (!mkdtemp(tmpl.data())) throw CantCreate(fmt::format("mkdtemp {} failed", tmpl));
    path_ = tmpl;
    remove_ = true;
  }
  ~BenchDir() {
    std::error_code ec;
    if (remove_) fs::remove_all(path_, ec);
  }
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool remove_ = false;
};

constexpr std::size_t kBlock = 50;  // most timed cycles of one series in a row
constexpr std::size_t kRewarm = 2;  // untimed cycles each time a series resumes

struct Series {
  std::string strategy;         // "bare", "insert", "optimistic"
  std::function<void()> cycle;  // one acquire+release (or INSERT+DELETE)
  std::vector<double> samples;  // microseconds, pooled over the rounds
};

void run_untimed(Series& s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) s.cycle();
}

void run_timed(Series& s, std::size_t n) {
  using Clock = std::chrono::steady_clock;
  for (std::size_t i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    s.cycle();
    auto t1 = Clock::now();
    s.samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
}

// One acquire+release of `lock`; checks what a correct lock must show even uncontended.
std::function<void()> dblock_cycle(dblock::Lock lock) {
  auto last_fence = std::make_shared<std::uint64_t>(0);
  return [lock, last_fence]() mutable {
    std::optional<dblock::Lease> lease = lock.try_acquire();
    if (!lease)
      throw std::runtime_error(fmt::format("try_acquire of uncontended lock '{}' did not acquire it", lock.name()));
    if (lease->fence() <= *last_fence)
      throw std::runtime_error(fmt::format("lock '{}': fence {} after fence {}: fences must increase",
                                           lock.name(), lease->fence(), *last_fence));
    *last_fence = lease->fence();
    lease->release();
  };
}

int run(const Options& opt) {
  if (!opt.csv.empty()) {  // fail before minutes of work, not after
    std::ofstream probe(opt.csv, std::ios::app);
    if (!probe) throw CantCreate(fmt::format("cannot write CSV file '{}'", opt.csv));
  }
  BenchDir dir(opt.dir);  // outlives the clients and connections below
  const std::string db_path = dir.path() + "/bench.db";
  fmt::print(stderr, "dblock-bench: {} cycles per series in {}\n", opt.iterations, db_path);

  // dblock's clients (the first migrates the file), one per strategy, each on its own name.
  dblock::ClientOptions client_options;
  std::vector<std::shared_ptr<dblock::Client>> clients;
  std::vector<Series> series;
  for (auto strategy : {dblock::Strategy::insert, dblock::Strategy::optimistic}) {
    auto client = dblock::Client::open("sqlite:" + db_path, client_options);
    std::string name = fmt::format("bench-uncontended-{}", dblock::to_string(strategy));
    client->force_release(name);  // a run killed on a kept --dir may have left it held
    dblock::LockOptions lock_options;
    lock_options.strategy = strategy;  // ttl 30s, auto_renew: the renewal never fires in a cycle
    series.push_back({std::string(dblock::to_string(strategy)), dblock_cycle(client->lock(name, lock_options)), {}});
    clients.push_back(std::move(client));
  }

  // The baseline: dblock's connection setup (sqlite_session.cpp) without dblock.
  SQLite::Database db(db_path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE,
                      static_cast<int>(client_options.statement_timeout.count()));
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("PRAGMA synchronous=FULL");
  db.exec("CREATE TABLE IF NOT EXISTS bare (name TEXT NOT NULL PRIMARY KEY, v INTEGER NOT NULL)");
  db.exec("DELETE FROM bare");
  Context ctx;
  ctx.sqlite_version = sqlite3_libversion();
  ctx.db_path = db_path;
  ctx.pragmas = fmt::format("journal_mode={}, synchronous={} (2 = FULL), busy_timeout={} ms",
                            db.execAndGet("PRAGMA journal_mode").getString(),
                            db.execAndGet("PRAGMA synchronous").getInt(),
                            db.execAndGet("PRAGMA busy_timeout").getInt());
  ctx.iterations = opt.iterations;
  ctx.warmup = opt.warmup;
  SQLite::Statement ins(db, "INSERT INTO bare(name, v) VALUES (?, ?)");
  SQLite::Statement del(db, "DELETE FROM bare WHERE name = ?");
  const std::string bare_name = "bench-uncontended-bare";
  std::int64_t v = 0;
  auto bare_cycle = [&] {
    ins.bind(1, bare_name);
    ins.bind(2, ++v);
    ins.exec();
    ins.reset();
    del.bind(1, bare_name);
    del.exec();
    del.reset();
  };
  series.insert(series.begin(), Series{"bare", bare_cycle, {}});

  for (auto& s : series) {
    fmt::print(stderr, "dblock-bench: warm-up sqlite/{}: {} cycles\n", s.strategy, opt.warmup);
    run_untimed(s, opt.warmup);
    s.samples.reserve(opt.iterations);
  }
  // Interleaved rounds of at most kBlock cycles per series, the order rotated each round, so
  // drift and noise hit every series alike. Blocks are short because this kind of noise
  // (fsync latency that flips between regimes every few seconds) is slow, not per-cycle.
  const std::size_t rounds = std::max(opt.rounds, (opt.iterations + kBlock - 1) / kBlock);
  const std::size_t report_every = std::max<std::size_t>(1, rounds / 5);
  for (std::size_t r = 0; r < rounds; ++r) {
    std::size_t n = opt.iterations / rounds + (r < opt.iterations % rounds ? 1 : 0);
    for (std::size_t k = 0; k < series.size(); ++k) {
      auto& s = series[(r + k) % series.size()];
      run_untimed(s, kRewarm);  // the first cycle after another connection wrote is not timed
      run_timed(s, n);
    }
    if ((r + 1) % report_every != 0 && r + 1 != rounds) continue;
    std::string line;
    for (auto& s : series) line += fmt::format(", {} p50 {:.1f} us", s.strategy, summarize(s.samples).p50_us);
    fmt::print(stderr, "dblock-bench: round {}/{}{}\n", r + 1, rounds, line);
  }
  for (auto& s : series) {
    auto sum = summarize(s.samples);
    fmt::print(stderr, "dblock-bench: sqlite/{}: {} cycles, p50 {:.1f} us, p99 {:.1f} us\n", s.strategy, sum.samples,
               sum.p50_us, sum.p99_us);
  }
  ctx.rounds = rounds;

  if (auto held = clients.front()->list(); !held.empty())
    fmt::print(stderr, "dblock-bench: warning: {} lock(s) still held after the run, first '{}'\n", held.size(),
               held.front().name);

  std::vector<Row> rows;
  for (auto& s : series) rows.push_back(Row{"sqlite", s.strategy, "uncontended", 1, summarize(s.samples), "bare", 1.0});
  for (auto& row : rows) row.ratio = rows.front().s.p50_us > 0 ? row.s.p50_us / rows.front().s.p50_us : 0;
  print_markdown(ctx, rows);
  if (!opt.csv.empty()) {
    try {
      write_csv(opt.csv, rows);
    } catch (const std::runtime_error& e) {
      throw CantCreate(e.what());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  try {
    opt = parse_options(argc, argv);
  } catch (const UsageProblem& e) {
    fmt::print(stderr, "dblock-bench: {} (see --help)\n", e.what());
    return 64;
  }
  if (opt.help) {
    fmt::print("{}", usage_text());
    return 0;
  }
  try {
    return run(opt);
  } catch (const dblock::Error& e) {
    fmt::print(stderr, "dblock-bench: dblock error: {}\n", e.what());
  } catch (const CantCreate& e) {
    fmt::print(stderr, "dblock-bench: {}\n", e.what());
    return 73;
  } catch (const SQLite::Exception& e) {
    fmt::print(stderr, "dblock-bench: baseline SQLite error: {}\n", e.what());
  } catch (const std::exception& e) {
    fmt::print(stderr, "dblock-bench: {}\n", e.what());
  }
  return 70;
}
