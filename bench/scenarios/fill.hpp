// dblock-bench: the backends the table-size and sweep scenarios run on, each with a table
// (key namespace, root node) of the scenario's own, and the fastest way each has to put
// many other leases there before the timed part and to remove them after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/support/util.hpp"
#include "dblock/dblock.hpp"

namespace dblock_bench {

// One backend as a scenario with its own table sees it.
struct FillTarget {
  std::string backend;  // "sqlite", "postgresql", ...
  std::string url;      // what dblock::Client::open gets (zookeeper: the root includes the table)
  dblock::ClientOptions options;  // table set, auto_migrate on
  bool is_sql() const { return backend == "sqlite" || backend == "postgresql" || backend == "mysql"; }
};

// Bulk rows (keys, nodes) named <prefix><i> for i in [from, to], none of them a lock the
// scenario measures. Not thread-safe; one per target.
class Filler {
 public:
  virtual ~Filler() = default;
  // Adds leases i = from..to, valid for valid_for_ms more (negative: expired that long ago).
  // Returns how many the server reports added.
  virtual std::size_t add(std::size_t from, std::size_t to, std::int64_t valid_for_ms) = 0;
  // Removes everything the scenario's table holds, a killed run's leftovers too: the SQL
  // backends drop the lock table and its companions (so open no Client on it meanwhile),
  // Redis deletes every key of the namespace, ZooKeeper the root and all under it.
  virtual void clear() = 0;
  virtual std::string method() const = 0;  // how add() fills, for the notes
};

// The selected backends that can run here, with `table` as the lock table (SQL), key
// namespace (redis, redlock) or last root component (zookeeper). SQLite files go into
// `sqlite_dir`. `only_sql`: the SQL backends alone.
std::vector<FillTarget> fill_targets(const Options& opt, const std::string& table, const std::string& sqlite_dir,
                                     bool only_sql);

// Throws std::runtime_error when the backend is not built in.
std::unique_ptr<Filler> make_filler(const FillTarget& target, const std::string& prefix);

// A directory for the scenarios' SQLite files: under --dir (kept) or a fresh mkdtemp dir,
// removed at the end.
class ScratchDir {
 public:
  ScratchDir(const std::string& wanted, const std::string& leaf);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool remove_ = false;
};

// "1", "10k", "1M": a row count for headings and labels.
std::string short_count(std::size_t n);

}  // namespace dblock_bench
