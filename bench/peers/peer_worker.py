"""The worker side of dblock-bench's `peers` scenario for a peer lock library (scenarios/peers.cpp).

The protocol is the one of the bench's own worker processes (support/proc.hpp): the server URL
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


def say(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def warm_up(mode, acquire, release):
    """One untimed acquire + release: it opens the connections and loads what the library loads
    on first use. In a contended round the workers warm up on its one name at once; there the
    warm-up is one attempt, granted or refused (a refusal warms as much), so that the peer's
    fairness is measured in the round and not before it: @sesamecare-oss/redlock's defaults
    once kept a warming-up waiter refused for 60 s."""
    if mode == "uncontended":
        if not acquire(WAIT_S):
            raise RuntimeError(f"a warm-up acquire of a free lock waited {WAIT_S} s")
        release()
    elif acquire(0):
        release()


def run(open_lock, version):
    """open_lock(url, name) -> (acquire(timeout_s), release()); acquire() waits up to timeout_s
    seconds (0: one try) and returns whether it got the lock."""
    version = f"{version}, Python {platform.python_version()}"
    mode, name, count, warmup, hold_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    try:
        acquire, release = open_lock(os.environ["DBLOCK_BENCH_WORKER_URL"], name)
        for _ in range(warmup):
            warm_up(mode, acquire, release)
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
