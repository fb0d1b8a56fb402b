"""dblock-bench `peers` worker: redis-py's redis.lock.Lock, as a user would take it
(redis.Redis(...).lock(name, timeout=..., blocking_timeout=...)), with its other settings at
their defaults: a waiter polls the key every 0.1 s (`sleep`). Protocol: peer_worker.py."""

import sys

from peer_worker import WAIT_S, run, say

try:
    import redis
except ImportError as e:
    say({"unavailable": f"{e} (Debian: python3-redis)"})
    sys.exit(69)


def open_lock(url, name):
    # The lease as dblock's default ttl (30 s); neither side renews within a cycle.
    lock = redis.Redis.from_url(url).lock(name, timeout=30, blocking_timeout=WAIT_S)
    return lock.acquire, lock.release


sys.exit(run(open_lock, f"redis-py {redis.__version__}"))
