// The MySQL/MariaDB hand-off floor (floors/floor.hpp): dblock's own insert grant and release
// on raw Connector/C++, and the fastest wake-up threads of one process can have. MySQL has
// no notifications: a waiter in another process can only poll (or wait in GET_LOCK, which
// costs a statement of its own on each side), so the releasing thread waking the longest
// waiting one through a condition variable, once its release committed, is the honest floor
// of a hand-off within one process. It is not a bound on polling: a poll that lands while the
// release commits waits for the row lock, which InnoDB frees before the commit's redo log
// flush, and the grant goes ahead within that flush. Two ways of aiming the wake at that
// window measured slower on the development VM: waking as the release is sent (the woken
// grant often reaches the server first, finds the name held and takes the row lock the
// release then waits for), and splitting the release around the wake (`START TRANSACTION;
// release`, wake, `COMMIT`: a round trip more before the commit).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/floors/floor.hpp"
#include "dblock/dblock.hpp"

namespace dblock_bench {

// `mysql/bare-cv-handoff`: each thread on a connection set up as dblock's (backends/mysql_conn.hpp)
// sends dblock's texts for the lock table options.table: the grant `CALL
// <table>_lease_grant(name, owner, ttl, 0)` (one round trip: the UPDATE that takes the row,
// the fence bump and their commit, with its redo log flush), the release `UPDATE <table> SET
// owner = '', ... WHERE name = .. AND owner = .. AND fence = ..` (one round trip, one
// commit); the releasing thread then wakes the longest waiting thread, which tries once
// more. Returns the timed samples in microseconds.
std::vector<double> run_mysql_floor_handoff(const std::string& url, const dblock::ClientOptions& options,
                                            std::size_t warmup, std::size_t n);

// A session strategy's floor (SessionFloorStatements, texts spliced): each thread on a
// connection set up as dblock's (and one more for `draw`). Returns the timed samples in
// microseconds.
std::vector<double> run_mysql_session_floor_handoff(const std::string& url, const dblock::ClientOptions& options,
                                                    const SessionFloorStatements& sql, std::size_t warmup,
                                                    std::size_t n);

}  // namespace dblock_bench
