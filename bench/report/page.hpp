// dblock-bench --markdown: the run as one Markdown page (docs/BENCHMARKS.md is one), so that
// the page is regenerated from one run by one command, never edited by hand. Its header
// says when, at which commit, on what machine under what load, against which servers with
// which flush settings, and by which command; then one compact table per scenario with fixed
// text on how to read it, the guidance on which strategy for what (fixed prose, with the
// figures of the run beside it), the plots, and the run's notes on what each baseline sends.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "bench/support/util.hpp"

namespace dblock_bench {

// What is known before the run starts (the load average then, the commit built).
struct RunFacts {
  std::string command;  // the command line, quoted for a shell
  std::string commit;   // `git describe --always --dirty` of the source tree, or "unknown"
  std::string machine;  // CPU model, vCPUs, memory, kernel
  std::string load;     // the 1, 5 and 15 minute load averages
  std::chrono::system_clock::time_point started;
};
RunFacts run_facts(int argc, char** argv);

struct RunReport {
  RunFacts facts;
  std::vector<std::string> servers;  // "backend: version; settings", one per backend that ran
  std::vector<std::string> skipped;  // "backend: why", one per backend the run skipped
  std::vector<std::string> notes;    // the run's notes (what each baseline sends, ...)
  std::vector<Row> rows;
  std::vector<std::string> parts;  // the backends and cross-backend scenarios the run was to measure
  std::vector<std::string> done;   // those it has measured (all of them once it ended)
};

// Writes the page to opt.markdown (to a temporary file beside it, then renamed, so that a
// failed write leaves the old page). Throws std::runtime_error when it cannot.
void write_markdown(const RunReport& run, const Options& opt);

// Fails now (std::runtime_error) when `path`'s directory cannot take the page, not after the run.
void probe_markdown_path(const std::string& path);

}  // namespace dblock_bench
