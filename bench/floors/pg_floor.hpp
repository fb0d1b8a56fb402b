// The PostgreSQL hand-off floor (floors/floor.hpp): dblock's own insert grant and release
// statements on raw libpqxx, woken by LISTEN/NOTIFY. (A grant that draws its fence in VALUES,
// without the name's turn lock, is not a floor but a bug: two racing grants can be answered
// out of fence order.)
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/floors/floor.hpp"

namespace dblock_bench {

// dblock's own statements, rendered for the run's table, and the channel its releases notify.
struct FloorStatements {
  std::string grant;    // insert_acquire: ($1 name, $2 owner, $3 ttl ms, $4 ticket, $5 row wait) -> fence, ...
  std::string release;  // insert_release: ($1 name, $2 owner, $3 fence), notifies `channel`
  std::string channel;
};

// `postgresql/bare-notify-handoff`: each thread on a connection of its own, the statements
// prepared (the grant draws its fence under the name's turn lock and commits with its WAL
// flush; the release deletes and notifies in one statement that does not wait for its
// flush); one LISTEN connection wakes the longest waiting thread per notification, as
// dblock's listener wakes one watch per name and process. Returns the timed samples in
// microseconds.
std::vector<double> run_pg_floor_handoff(const std::string& url, const FloorStatements& sql,
                                         std::size_t warmup, std::size_t n);

// A session strategy's floor (SessionFloorStatements): each thread on a connection of its
// own (and one more for `draw`), the statements prepared. Returns the timed samples in
// microseconds.
std::vector<double> run_pg_session_floor_handoff(const std::string& url, const SessionFloorStatements& sql,
                                                 std::size_t warmup, std::size_t n);

}  // namespace dblock_bench
