// dblock-bench: what an uncontended acquire+release and a hand-off between 8 contending
// clients cost, per backend and strategy, next to bare baselines measured in the same run
// (bench/backends/: on SQLite an INSERT + DELETE pair on the same file with the same pragmas,
// on PostgreSQL and MySQL a SELECT 1 and per strategy the bare statements it cannot avoid);
// and the hand-off again with notifications off (waiters poll), to show what notifications
// buy. This file: the entry points of the run and of its worker processes, the run over the
// backends of bench/backends/registry.cpp and the cross-backend scenarios, and the report.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "bench/backends/registry.hpp"
#include "bench/report/page.hpp"
#include "bench/report/plots.hpp"
#include "bench/scenarios/contended.hpp"
#include "bench/scenarios/peers.hpp"
#include "bench/scenarios/pooler.hpp"
#include "bench/scenarios/resources.hpp"
#include "bench/scenarios/scale.hpp"
#include "bench/scenarios/shapes.hpp"
#include "bench/scenarios/sweep.hpp"
#include "bench/scenarios/table_size.hpp"
#include "bench/scenarios/tls.hpp"
#include "bench/support/awake.hpp"
#include "bench/support/run.hpp"
#include "bench/support/util.hpp"
#include "dblock/dblock.hpp"

using namespace dblock_bench;

namespace {

int run(const Options& opt, const RunFacts& facts) {
  if (!opt.csv.empty()) {  // fail before minutes of work, not after
    std::ofstream probe(opt.csv, std::ios::app);
    if (!probe) throw CantCreate(fmt::format("cannot write CSV file '{}'", opt.csv));
  }
  if (!opt.markdown.empty()) try {
      probe_markdown_path(opt.markdown);
    } catch (const std::runtime_error& e) {
      throw CantCreate(e.what());
    }
  KeepAwake awake(opt.keep_awake);
  std::vector<std::string> notes{awake.note()};
  if (opt.unfair)
    notes.push_back("--unfair: the uncontended, handoff, contended and peers locks with LockOptions::fair = "
                    "false (waiters keep no place in a queue; the default is fair)");
  // Notes on the scenarios, after the backends' (known before the run: a page written
  // part-way holds them too).
  std::vector<std::string> general;
  general.push_back(fmt::format(
      "uncontended: one thread, try_acquire() then release() of one name per strategy; {} timed cycles per "
      "series, a backend's series (baselines included) interleaved in {} rotating rounds; {} warm-up cycles "
      "first and {} untimed cycles each time a series resumes; ops/s = 1e6 / mean cycle time",
      opt.iterations, interleaved_rounds(opt), opt.warmup, kRewarm));
  if (opt.wants_scenario("reentrant"))
    general.push_back(fmt::format(
        "reentrant: one thread holds a lease per strategy (its own Client) and times try_acquire() then release() "
        "of the same name again: a re-entrant hold under the outer one, which the Client counts and writes to the "
        "server's hold count (lease strategies); {} timed cycles, one strategy after the other, each with only its "
        "own outer hold",
        opt.iterations));
  if (opt.wants_scenario("handoff") || opt.wants_scenario("handoff-polling"))
    general.push_back(fmt::format(
        "handoff: {} threads, each with its own Client, contend for one name; latency = when the next holder "
        "has the lease - when the previous holder called release() (steady_clock); a thread contends again "
        "only once another one got the lease (no barging); a holder keeps the lease {} before it releases; "
        "{} timed hand-offs per series, {} untimed before each run of one; "
        "ops/s = timed hand-offs / their span. Scenario `handoff`: the Clients as opened by default "
        "(ClientOptions.notifications = true: waiters are woken by LISTEN/NOTIFY or inotify; mysql has no "
        "notifications, so there its lease waiters poll in both scenarios); scenario `handoff-polling`: the same with every Client "
        "opened with ClientOptions.notifications = false (waiters poll with backoff). The `handoff` series of "
        "every strategy and every hand-off floor run in {} rounds of {} hand-offs, the order rotated each round; "
        "then per strategy the `handoff-polling` series in one run; each on a name of its own. The session strategies "
        "(for-update, advisory) wait inside the server in both",
        kHandoffWorkers, opt.hold_ms ? fmt::format("{} ms (--hold-ms)", opt.hold_ms) : std::string("0 ms"),
        opt.handoffs, handoff_warmup(opt), kHandoffRounds, opt.handoffs / kHandoffRounds));
  general.push_back(
      "ratio = p50 / p50 of the `baseline` row (several baselines: one ratio each, in the same order, "
      "separated by /): uncontended sqlite strategies vs sqlite `bare / bare+fence` (insert also / "
      "`bare-lease-insert`, optimistic also / `bare-lease-optimistic`), `bare+fence` vs `bare` and "
      "`bare-lease-insert` and `bare-lease-optimistic` vs `bare / bare+fence`; uncontended "
      "postgresql strategies vs their own bare baseline(s) (insert: `bare-insert / bare-lease-insert`, optimistic: "
      "`bare-optimistic / bare-lease-optimistic`, for-update: "
      "`bare-for-update / bare-for-update+fence`, advisory: `advisory-pair / advisory-pair+fence`); uncontended "
      "mysql strategies vs their own two, without and with the fence draw, and the lease strategies also vs "
      "the least correct lease (insert: `bare-insert / bare-insert+fence / bare-lease-insert`, optimistic: "
      "`bare-optimistic / bare-optimistic+fence / bare-lease-optimistic`, for-update: `bare-for-update / bare-for-update+fence`, advisory: `getlock-pair / "
      "getlock-pair+fence`); a postgresql or mysql `...+fence` baseline vs the same baseline without it (what "
      "the fence draw costs); `bare-lease-...` vs the strategy's fenced bare baseline (postgresql `bare-insert`, "
      "`bare-optimistic`; mysql `...+fence`); etcd `etcd` vs `bare-put-delete / bare-lease-put-delete / "
      "bare-recipe`; the other postgresql, mysql and etcd baseline rows vs `select1`; handoff vs sqlite `bare` / "
      "the server backends' `select1`, the lease strategies' handoff rows (redis, zookeeper, etcd: the "
      "strategy's) first vs their backend's hand-off floor (`bare-...-handoff`, itself vs `bare` / `select1`); "
      "handoff-polling vs the same strategy's `handoff` row (`<strategy> handoff`: polling p50 / notified p50); "
      "peers-uncontended and peers-contended (hand-off p50) vs the peer library's row of the same workload. "
      "x select1 = p50 / p50 of the same backend's `select1`");
  std::vector<Row> rows;
  std::vector<std::string> servers, skipped;  // for the Markdown page's header
  auto add = [&](BackendReport rep) {
    notes.insert(notes.end(), rep.notes.begin(), rep.notes.end());
    rows.insert(rows.end(), rep.rows.begin(), rep.rows.end());
    if (!rep.server.empty() && !rep.rows.empty()) servers.push_back(rep.rows.front().backend + ": " + rep.server);
  };
  // The parts of the run, and those done: the CSV, the plots and the page are written again as
  // each part ends, so that a run stopped part-way leaves a page of what it finished, which
  // says so in its header.
  std::vector<std::string> parts, done;
  for (const auto& b : backends())
    if (opt.wants_backend(b.name)) parts.push_back(b.name);
  for (const char* s : {"table-size", "sweep", "tls", "pooler", "scale"})
    if (opt.wants_scenario(s)) parts.push_back(s);
  auto write_files = [&](const std::vector<std::string>& all_notes) {
    if (!opt.csv.empty()) {
      try {
        write_csv(opt.csv, rows);
      } catch (const std::runtime_error& e) {
        throw CantCreate(e.what());
      }
      write_plots(opt.csv, rows);
    }
    if (!opt.markdown.empty()) {
      try {
        write_markdown(RunReport{facts, servers, skipped, all_notes, rows, parts, done}, opt);
      } catch (const std::runtime_error& e) {
        throw CantCreate(e.what());
      }
      fmt::print(stderr, "dblock-bench: wrote {} ({} of {} parts)\n", opt.markdown, done.size(), parts.size());
    }
  };
  auto checkpoint = [&](const std::string& part) {
    done.push_back(part);
    // The last is written at the end; a --quick run (CI's smoke, a minute) has nothing worth
    // saving part-way, and the plots take seconds of gnuplot each time.
    if (done.size() == parts.size() || opt.markdown.empty() || opt.quick) return;
    auto all_notes = notes;
    all_notes.insert(all_notes.end(), general.begin(), general.end());
    write_files(all_notes);
  };
  // Each backend of the registry when selected, unless it cannot run here (then one line
  // says why).
  for (const auto& b : backends()) {
    if (!opt.wants_backend(b.name)) continue;
    if (auto why_not = b.skip_reason()) {
      fmt::print(stderr, "skipped {}: {}\n", b.name, *why_not);
      skipped.push_back(fmt::format("{}: {}", b.name, *why_not));
      parts.erase(std::find(parts.begin(), parts.end(), b.name));
    } else {
      add(b.run(opt));
      checkpoint(b.name);
    }
  }
  // Across the backends, each on a table of its own (scenarios/table_size.cpp, scenarios/sweep.cpp).
  if (opt.wants_scenario("table-size")) add(run_table_size(opt)), checkpoint("table-size");
  if (opt.wants_scenario("sweep")) add(run_sweep(opt)), checkpoint("sweep");
  if (opt.wants_scenario("tls")) add(run_tls(opt)), checkpoint("tls");
  if (opt.wants_scenario("pooler")) add(run_pooler(opt)), checkpoint("pooler");
  if (opt.wants_scenario("scale")) add(run_scale(opt)), checkpoint("scale");
  notes.insert(notes.end(), general.begin(), general.end());
  std::vector<Row> main_rows;  // table-size and sweep get tables of their own below it
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(main_rows),
               [](const Row& r) { return r.scenario != "table-size" && r.scenario != "sweep"; });
  print_markdown(notes, main_rows, polling_summary(rows));
  print_table_size_markdown(rows);
  print_sweep_markdown(rows);
  print_contended_table(rows);
  print_shapes_table(rows, opt);
  print_resources_table(rows);
  print_peers_table(rows);
  print_tls_markdown(rows);
  print_pooler_markdown(rows);
  print_scale_markdown(rows);
  write_files(notes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A contended-scenario worker: this binary started again by run_contended_scenario.
  if (argc > 1 && std::string(argv[1]) == kContendedWorkerFlag) return contended_worker_main(argc, argv);
  // A shared / semaphore scenario worker: started again by run_shape_scenarios.
  if (argc > 1 && std::string(argv[1]) == kShapeWorkerFlag) return shape_worker_main(argc, argv);
  // A scale scenario worker: started again by run_scale's processes part.
  if (argc > 1 && std::string(argv[1]) == kScaleWorkerFlag) return scale_worker_main(argc, argv);
  // A peers scenario worker on dblock's side: started again by run_peer_scenario.
  if (argc > 1 && std::string(argv[1]) == kPeerWorkerFlag) return peer_worker_main(argc, argv);
  const RunFacts facts = run_facts(argc, argv);  // the load average before the run adds to it
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
    return run(opt, facts);
  } catch (const dblock::Error& e) {
    fmt::print(stderr, "dblock-bench: dblock error: {}\n", e.what());
  } catch (const CorrectnessViolation& e) {
    fmt::print(stderr, "dblock-bench: {}\n", e.what());
    return 1;
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
