"""dblock-bench `peers` worker: redis-py's redis.lock.Lock, as a user would take it
(redis.Redis(...).lock(name, timeout=...).acquire(blocking_timeout=...)), with its other settings at
their defaults: a waiter polls the key every 0.1 s (`sleep`). Protocol: peer_worker.py."""

import sys

from peer_worker import run, say

try:
    import redis
except ImportError as e:
    say({"unavailable": f"{e} (Debian: python3-redis)"})
    sys.exit(69)


def open_lock(url, name):
    # The lease as dblock's default ttl (30 s); neither side renews within a cycle.
    lock = redis.Redis.from_url(url).lock(name, timeout=30)
    return (lambda timeout_s: lock.acquire(blocking_timeout=timeout_s)), lock.release


sys.exit(run(open_lock, f"redis-py {redis.__version__}"))
