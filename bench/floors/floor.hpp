// The hand-off floors (issue 26): what a hand-off costs written directly on a backend's
// driver with dblock's own grant and release (same statements or scripts, same durability)
// and the fastest wake-up that backend offers, and nothing else of dblock's, so that
// dblock's hand-off reads "x the floor" instead of "x SELECT 1", which no durable hand-off
// can approach. Measured as support/run.cpp measures dblock's: kHandoffWorkers threads contend for
// one name, a thread contends again only once another one got it (no barging), latency from
// the holder's release call to the next grant's answer, every fence checked to increase.
//
// run_floor_handoff is the loop of the floors whose releases wake one waiting thread (the
// PostgreSQL, MySQL, SQLite and Redis floors) and of the session strategies' floors, whose
// waiters block in the server; ZooKeeper's waiters watch their predecessor instead
// (floors/zk_floor.hpp), and etcd's recipe is in backends/etcd.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/support/util.hpp"

namespace dblock_bench {

// One thread's connection: dblock's grant and release on the bare driver.
class FloorSession {
 public:
  virtual ~FloorSession() = default;
  virtual std::uint64_t grant() = 0;  // the fence, or 0 when the name is held
  virtual void release(std::uint64_t fence) = 0;
};

// What a listener thread (LISTEN, SUBSCRIBE) tells the waiting threads.
class FloorWakes {
 public:
  virtual ~FloorWakes() = default;
  virtual void ready() = 0;  // subscribed: the threads may start
  virtual void one() = 0;    // a release: the longest waiting thread tries once more
  virtual bool stopped() = 0;

 protected:
  FloorWakes() = default;
};

struct FloorSpec {
  std::string label;  // "mysql/bare-cv-handoff"
  // Thread i's session, opened on the calling thread before any thread starts (some
  // drivers' first connection is not thread-safe).
  std::function<std::unique_ptr<FloorSession>(int i)> open;
  // Empty: the releasing thread wakes the longest waiting one itself once its release
  // returned (an in-process condition variable: the floor of wake-ups within one process,
  // for a backend with nothing to notify through). Else it runs on a thread of its own:
  // subscribes, calls ready(), then one() per notification until stopped() (polling that
  // at least every 100 ms).
  std::function<void(FloorWakes&)> listen;
};

// A session strategy's floor: the lock is handed off inside the server's lock manager (no
// wake-up of dblock's at all), each waiting thread blocked in `lock` until the holder's
// `unlock`; with `transaction`, `lock` runs in a transaction that `unlock` rolls back (the
// row lock of for-update). The fence comes from `lock` itself (advisory: dblock's lock and
// draw in one statement) or, where `draw` is given, from `draw` on a second connection once
// the lock is held (for-update's, as dblock draws it). PostgreSQL's `lock` and `unlock` take
// `key` as $1; MySQL's come with their literals spliced in.
struct SessionFloorStatements {
  std::string label;  // "postgresql/bare-advisory-handoff"
  std::string lock, unlock, draw;
  std::string key;
  bool transaction = false;
};

// kHandoffWorkers threads, each with its own session, contend for one name: a busy grant
// queues the thread for a wake (queued before each attempt, so that a release during it is
// not missed), with a 100 ms safety net against a lost notification; each wake reaches the
// longest waiting thread alone (as dblock's WakeTable wakes one watch per name and
// process). Returns the timed samples in microseconds; throws what a thread threw
// (CorrectnessViolation when a fence did not increase).
std::vector<double> run_floor_handoff(const FloorSpec& spec, std::size_t warmup, std::size_t n);

// Puts the floor's row (scenario `handoff`) into `rows` before the first handoff row,
// compared with the uncontended row of strategy `baseline` (select1, sqlite's bare); and
// makes it the first baseline, the one the Markdown shows, of the handoff rows of
// `strategies`.
void place_floor_row(std::vector<Row>& rows, Row floor, const std::string& baseline,
                     const std::vector<std::string>& strategies);

}  // namespace dblock_bench
