#include "bench/report/plots.hpp"

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "bench/scenarios/fill.hpp"  // short_count
#include "bench/scenarios/shapes.hpp"  // kShapeHolders
#include "dblock/dblock.hpp"

extern char** environ;

namespace fs = std::filesystem;

namespace dblock_bench {

namespace {

bool gnuplot_installed() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t begin = 0; begin <= dirs.size();) {
    auto end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(begin, end - begin);
    if (access(((dir.empty() ? "." : dir) + "/gnuplot").c_str(), X_OK) == 0) return true;
    begin = end + 1;
  }
  return false;
}

// A gnuplot single-quoted string ('' is a quote inside).
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

bool is_lock_strategy(const std::string& strategy) {  // else a bare baseline (select1, bare-insert, ...)
  try {
    dblock::parse_strategy(strategy);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Runs `gnuplot script` and waits; false (with a line on stderr) when it cannot run or fails.
bool run_gnuplot(const std::string& script) {
  std::string prog = "gnuplot";
  std::vector<char*> argv{prog.data(), const_cast<char*>(script.c_str()), nullptr};
  pid_t pid;
  if (int rc = posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv.data(), environ); rc != 0) {
    fmt::print(stderr, "dblock-bench: plots skipped: cannot start gnuplot: {}\n", std::strerror(rc));
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  fmt::print(stderr, "dblock-bench: warning: gnuplot {} failed (status {})\n", script, status);
  return false;
}

// The rows of one scenario grouped into series (backend/strategy), in the order they came.
using SeriesRows = std::vector<std::pair<std::string, std::vector<const Row*>>>;
SeriesRows by_series(const std::vector<Row>& rows, const std::string& scenario) {
  SeriesRows out;
  for (const auto& r : rows) {
    if (r.scenario != scenario) continue;
    std::string label = r.backend + "/" + r.strategy;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& s) { return s.first == label; });
    if (it == out.end()) it = out.insert(out.end(), {label, {}});
    it->second.push_back(&r);
  }
  return out;
}

// One line chart: x and y from each row of each series, both axes log scale.
std::string line_chart(const fs::path& dir, const std::string& name, const SeriesRows& series,
                       const std::function<double(const Row&)>& x, const std::function<double(const Row&)>& y,
                       const std::string& settings) {
  static const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                         "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#f0c000",
                                         "#005f5f", "#a00060", "#60a0ff", "#806000"};
  static const int kPoints[] = {7, 5, 9, 13, 11, 15};  // filled circle, square, triangles, diamond, pentagon
  std::vector<std::string> backends;
  std::string plot;
  for (std::size_t i = 0; i < series.size(); ++i) {
    auto file = dir / fmt::format("{}-{}.dat", name, i);
    std::ofstream out(file);
    auto points = series[i].second;
    std::sort(points.begin(), points.end(), [&](const Row* a, const Row* b) { return x(*a) < x(*b); });
    for (const Row* r : points) out << fmt::format("{} {}\n", x(*r), y(*r));
    // gnuplot's default colours repeat after 8: a colour of its own per series, and the
    // point shape and dash type of its backend, so that a dozen lines stay apart.
    const std::string backend = series[i].first.substr(0, series[i].first.find('/'));
    auto it = std::find(backends.begin(), backends.end(), backend);
    if (it == backends.end()) it = backends.insert(backends.end(), backend);
    const auto b = static_cast<std::size_t>(it - backends.begin());
    plot += fmt::format("{}{} using 1:2 with linespoints lw 2 lc rgb '{}' pt {} ps 1.3 dt {} title {}",
                        plot.empty() ? "plot " : ", \\\n  ", quoted(file.string()),
                        kColours[i % std::size(kColours)], kPoints[b % std::size(kPoints)], b % 4 + 1,
                        quoted(series[i].first));
  }
  // Ticks at the measured x values (1 4 16 64 workers; 1 10k 1M rows), not at powers of 10.
  std::set<double> xs;
  for (const auto& s : series)
    for (const Row* r : s.second) xs.insert(x(*r));
  std::string tics;
  for (double v : xs)
    tics += fmt::format("{}\"{}\" {}", tics.empty() ? "" : ", ", short_count(static_cast<std::size_t>(v)), v);
  return settings + "set logscale xy\nset key outside right top\nset grid\nset xtics (" + tics + ")\n" + plot +
         "\n";
}

std::string uncontended_chart(const fs::path& dir, const std::vector<Row>& rows, std::size_t& count) {
  auto file = dir / "uncontended.dat";
  std::ofstream out(file);
  double floor = 1e9;
  count = 0;
  for (const auto& r : rows)
    if (r.scenario == "uncontended" && r.s.p50_us > 0) floor = std::min(floor, r.s.p50_us);
  floor /= 2;  // the bars start below the fastest p50 (a log axis has no 0)
  for (const auto& r : rows) {
    if (r.scenario != "uncontended" || r.s.p50_us <= 0) continue;
    out << fmt::format("{} \"{}/{}\" {} {} {} {}\n", count++, r.backend, r.strategy, r.s.p50_us, r.s.p99_us, floor,
                       is_lock_strategy(r.strategy) ? 1 : 2);
  }
  const std::string f = quoted(file.string());
  return fmt::format(
      "set title 'dblock-bench uncontended: try_acquire()+release(), p50 (bars) and p99 (dots), us, log scale'\n"
      "set logscale y\nset grid ytics\nset xtics rotate by 60 right\nset xrange [-1:{}]\n"
      "set style fill solid 0.8 border -1\nset key outside right top\nset ylabel 'us'\n"
      "plot {} using 1:3:($1-0.35):($1+0.35):5:3:6:xtic(2) with boxxyerrorbars lc variable notitle, \\\n"
      "  NaN with boxes lc 1 title 'p50, dblock strategy', NaN with boxes lc 2 title 'p50, bare baseline', \\\n"
      "  {} using 1:4 with points pt 7 ps 0.8 lc rgb 'black' title 'p99'\n",
      count, f, f);
}

// Grouped bars: grants/s per backend/strategy, one bar per line-up of holders (the `exclusive`,
// `shared` and `semaphore` rows), log scale; a line-up a strategy does not offer is left out.
std::string shapes_chart(const fs::path& dir, const std::vector<Row>& rows, std::size_t& groups) {
  std::vector<std::string> labels;
  for (const auto& r : rows)
    if (r.scenario == "exclusive" || r.scenario == "shared" || r.scenario == "semaphore")
      if (auto l = r.backend + "/" + r.strategy; std::find(labels.begin(), labels.end(), l) == labels.end())
        labels.push_back(l);
  groups = labels.size();
  auto file = dir / "shapes.dat";
  std::ofstream out(file);
  for (const auto& label : labels) {
    out << '"' << label << '"';  // backend/strategy: no quotes or blanks in it
    for (const auto& h : kShapeHolders) {
      auto it = std::find_if(rows.begin(), rows.end(),
                             [&](const Row& r) { return r.backend + "/" + r.strategy == label && r.holders == h; });
      out << (it == rows.end() || it->s.ops_per_s <= 0 ? std::string(" -") : fmt::format(" {:.1f}", it->s.ops_per_s));
    }
    out << "\n";
  }
  std::string plot;
  for (std::size_t i = 0; i < kShapeHolders.size(); ++i)
    plot += fmt::format("{}{} using {}{} title {}", i ? ", \\\n  " : "plot ", i ? "''" : quoted(file.string()), i + 2,
                        i ? "" : ":xtic(1)", quoted(kShapeHolders[i]));
  return "set title 'dblock-bench lock shapes: grants/s of 8 workers on one name, by holders (log scale)'\n"
         "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
         "set datafile missing '-'\nset logscale y\nset yrange [10:*]\nset grid ytics\nset ylabel 'grants/s'\n"
         "set xtics rotate by 30 right\nset key outside right top\n" +
         plot + "\n";
}

// Four panels of bars, one bar per backend/side of the peers scenario (dblock's strategies in
// one colour, the peer libraries in another, each backend's peer last): uncontended p50 and
// hand-off p50 (log scale), grants/s and Jain's index of the contended workload.
std::string peers_chart(const fs::path& dir, const std::vector<Row>& rows, std::size_t& bars) {
  std::vector<std::pair<std::string, std::string>> sides;  // (backend, strategy), as the rows came
  for (const auto& r : rows)
    if (r.scenario == "peers-uncontended" &&
        std::find(sides.begin(), sides.end(), std::make_pair(r.backend, r.strategy)) == sides.end())
      sides.emplace_back(r.backend, r.strategy);
  bars = sides.size();
  auto file = dir / "peers.dat";
  std::ofstream out(file);
  auto value = [&](const std::string& backend, const std::string& strategy, const char* scenario,
                   const std::function<double(const Row&)>& get) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row& r) {
      return r.backend == backend && r.strategy == strategy && r.scenario == scenario;
    });
    return it == rows.end() ? 0.0 : get(*it);
  };
  // Columns: label, then per figure a dblock and a peer column, one of them '-'.
  for (const auto& [backend, strategy] : sides) {
    const bool dblock_side = is_lock_strategy(strategy);
    out << '"' << backend << "/" << strategy << '"';  // no quotes or blanks in either
    for (double v : {value(backend, strategy, "peers-uncontended", [](const Row& r) { return r.s.p50_us; }),
                     value(backend, strategy, "peers-contended", [](const Row& r) { return r.s.p50_us; }),
                     value(backend, strategy, "peers-contended", [](const Row& r) { return r.s.ops_per_s; }),
                     value(backend, strategy, "peers-contended",
                           [](const Row& r) { return r.fairness.value_or(0); })}) {
      const std::string v_text = v > 0 ? fmt::format("{:.3f}", v) : "-";
      out << " " << (dblock_side ? v_text : "-") << " " << (dblock_side ? "-" : v_text);
    }
    out << "\n";
  }
  std::string script =
      "set multiplot layout 2,2 title 'dblock-bench peers: dblock beside the library a user would pick "
      "instead, same server, same run'\n"
      "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
      "set datafile missing '-'\nset grid ytics\nset xtics rotate by 45 right\n"
      "set key outside right top vertical\n";
  const char* panels[][3] = {
      {"uncontended acquire+release p50 (log scale)", "us", "set logscale y\nset yrange [*:*]\n"},
      {"hand-off p50, 6 processes contending (log scale)", "us", "set logscale y\nset yrange [*:*]\n"},
      {"grants/s, 6 processes contending", "grants/s", "unset logscale y\nset yrange [0:*]\n"},
      {"Jain fairness index, 6 processes contending", "Jain", "unset logscale y\nset yrange [0:1.05]\n"}};
  for (std::size_t i = 0; i < 4; ++i)
    script += fmt::format(
        "set title {}\nset ylabel {}\n{}plot {} using {}:xtic(1) lc 1 title 'dblock', '' using {} lc 2 "
        "title 'peer'\n",
        quoted(panels[i][0]), quoted(panels[i][1]), panels[i][2], quoted(file.string()), 2 * i + 2, 2 * i + 3);
  return script + "unset multiplot\n";
}

}  // namespace

void write_plots(const std::string& csv_path, const std::vector<Row>& rows) {
  if (!gnuplot_installed()) {
    fmt::print(stderr, "dblock-bench: plots skipped: gnuplot not installed\n");
    return;
  }
  fs::path csv(csv_path);
  fs::path stem = csv.parent_path() / (csv.extension() == ".csv" ? csv.stem() : csv.filename());
  std::string tmpl = (fs::temp_directory_path() / "dblock-bench-plots.XXXXXX").string();
  if (!mkdtemp(tmpl.data())) {
    fmt::print(stderr, "dblock-bench: plots skipped: mkdtemp {} failed\n", tmpl);
    return;
  }
  const fs::path dir = tmpl;
  try {
    auto png = [&](const char* what) { return stem.string() + "-" + what + ".png"; };
    auto header = [&](const std::string& out, int width, int height) {
      return fmt::format("set terminal pngcairo size {},{} noenhanced font 'sans,9'\nset output {}\n", width, height,
                         quoted(out));
    };
    std::vector<std::pair<std::string, std::string>> charts;  // png, script

    std::size_t bars = 0;
    std::string uncontended = uncontended_chart(dir, rows, bars);
    if (bars > 0)
      charts.emplace_back(png("uncontended"),
                          header(png("uncontended"), static_cast<int>(std::max<std::size_t>(900, 28 * bars + 300)), 700) +
                              uncontended);
    else
      fmt::print(stderr, "dblock-bench: uncontended plot skipped: no `uncontended` rows\n");

    auto contended = by_series(rows, "contended");
    if (!contended.empty())
      charts.emplace_back(
          png("contended"),
          header(png("contended"), 1100, 650) +
              line_chart(dir, "contended", contended, [](const Row& r) { return static_cast<double>(r.workers); },
                         [](const Row& r) { return r.s.ops_per_s; },
                         "set title 'dblock-bench contended: grants/s by worker count'\nset xlabel 'workers'\n"
                         "set ylabel 'grants/s'\nset logscale x 2\n"));
    else
      fmt::print(stderr, "dblock-bench: contended plot skipped: no `contended` rows\n");

    auto table_size = by_series(rows, "table-size");
    if (!table_size.empty())
      charts.emplace_back(
          png("table-size"),
          header(png("table-size"), 1100, 650) +
              line_chart(dir, "table-size", table_size,
                         [](const Row& r) { return static_cast<double>(r.table_rows); },
                         [](const Row& r) { return r.s.p50_us; },
                         "set title 'dblock-bench table-size: acquire+release p50 by other leases present'\n"
                         "set xlabel 'other leases (rows, keys; zookeeper: children of the root)'\n"
                         "set ylabel 'p50 us'\n"));
    else
      fmt::print(stderr, "dblock-bench: table-size plot skipped: no `table-size` rows\n");

    // scale: the held rows against N, the server's statements/s and the grants/s (log axes: a
    // series without a figure, e.g. sqlite's statements, is left out of that chart).
    for (const auto& [what, title, get] :
         std::vector<std::tuple<const char*, const char*, std::function<double(const Row&)>>>{
             {"scale-statements",
              "server statements/s while one Client holds N locks (bare-renew: one UPDATE per lease)",
              [](const Row& r) { return r.statements_per_s.value_or(0); }},
             {"scale-grants", "grants/s acquiring N locks on one Client",
              [](const Row& r) { return r.s.ops_per_s; }}}) {
      SeriesRows series;
      for (auto& [label, points] : by_series(rows, "scale-held")) {
        std::vector<const Row*> kept;
        for (const Row* r : points)
          if (get(*r) > 0) kept.push_back(r);
        if (!kept.empty()) series.emplace_back(label, kept);
      }
      if (series.empty()) {
        fmt::print(stderr, "dblock-bench: {} plot skipped: no `scale-held` rows with the figure\n", what);
        continue;
      }
      charts.emplace_back(png(what), header(png(what), 1100, 650) +
                                         line_chart(dir, what, series,
                                                    [](const Row& r) { return static_cast<double>(r.workers); }, get,
                                                    fmt::format("set title {}\nset xlabel 'locks held (N)'\n"
                                                                "set ylabel {}\n",
                                                                quoted(std::string("dblock-bench scale: ") + title),
                                                                quoted(what == std::string("scale-grants")
                                                                           ? "grants/s"
                                                                           : "statements/s"))));
    }

    std::size_t groups = 0;
    std::string shapes = shapes_chart(dir, rows, groups);
    if (groups > 0)
      charts.emplace_back(png("shapes"),
                          header(png("shapes"), static_cast<int>(std::max<std::size_t>(900, 110 * groups + 350)), 650) +
                              shapes);
    else
      fmt::print(stderr, "dblock-bench: shapes plot skipped: no `shared` or `semaphore` rows\n");

    std::size_t peer_bars = 0;
    std::string peers = peers_chart(dir, rows, peer_bars);
    if (peer_bars > 0)
      charts.emplace_back(png("peers"),
                          header(png("peers"), static_cast<int>(std::max<std::size_t>(1100, 120 * peer_bars + 400)),
                                 1000) +
                              peers);
    else
      fmt::print(stderr, "dblock-bench: peers plot skipped: no `peers` rows\n");

    for (const auto& [out, script] : charts) {
      auto file = dir / (fs::path(out).stem().string() + ".gp");
      std::ofstream(file) << script;
      if (run_gnuplot(file.string())) fmt::print(stderr, "dblock-bench: wrote {}\n", out);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "dblock-bench: warning: plots: {}\n", e.what());
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace dblock_bench
