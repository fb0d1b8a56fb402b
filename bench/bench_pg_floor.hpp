// The PostgreSQL hand-off floor (issue 26): what a lease hand-off costs written directly on
// libpqxx with dblock's own statements and nothing else of dblock's, so that dblock's
// hand-off reads "x the floor" instead of "x SELECT 1", which no durable hand-off can
// approach. (A grant that draws its fence in VALUES, without the name's turn lock, is not a
// floor but a bug: two racing grants can be answered out of fence order.)
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dblock_bench {

// dblock's own statements, rendered for the run's table, and the channel its releases notify.
struct FloorStatements {
  std::string grant;    // insert_acquire: ($1 name, $2 owner, $3 ttl ms) -> fence (0: busy), ...
  std::string release;  // insert_release: ($1 name, $2 owner, $3 fence), notifies `channel`
  std::string channel;
};

// kHandoffWorkers threads, each on a connection of its own, contend for one name with dblock's
// grant and release statements (the grant draws its fence under the name's turn lock and
// commits with its WAL flush; the release deletes and notifies in one statement that does
// not wait for its flush) and nothing else of dblock's: one LISTEN connection wakes the
// longest waiting thread per notification (as dblock's listener wakes one watch per name and
// process), which tries once more. Latency: from the holder's release call to the next
// grant's answer. Returns the timed samples in microseconds. Throws on a fence that does not
// increase.
std::vector<double> run_pg_floor_handoff(const std::string& url, const FloorStatements& sql, std::size_t warmup,
                                         std::size_t n);

}  // namespace dblock_bench
