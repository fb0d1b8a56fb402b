#include "bench_util.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
#include <string_view>

#include <fmt/format.h>

namespace dblock_bench {

const char* usage_text() {
  return "usage: dblock-bench [--quick] [--iterations N] [--dir DIR] [--csv FILE]\n"
         "\n"
         "Times uncontended acquire+release cycles of one lock name on the sqlite backend for\n"
         "each strategy (insert, optimistic), against a bare baseline measured in the same run\n"
         "on the same file and pragmas: a prepared INSERT + DELETE pair on its own table.\n"
         "The series are interleaved (at least 3 rounds, at most 50 timed cycles of a series\n"
         "in a row, the order rotated each round) and each series' samples pooled.\n"
         "\n"
         "  --quick         few iterations (300 unless --iterations is given): a smoke test\n"
         "  --iterations N  timed cycles per series (default 5000)\n"
         "  --dir DIR       where to put bench.db (created if missing, kept); default: a fresh\n"
         "                  mkdtemp dir under /tmp, removed at the end\n"
         "  --csv FILE      also write rows: backend,strategy,scenario,workers,ops_per_s,\n"
         "                  p50_us,p99_us,baseline,ratio (baseline: the strategy column of the\n"
         "                  row compared with; ratio: p50 / baseline p50)\n"
         "  --help          this text\n"
         "\n"
         "Prints a Markdown table on stdout and progress on stderr. Exit status: 0 success,\n"
         "64 bad options, 70 a dblock or SQLite error, 73 the CSV or DIR cannot be created.\n";
}

namespace {

std::size_t parse_count(std::string_view opt, const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageProblem(fmt::format("{} wants a positive integer, not '{}'", opt, text));
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v == 0 || v > 100'000'000ULL)
    throw UsageProblem(fmt::format("{} wants an integer from 1 to 100000000, not '{}'", opt, text));
  return static_cast<std::size_t>(v);
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  std::optional<std::size_t> iterations;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::optional<std::string> inline_value;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      inline_value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) throw UsageProblem(fmt::format("{} needs a value", arg));
      return argv[++i];
    };
    auto no_value = [&] {
      if (inline_value) throw UsageProblem(fmt::format("{} takes no value", arg));
    };
    if (arg == "--help" || arg == "-h") no_value(), o.help = true;
    else if (arg == "--quick") no_value(), o.quick = true;
    else if (arg == "--iterations") iterations = parse_count(arg, value());
    else if (arg == "--dir") {
      o.dir = value();
      if (o.dir.empty()) throw UsageProblem("--dir needs a non-empty path");
    } else if (arg == "--csv") {
      o.csv = value();
      if (o.csv.empty()) throw UsageProblem("--csv needs a non-empty path");
    } else throw UsageProblem(fmt::format("unknown option '{}'", argv[i]));
  }
  o.iterations = iterations.value_or(o.quick ? 300 : 5000);
  o.warmup = std::clamp<std::size_t>(o.iterations / 10, 10, 200);
  return o;
}

Summary summarize(std::vector<double> v) {
  Summary s;
  s.samples = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double p) {  // nearest rank: the smallest value with at least p of samples <= it
    auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::clamp<std::size_t>(k, 1, v.size()) - 1];
  };
  s.mean_us = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.p50_us = rank(0.50);
  s.p99_us = rank(0.99);
  s.ops_per_s = s.mean_us > 0 ? 1e6 / s.mean_us : 0;
  return s;
}

std::string machine_description() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown-host");
  long nproc = sysconf(_SC_NPROCESSORS_ONLN);
  std::string kernel = "unknown kernel";
  if (utsname u{}; uname(&u) == 0) kernel = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  std::string cpu = "unknown CPU";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0) {
      if (auto c = line.find(':'); c != std::string::npos) cpu = line.substr(line.find_first_not_of(" \t", c + 1));
      break;
    }
  return fmt::format("{}, nproc {}, {}, {}", host, nproc, cpu, kernel);
}

void print_markdown(const Context& ctx, const std::vector<Row>& rows) {
  fmt::print("# dblock-bench: uncontended acquire+release\n\n");
  fmt::print("- machine: {}\n", machine_description());
  fmt::print("- SQLite {} (sqlite3_libversion), file {}\n", ctx.sqlite_version, ctx.db_path);
  fmt::print("- pragmas: {}\n", ctx.pragmas);
  fmt::print("- iterations: {} timed cycles per series, interleaved in {} rotating rounds; {} warm-up cycles "
             "first and 2 untimed cycles each time a series resumes\n",
             ctx.iterations, ctx.rounds, ctx.warmup);
  fmt::print("- baseline `bare`: prepared `INSERT INTO bare(name, v)` + `DELETE FROM bare WHERE name = ?`\n");
  fmt::print("- ops/s = 1e6 / mean cycle time; ratio = p50 / p50 of the baseline\n\n");
  fmt::print("| backend | strategy | scenario | workers | ops/s | p50 us | p99 us | ratio |\n");
  fmt::print("|---|---|---|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rows)
    fmt::print("| {} | {} | {} | {} | {:.0f} | {:.1f} | {:.1f} | {:.2f} |\n", r.backend, r.strategy, r.scenario,
               r.workers, r.s.ops_per_s, r.s.p50_us, r.s.p99_us, r.ratio);
  std::fflush(stdout);
}

void write_csv(const std::string& path, const std::vector<Row>& rows) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw std::runtime_error(fmt::format("cannot write CSV file '{}'", path));
  out << "backend,strategy,scenario,workers,ops_per_s,p50_us,p99_us,baseline,ratio\n";
  for (const auto& r : rows)
    out << fmt::format("{},{},{},{},{:.1f},{:.2f},{:.2f},{},{:.3f}\n", r.backend, r.strategy, r.scenario,
                       r.workers, r.s.ops_per_s, r.s.p50_us, r.s.p99_us, r.baseline, r.ratio);
  out.flush();
  if (!out) throw std::runtime_error(fmt::format("cannot write CSV file '{}'", path));
}

}  // namespace dblock_bench
