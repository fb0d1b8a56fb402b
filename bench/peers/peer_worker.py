"""The worker side of dblock-bench's `peers` scenario for a peer lock library (bench_peers.cpp).

The protocol is the one of the bench's own worker processes (bench_proc.hpp): the server URL
in $DBLOCK_BENCH_WORKER_URL; the worker connects and warms up, prints "ready", waits for EOF
on stdin (the start signal, given once every worker is ready), runs, and prints one JSON line.

  SCRIPT uncontended NAME CYCLES WARMUP HOLD_MS   {"samples_us": [...], "version": ...}
  SCRIPT contended   NAME MILLIS WARMUP HOLD_MS   {"holds": [[grant_ns, release_ns], ...],
                                                   "timeouts": N, "elapsed_s": S, "version": ...}

Stamps are time.monotonic_ns(): CLOCK_MONOTONIC, the clock of C++'s steady_clock on Linux, so
the bench can put the holds of all workers (its own and these) on one time line.
A waiter gives up after WAIT_S; a contended one also GRACE_S after the round's end (counted in
"timeouts"), so that a lock whose waiters stall cannot hold the run up for minutes.
A peer library that cannot be imported gives {"unavailable": why} instead of "ready".
"""

import json
import os
import platform
import sys
import time

WAIT_S = 60  # a waiter gives up after this long, as the bench's own workers do
GRACE_S = 3  # and a contended one this long after the round's end
WARM_UP_RETRY_S = 1  # an untimed warm-up asks again this often (warm_up_acquire)


def say(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def warm_up_acquire(acquire):
    """The contended round's workers warm up on its one name at once, so a warm-up may wait.
    A peer can miss the release it waits for (python-etcd3's watch starts after its refused
    attempt, so a release between the two never wakes it); in a round that is the peer's own
    cost, counted in "timeouts", but nothing else writes the key during a warm-up. The warm-up
    is not timed, so it asks again every WARM_UP_RETRY_S instead of sleeping until WAIT_S."""
    give_up = time.monotonic() + WAIT_S
    while not acquire(WARM_UP_RETRY_S):
        if time.monotonic() >= give_up:
            raise RuntimeError(f"a warm-up acquire waited {WAIT_S} s")


def run(open_lock, version):
    """open_lock(url, name) -> (acquire(timeout_s), release()); acquire() waits up to timeout_s
    seconds (0: one try) and returns whether it got the lock."""
    version = f"{version}, Python {platform.python_version()}"
    mode, name, count, warmup, hold_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    try:
        acquire, release = open_lock(os.environ["DBLOCK_BENCH_WORKER_URL"], name)
        for _ in range(warmup):
            warm_up_acquire(acquire)
            release()
    except Exception as e:  # before "ready": the bench reports the first worker's complaint
        say({"error": f"{type(e).__name__}: {e}"})
        return 70
    print("ready", flush=True)
    sys.stdin.read()  # EOF: every worker is ready

    hold = hold_ms / 1000
    now = time.monotonic_ns
    try:
        if mode == "uncontended":
            samples = []
            for _ in range(count):
                t0 = now()
                if not acquire(WAIT_S):
                    raise RuntimeError("an acquire of a free lock timed out")
                release()
                samples.append(round((now() - t0) / 1000, 1))
            say({"samples_us": samples, "version": version})
        else:
            holds, timeouts = [], 0
            start = now()
            until = start + count * 1_000_000
            give_up = until + GRACE_S * 1_000_000_000
            while now() < until:
                if not acquire(min(WAIT_S, max(0, (give_up - now()) / 1e9))):
                    timeouts += 1
                    continue
                granted = now()
                if hold:
                    time.sleep(hold)
                releasing = now()
                release()
                holds.append([granted, releasing])
            say({"holds": holds, "timeouts": timeouts, "elapsed_s": (now() - start) / 1e9, "version": version})
    except Exception as e:
        say({"error": f"{type(e).__name__}: {e}"})
        return 70
    return 0
