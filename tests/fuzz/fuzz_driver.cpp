// A small stand-in for libFuzzer's main(), for compilers without it (GCC): runs every file of
// the corpus, then a bounded number of random mutations of corpus entries. No coverage
// feedback: it finds what mutations of good seeds reach, which is why the corpus matters.
//
//   fuzz_url [--seconds N] [--runs N] [--seed S] [--max-len N] [CORPUS_DIR | FILE]...
//
// Directories are corpora (run, then mutated); a file alone is run once (to reproduce a
// crash). With neither --seconds nor --runs: 5 s or 20000 runs, whichever comes first. The
// same seed gives the same inputs. On a crash (trap, abort, signal, sanitizer report) the
// input is written to crash-<hash> in the current directory.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Set only in sanitizer builds: called when a sanitizer reports an error and ends the process.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace {

using Bytes = std::vector<std::uint8_t>;

// The input being run, for the crash handlers (which may only read it).
const std::uint8_t* g_input = nullptr;
std::size_t g_input_size = 0;

// Writes the current input to crash-<FNV-1a 64 of it>. Async-signal-safe: no allocation.
void save_crash_input() {
  std::uint64_t h = 14695981039346656037ull;
  for (std::size_t i = 0; i < g_input_size; ++i) h = (h ^ g_input[i]) * 1099511628211ull;
  char name[] = "crash-0000000000000000";
  for (int i = 0; i < 16; ++i) name[6 + i] = "0123456789abcdef"[(h >> (60 - 4 * i)) & 0xF];
  int fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    for (std::size_t done = 0; done < g_input_size;) {
      auto n = write(fd, g_input + done, g_input_size - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    close(fd);
  }
  const char* parts[] = {"fuzz_driver: crashing input written to ", name, "\n"};
  for (const char* p : parts) (void)!write(STDERR_FILENO, p, std::strlen(p));
}

void on_crash_signal(int sig) {
  save_crash_input();
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_crash_handlers() {
  if (__sanitizer_set_death_callback) {
    // The sanitizers report SEGV and friends better than we can: leave those signals to them.
    __sanitizer_set_death_callback(save_crash_input);
    for (int sig : {SIGABRT, SIGILL}) signal(sig, on_crash_signal);
  } else {
    for (int sig : {SIGABRT, SIGILL, SIGSEGV, SIGBUS, SIGFPE}) signal(sig, on_crash_signal);
  }
}

// Runs one input from a buffer of exactly its size, so that a sanitizer sees any overread.
void run_one(const Bytes& input) {
  Bytes copy(input);
  g_input = copy.data();
  g_input_size = copy.size();
  LLVMFuzzerTestOneInput(copy.data(), copy.size());
  g_input = nullptr;
  g_input_size = 0;
}

// Tokens of the inputs under test (URLs, names, durations, argv), spliced in whole because
// random bytes rarely spell them.
const std::vector<std::string>& dictionary() {
  static const std::vector<std::string> tokens = {
      "://", "@", ":", "/", "%", "?", "=", "&", ",", "[", "]", ".", "..", "%40", "%25", "%3A", "%2F", "%zz", "%0",
      "0", "1", "9", "65535", "65536", "99999999999999999999", "9223372036854775807", "ms", "s", "m", "h",
      "\xff", "\xc0\x80", "\xed\xa0\x80", "\xf0\x9f\x94\x92", "\xe2\x82\xac", std::string(1, '\0'), " ", "-",
      "sqlite:", "postgresql://", "mysql://", "redis://", "redlock://", "zookeeper://", "__lock__", "--",
      "--url", "--name", "--ttl", "--wait", "--no-wait", "--batch", "--every", "--timeout", "--table", "run",
      "sweep", "list", "release", "migrate", "--help"};
  return tokens;
}

class Mutator {
 public:
  Mutator(std::uint64_t seed, std::size_t max_len) : rng_(seed), max_len_(max_len) {}

  // A corpus entry with one to five random edits.
  Bytes mutate(const std::vector<Bytes>& corpus) {
    Bytes b = corpus.empty() ? Bytes{} : corpus[below(corpus.size())];
    for (auto edits = 1 + below(5); edits > 0; --edits) edit(b, corpus);
    if (b.size() > max_len_) b.resize(max_len_);
    return b;
  }

 private:
  std::size_t below(std::size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
  std::uint8_t random_byte() { return static_cast<std::uint8_t>(below(256)); }

  void edit(Bytes& b, const std::vector<Bytes>& corpus) {
    switch (below(b.empty() ? 2 : 8)) {
      case 0: {  // insert a dictionary token
        const auto& t = dictionary()[below(dictionary().size())];
        b.insert(b.begin() + below(b.size() + 1), t.begin(), t.end());
        break;
      }
      case 1: b.insert(b.begin() + below(b.size() + 1), random_byte()); break;
      case 2: b[below(b.size())] ^= static_cast<std::uint8_t>(1u << below(8)); break;
      case 3: b[below(b.size())] = random_byte(); break;
      case 4: {  // delete a run of up to 8 bytes
        auto at = below(b.size());
        b.erase(b.begin() + at, b.begin() + std::min(b.size(), at + 1 + below(8)));
        break;
      }
      case 5: {  // overwrite with a dictionary token
        const auto& t = dictionary()[below(dictionary().size())];
        auto at = below(b.size());
        for (std::size_t i = 0; i < t.size() && at + i < b.size(); ++i) b[at + i] = static_cast<std::uint8_t>(t[i]);
        break;
      }
      case 6: {  // splice: our head, another entry's tail
        const auto& other = corpus[below(corpus.size())];
        b.resize(below(b.size() + 1));
        b.insert(b.end(), other.begin() + below(other.size() + 1), other.end());
        break;
      }
      case 7: {  // repeat a chunk (long names, many hosts, many arguments)
        auto at = below(b.size());
        Bytes chunk(b.begin() + at, b.begin() + std::min(b.size(), at + 1 + below(16)));
        for (auto times = 1 + below(16); times > 0; --times) b.insert(b.begin() + at, chunk.begin(), chunk.end());
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  std::size_t max_len_;
};

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--seconds N] [--runs N] [--seed S] [--max-len N] [CORPUS_DIR | FILE]...\n",
               argv0);
  std::exit(64);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = -1;
  long long runs = -1;
  std::uint64_t seed = 1;
  std::size_t max_len = 4096;
  std::vector<std::filesystem::path> dirs, files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : (usage(argv[0]), ""); };
    if (arg == "--seconds") seconds = std::atof(value().c_str());
    else if (arg == "--runs") runs = std::atoll(value().c_str());
    else if (arg == "--seed") seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (arg == "--max-len") max_len = std::strtoull(value().c_str(), nullptr, 10);
    else if (!arg.empty() && arg[0] == '-') usage(argv[0]);
    else if (std::filesystem::is_directory(arg)) dirs.push_back(arg);
    else if (std::filesystem::is_regular_file(arg)) files.push_back(arg);
    else usage(argv[0]);
  }
  if (seconds < 0 && runs < 0) seconds = 5, runs = 20000;
  if (!files.empty() && dirs.empty() && runs < 0) runs = 0;  // reproducing: just those files

  install_crash_handlers();
  std::vector<Bytes> corpus;
  for (const auto& f : files) corpus.push_back(read_file(f));
  for (const auto& d : dirs) {
    std::vector<std::filesystem::path> entries;  // sorted: the same order on every machine
    for (const auto& e : std::filesystem::directory_iterator(d))
      if (e.is_regular_file()) entries.push_back(e.path());
    std::sort(entries.begin(), entries.end());
    for (const auto& e : entries) corpus.push_back(read_file(e));
  }

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  for (const auto& input : corpus) run_one(input);

  Mutator mutator(seed, max_len);
  long long done = 0;
  auto deadline = seconds < 0 ? Clock::time_point::max()
                              : start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while ((runs < 0 || done < runs) && Clock::now() < deadline) {
    run_one(mutator.mutate(corpus));
    ++done;
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("%s: %zu corpus inputs, %lld mutated runs (seed %llu) in %.1f s, %.0f execs/s, no crash\n", argv[0],
              corpus.size(), done, static_cast<unsigned long long>(seed), elapsed,
              static_cast<double>(corpus.size() + done) / std::max(elapsed, 1e-9));
  return 0;
}
