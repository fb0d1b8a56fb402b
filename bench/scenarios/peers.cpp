#include "bench/scenarios/peers.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/scenarios/contended.hpp"  // CorrectnessViolation, jain, contended_seconds
#include "bench/support/proc.hpp"

namespace dblock_bench {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// As in peer_worker.py: a waiter gives up after this long, far above any healthy wait, and a
// contended one kGrace after the round's end, so that a peer whose waiters stall cannot hold
// the run up for minutes (its gave-ups are reported as timeouts).
constexpr std::chrono::milliseconds kWait{60'000};
constexpr std::chrono::milliseconds kGrace{3'000};

std::int64_t stamp_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

dblock::Lease acquire(dblock::Lock& lock, const char* what) {
  auto lease = lock.try_acquire(kWait);
  if (!lease) throw std::runtime_error(fmt::format("{} of a free lock timed out", what));
  return std::move(*lease);
}

}  // namespace

// argv: --peer-worker STRATEGY TABLE FAIR(0|1) MODE NAME COUNT WARMUP HOLD_MS (after FAIR,
// peer_worker.py's arguments after the strategy and the table); the URL in
// $DBLOCK_BENCH_WORKER_URL.
int peer_worker_main(int argc, char** argv) {
  return report_worker([&] {
    if (argc != 10)
      throw std::runtime_error("usage: --peer-worker STRATEGY TABLE FAIR MODE NAME COUNT WARMUP HOLD_MS");
    dblock::LockOptions lock_options;
    lock_options.strategy = dblock::parse_strategy(argv[2]);
    lock_options.fair = std::string(argv[4]) != "0";
    dblock::ClientOptions client_options;
    if (*argv[3]) client_options.table = argv[3];
    const std::string mode = argv[5], name = argv[6];
    const long long count = std::stoll(argv[7]), warmup = std::stoll(argv[8]);
    const std::chrono::milliseconds hold(std::stoll(argv[9]));
    auto client = dblock::Client::open(worker_url(), client_options);
    auto lock = client->lock(name, lock_options);
    for (long long i = 0; i < warmup; ++i)
      if (mode == "uncontended")
        acquire(lock, "a warm-up acquire").release();
      else if (auto lease = lock.try_acquire(std::chrono::milliseconds(0)))  // peer_worker.py: warm_up
        lease->release();
    worker_ready_then_wait();

    json out;
    if (mode == "uncontended") {
      std::vector<double> samples;
      samples.reserve(static_cast<std::size_t>(count));
      for (long long i = 0; i < count; ++i) {
        const auto t0 = Clock::now();
        acquire(lock, "an acquire").release();
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        samples.push_back(std::round(us * 10) / 10);
      }
      out = {{"samples_us", samples}};
    } else {
      std::vector<std::array<std::int64_t, 2>> holds;
      std::uint64_t timeouts = 0;
      const auto start = Clock::now(), until = start + std::chrono::milliseconds(count);
      const auto give_up = until + kGrace;
      while (Clock::now() < until) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
        auto lease = lock.try_acquire(std::clamp(left, std::chrono::milliseconds(0), kWait));
        if (!lease) {
          ++timeouts;
          continue;
        }
        const auto granted = Clock::now();
        if (hold.count() > 0) std::this_thread::sleep_for(hold);
        const auto releasing = Clock::now();
        lease->release();
        holds.push_back({stamp_ns(granted), stamp_ns(releasing)});
      }
      out = {{"holds", holds},
             {"timeouts", timeouts},
             {"elapsed_s", std::chrono::duration<double>(Clock::now() - start).count()}};
    }
    return out;
  });
}

namespace {

// One side of a pair: how to start its worker processes.
struct Side {
  std::string label;              // the rows' strategy: dblock's strategy or the peer's name
  std::string program;            // what run_workers executes
  std::vector<std::string> head;  // argv before MODE NAME COUNT WARMUP HOLD_MS
};

// Runs `processes` workers of `side` and returns their result lines, or nothing when the
// side cannot run here (`unavailable` gets why). Throws when a worker fails.
std::optional<std::vector<json>> run_side(const Side& side, const std::string& url, int processes,
                                          const std::vector<std::string>& args, std::string& unavailable) {
  std::vector<std::string> argv = side.head;
  argv.insert(argv.end(), args.begin(), args.end());
  std::string failure;
  auto outputs = run_workers(std::vector<std::vector<std::string>>(static_cast<std::size_t>(processes), argv), url,
                             failure, side.program);
  if (!failure.empty()) {
    json j = json::parse(failure, nullptr, false);
    if (j.is_object() && j.contains("unavailable")) {
      unavailable = j["unavailable"].get<std::string>();
      return std::nullopt;
    }
    throw std::runtime_error(
        fmt::format("peers {}: worker failed: {}", side.label,
                    j.is_object() && j.contains("error") ? j["error"].get<std::string>() : failure));
  }
  std::vector<json> lines;
  for (const auto& w : outputs) {
    json j = json::parse(w.line, nullptr, false);
    if (!j.is_object())
      throw std::runtime_error(
          fmt::format("peers {}: worker {} gave no result (exit status {})", side.label, w.pid, w.status));
    if (j.contains("error"))
      throw std::runtime_error(fmt::format("peers {}: worker failed: {}", side.label, j["error"].get<std::string>()));
    lines.push_back(std::move(j));
  }
  return lines;
}

// What one side measured, pooled over the rounds.
struct Tally {
  std::vector<double> cycles_us;      // uncontended acquire + release
  std::vector<double> handoffs_us;    // the next holder's grant - the previous holder's release
  std::vector<std::uint64_t> grants;  // per process per contended round
  std::uint64_t total = 0, timeouts = 0;
  double elapsed_s = 0;  // summed over the contended rounds (each: its longest process's run)
  std::string version;   // the peer's library and Python
};

// Puts one contended round's holds on one time line: checks that no two overlap, and adds its
// hand-offs and grants to `t`.
void merge_holds(const std::string& label, const std::vector<json>& lines, Tally& t) {
  struct Hold {
    std::int64_t granted, released;
    std::size_t process;
  };
  std::vector<Hold> holds;
  double elapsed = 0;
  for (std::size_t p = 0; p < lines.size(); ++p) {
    for (const auto& h : lines[p]["holds"]) holds.push_back({h[0].get<std::int64_t>(), h[1].get<std::int64_t>(), p});
    t.grants.push_back(lines[p]["holds"].size());
    t.timeouts += lines[p]["timeouts"].get<std::uint64_t>();
    elapsed = std::max(elapsed, lines[p]["elapsed_s"].get<double>());
  }
  t.elapsed_s += elapsed;
  t.total += holds.size();
  std::sort(holds.begin(), holds.end(), [](const Hold& a, const Hold& b) { return a.granted < b.granted; });
  for (std::size_t i = 1; i < holds.size(); ++i) {
    // A release is stamped before release() is called: the next grant cannot come earlier.
    if (holds[i].granted < holds[i - 1].released)
      throw CorrectnessViolation(fmt::format(
          "CORRECTNESS VIOLATION in peers {}: process {} was granted the lock {:.1f} us before process {} released it",
          label, holds[i].process, static_cast<double>(holds[i - 1].released - holds[i].granted) / 1000,
          holds[i - 1].process));
    if (holds[i].process != holds[i - 1].process)  // a re-grant to the releaser is no hand-off
      t.handoffs_us.push_back(static_cast<double>(holds[i].granted - holds[i - 1].released) / 1000);
  }
}

// Rounds, the two sides alternating (the first side rotated each round), so that what else
// the machine does hits both alike.
std::size_t uncontended_rounds(const Options& opt) { return opt.quick ? 1 : 5; }
std::size_t contended_rounds(const Options& opt) { return opt.quick ? 1 : 3; }

}  // namespace

namespace {

// Where the peers' scripts are, next to the node_modules they need: $DBLOCK_BENCH_PEERS_DIR;
// else, for an installed dblock-bench, where the install put them beside the binary's
// directory (share/dblock/bench/peers); else the build tree's copy.
std::string peers_dir() {
  const char* dir = std::getenv("DBLOCK_BENCH_PEERS_DIR");
  if (dir && *dir) return dir;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = (exe.parent_path() / DBLOCK_BENCH_INSTALLED_PEERS_DIR).lexically_normal();
    if (std::filesystem::is_directory(installed, ec)) return installed.string();
  }
  return DBLOCK_BENCH_PEERS_DIR;
}

}  // namespace

BackendReport run_peer_scenario(const std::string& backend, const std::string& url,
                                const std::vector<dblock::Strategy>& strategies, const Peer& peer,
                                const Options& opt, const std::string& table) {
  BackendReport rep;
  if (!opt.wants_scenario("peers")) return rep;
  const bool node = peer.runtime == PeerRuntime::node;
  const std::string runtime = node ? DBLOCK_BENCH_NODE : DBLOCK_BENCH_PYTHON;
  const std::string script = peers_dir() + "/" + peer.script;
  std::vector<Side> sides;  // dblock's strategies, then the peer
  for (auto strategy : strategies) {
    const std::string s(dblock::to_string(strategy));
    const char* fair = opt.unfair ? "0" : "1";
    sides.push_back({s, "/proc/self/exe", {"dblock-bench", kPeerWorkerFlag, s, table, fair}});
  }
  // python -B: no __pycache__ where the scripts are (a source tree when DBLOCK_BENCH_PEERS_DIR
  // points there).
  sides.push_back({peer.name, runtime,
                   node ? std::vector<std::string>{runtime, script}
                        : std::vector<std::string>{runtime, "-B", script}});
  const std::size_t n = sides.size(), p = n - 1;
  std::string dblock_side;
  for (std::size_t i = 0; i < p; ++i) dblock_side += (i ? " and " : "") + sides[i].label;
  auto left_out = [&](const std::string& why) {  // the peer's rows: none, and why
    fmt::print(stderr, "dblock-bench: peers on {}: {} {}\n", backend, peer.name, why);
    rep.notes.push_back(fmt::format("peers on {}: {} {}", backend, peer.name, why));
    return rep;
  };
  auto not_run = [&](const std::string& why) { return left_out("not run: " + why); };
  if (runtime.empty() || access(runtime.c_str(), X_OK) != 0)
    return not_run(node ? fmt::format("no Node.js at '{}' (DBLOCK_BENCH_NODE; Debian: nodejs)", runtime)
                        : fmt::format("no Python at '{}' (DBLOCK_BENCH_PYTHON)", runtime));
  if (access(script.c_str(), R_OK) != 0)
    return not_run(fmt::format("no script {} (DBLOCK_BENCH_PEERS_DIR)", script));

  // A killed run may have left dblock's names held (the peers' leases expire in 30 s).
  dblock::ClientOptions admin_options;
  if (!table.empty()) admin_options.table = table;
  auto admin = dblock::Client::open(url, admin_options);
  for (std::size_t i = 0; i < p; ++i)
    for (const char* w : {"uncontended", "contended"})
      admin->force_release(fmt::format("bench-peers-{}-{}", sides[i].label, w));

  const std::size_t u_rounds = uncontended_rounds(opt), c_rounds = contended_rounds(opt);
  const std::size_t cycles = std::max<std::size_t>(opt.iterations / u_rounds, 1);
  const double seconds = contended_seconds(opt) / static_cast<double>(c_rounds);
  fmt::print(stderr,
             "dblock-bench: peers on {}: {} vs {}: {} rounds of {} cycles uncontended, then {} rounds of {} processes "
             "for {:.1f} s, hold {} ms\n",
             backend, dblock_side, peer.name, u_rounds, cycles, c_rounds, kContenders, seconds, kHoldMs);
  std::vector<Tally> tally(n);
  std::string unavailable;
  for (std::size_t round = 0; round < u_rounds + c_rounds; ++round)
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t i = (round + k) % n;
      const bool contended = round >= u_rounds;
      // Names are per side (the peer's "/" and "@" are fine in its own keys), so that a side
      // never finds a lease the previous one left behind.
      const std::string name =
          fmt::format("bench-peers-{}-{}", sides[i].label, contended ? "contended" : "uncontended");
      std::optional<std::vector<json>> lines;
      try {
        lines = contended ? run_side(sides[i], url, kContenders,
                                     {"contended", name, std::to_string(static_cast<long long>(seconds * 1000)), "1",
                                      std::to_string(kHoldMs)},
                                     unavailable)
                          : run_side(sides[i], url, 1,
                                     {"uncontended", name, std::to_string(cycles), std::to_string(opt.warmup), "0"},
                                     unavailable);
        if (lines && contended) merge_holds(sides[i].label, *lines, tally[i]);
      } catch (const std::exception& e) {
        // The peer's failure (a worker's error, two holders at once) is a finding about the
        // peer: reported, and the rest of the run goes on. dblock's own are failures.
        if (i != p) throw;
        return left_out(fmt::format("failed in round {} of {} ({}): {}", round + 1, u_rounds + c_rounds,
                                    contended ? "contended" : "uncontended", e.what()));
      }
      if (!lines) return not_run(unavailable);
      if (!contended) {
        for (const auto& v : lines->front()["samples_us"]) tally[i].cycles_us.push_back(v.get<double>());
        if (lines->front().contains("version")) tally[i].version = lines->front()["version"].get<std::string>();
      }
    }

  std::vector<std::array<Row, 2>> rows(n);  // [side][0: uncontended, 1: contended]
  for (std::size_t i = 0; i < n; ++i) {
    const Tally& t = tally[i];
    rows[i][0] = Row{backend, sides[i].label, "peers-uncontended", 1, summarize(t.cycles_us)};
    Row& row = rows[i][1] = Row{backend, sides[i].label, "peers-contended", kContenders, summarize(t.handoffs_us)};
    row.s.ops_per_s = t.elapsed_s > 0 ? static_cast<double>(t.total) / t.elapsed_s : 0;
    row.fairness = jain(t.grants);
    row.min_grants = *std::min_element(t.grants.begin(), t.grants.end());
    row.max_grants = *std::max_element(t.grants.begin(), t.grants.end());
    const std::string line = fmt::format(
        "peers on {}: {}: uncontended p50 {:.1f} us, p99 {:.1f} us; contended: {} grants (per process per round "
        "{}..{}), {} of them hand-offs to another process (p50 {:.1f} us, p99 {:.1f} us), {:.0f} grants/s, Jain "
        "{:.3f}{}",
        backend, sides[i].label, rows[i][0].s.p50_us, rows[i][0].s.p99_us, t.total, row.min_grants, row.max_grants,
        t.handoffs_us.size(), row.s.p50_us, row.s.p99_us, row.s.ops_per_s, *row.fairness,
        t.timeouts ? fmt::format(", {} waits timed out ({} s after the round's end at the latest)", t.timeouts,
                                 kGrace.count() / 1000)
                   : "");
    fmt::print(stderr, "dblock-bench: {}\n", line);
    rep.notes.push_back(line);
  }
  for (int w = 0; w < 2; ++w) {
    for (std::size_t i = 0; i < p; ++i) {
      rows[i][w].vs = {compare(rows[i][w], rows[p][w])};
      rep.rows.push_back(rows[i][w]);
    }
    rep.rows.push_back(rows[p][w]);
  }
  rep.notes.push_back(fmt::format(
      "peers on {}: {} ({}; {} {}: {}) beside dblock's {} strateg{} on the same server, each side as worker "
      "processes (dblock's: this binary, one Client each, default options), the sides taking turns in rounds, "
      "the first side rotated each round. peers-uncontended: 1 process per round, blocking acquire (wait up to {} s) "
      "+ release of one name, {} rounds of {} timed cycles, each after {} untimed. peers-contended: {} rounds of {} "
      "processes on one name for {:.1f} s (each process first makes one untimed attempt), each: acquire (giving "
      "up {} s after the round's end), sleep {} ms, "
      "release, again at once; every grant and "
      "release stamped with CLOCK_MONOTONIC, p50/p99 = hand-off (the next holder's grant - the previous holder's "
      "release, when the lock changed process; a re-grant to the releaser is counted as a grant, not a hand-off), "
      "ops/s = grants/s, Jain's index over the grants of each process in each round. ratio = dblock p50 / {} p50",
      backend, peer.name, tally[p].version, runtime, script, peer.how, dblock_side, p > 1 ? "ies" : "y",
      kWait.count() / 1000, u_rounds, cycles, opt.warmup, c_rounds, kContenders, seconds,
      kGrace.count() / 1000, kHoldMs, peer.name));
  return rep;
}

void print_peers_table(const std::vector<Row>& rows) {
  std::vector<std::pair<const Row*, const Row*>> pairs;  // (dblock, peer), uncontended before contended
  for (const auto& r : rows)
    if (r.scenario.rfind("peers-", 0) == 0 && !r.vs.empty())
      for (const auto& p : rows)
        if (p.backend == r.backend && p.scenario == r.scenario && p.strategy == r.vs.front().baseline)
          pairs.emplace_back(&r, &p);
  if (pairs.empty()) return;
  fmt::print(
      "\n## Peers: dblock beside the library a user would pick instead, same server, same run\n\n"
      "- uncontended: 1 process, acquire + release of one name; hand-off: {} processes contend for one name, "
      "each holding {} ms, from the previous holder's release to the next holder's grant when the lock changed "
      "process (hand-offs: how many there were); grants/s and Jain's fairness index over the grants of each "
      "process in each round; both sides on the same server in the same run, alternating. dblock / peer: below 1 is "
      "better for dblock on the latencies, above 1 on grants/s and "
      "Jain\n\n",
      kContenders, kHoldMs);
  fmt::print("| backend | figure | dblock | value | peer | value | dblock / peer |\n");
  fmt::print("|---|---|---|---:|---|---:|---:|\n");
  auto line = [](const Row& d, const Row& p, const char* figure, double dv, double pv, const char* f) {
    fmt::print("| {} | {} | {} | {} | {} | {} | {:.3g} |\n", d.backend, figure, d.strategy,
               fmt::format(fmt::runtime(f), dv), p.strategy, fmt::format(fmt::runtime(f), pv), pv > 0 ? dv / pv : 0);
  };
  for (const auto& [d, p] : pairs) {
    if (d->scenario == "peers-uncontended") {
      line(*d, *p, "uncontended p50 us", d->s.p50_us, p->s.p50_us, "{:.1f}");
      line(*d, *p, "uncontended p99 us", d->s.p99_us, p->s.p99_us, "{:.1f}");
    } else {
      line(*d, *p, "hand-off p50 us", d->s.p50_us, p->s.p50_us, "{:.1f}");
      line(*d, *p, "hand-offs", static_cast<double>(d->s.samples), static_cast<double>(p->s.samples), "{:.0f}");
      line(*d, *p, "grants/s", d->s.ops_per_s, p->s.ops_per_s, "{:.0f}");
      line(*d, *p, "Jain index", d->fairness.value_or(0), p->fairness.value_or(0), "{:.3f}");
    }
  }
  std::fflush(stdout);
}

}  // namespace dblock_bench
