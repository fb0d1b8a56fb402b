// The SQLite hand-off floor (floors/floor.hpp): dblock's own insert grant and release on raw
// SQLiteCpp, on the same database file and settings, and an in-process wake-up: every
// process of a SQLite file is on one host, and dblock's waiters are woken through a wake
// file (inotify), which a condition variable between threads of one process can only beat.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace dblock_bench {

// `sqlite/bare-cv-handoff`: each thread on a connection of its own to `db_path` with
// dblock's settings (journal_mode=WAL, synchronous=FULL, a busy handler that polls as
// dblock's does, from 0.1 ms doubling to 2 ms, up to `busy_timeout`), prepared statements
// of dblock's insert grant (one upsert that draws its fence through the table's trigger
// and commits with its WAL fsync) and release (one DELETE, one commit) on lock table
// `table`, which must exist; once its release returned, the releasing thread wakes the
// longest waiting thread through a condition variable, and it tries once more. Returns
// the timed samples in microseconds.
std::vector<double> run_sqlite_floor_handoff(const std::string& db_path, const std::string& table,
                                             std::chrono::milliseconds busy_timeout, std::size_t warmup,
                                             std::size_t n);

}  // namespace dblock_bench
