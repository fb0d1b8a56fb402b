// dblock-bench helpers: command-line options, statistics, machine facts and the report
// (Markdown table on stdout, optional CSV).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace dblock_bench {

// A bad command line: main prints one line and exits 64 (EX_USAGE).
struct UsageProblem : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  bool help = false;
  bool quick = false;
  std::size_t iterations = 5000;  // timed cycles per series (quick: 300)
  std::size_t warmup = 200;       // untimed cycles per series before the first round
  std::size_t rounds = 3;         // at least this many interleaved rounds
  std::string dir;                // empty: a fresh mkdtemp dir under /tmp, removed at the end
  std::string csv;                // empty: no CSV
};

// Throws UsageProblem.
Options parse_options(int argc, char** argv);
const char* usage_text();

struct Summary {
  std::size_t samples = 0;
  double mean_us = 0, p50_us = 0, p99_us = 0, ops_per_s = 0;
};
// Nearest-rank percentiles over per-cycle durations in microseconds.
Summary summarize(std::vector<double> samples_us);

struct Row {
  std::string backend, strategy, scenario;
  int workers = 1;
  Summary s;
  std::string baseline;  // the `strategy` of the row this one is compared with
  double ratio = 1.0;    // p50 / p50 of the baseline row
};

struct Context {       // what the table header states
  std::string sqlite_version;
  std::string pragmas;  // as read back from the baseline connection
  std::string db_path;
  std::size_t iterations = 0, warmup = 0, rounds = 0;
};

std::string machine_description();  // host, nproc, CPU model, kernel
void print_markdown(const Context& ctx, const std::vector<Row>& rows);
// Throws std::runtime_error when the file cannot be written.
void write_csv(const std::string& path, const std::vector<Row>& rows);

}  // namespace dblock_bench
