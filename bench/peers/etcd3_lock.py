"""dblock-bench `peers` worker: python-etcd3's etcd3.Lock, as a user would take it
(etcd3.client(host, port).lock(name, ttl=...).acquire(timeout=...)). An acquire grants a lease,
then a Txn puts /locks/NAME if it was never created; a refused waiter watches that key for its
next event (any put or delete) and tries again, so every release wakes every waiter and they
race. A release is a Txn that deletes the key if it holds the lock's value; it leaves the
lease to expire. The URL is dblock's etcd://HOST:PORT[,...]/PREFIX; the peer talks to the first
endpoint and keeps its keys under its own /locks/ prefix. Protocol: peer_worker.py.

Debian 12's python3-etcd3 0.12.0 cannot wait as packaged: Lock.acquire hands tenacity a wait
function of the old signature (attempt number, seconds since the first attempt), which
python3-tenacity 8 no longer accepts (TypeError at the first refused attempt). The worker gives
the lock module a tenacity whose retry() adapts such a function, so the library's own waiting
runs unchanged."""

import inspect
import sys
import types
from urllib.parse import urlsplit

from peer_worker import run, say

try:
    import etcd3
    import etcd3.locks
    import tenacity
except ImportError as e:
    say({"unavailable": f"{e} (Debian: python3-etcd3)"})
    sys.exit(69)


def _retry(*args, wait=None, **kwargs):
    if wait is not None and len(inspect.signature(wait).parameters) == 2:
        old_style = wait

        def wait(state):
            return old_style(state.attempt_number, state.seconds_since_start)

    return tenacity.retry(*args, wait=wait, **kwargs)


etcd3.locks.tenacity = types.SimpleNamespace(**{**vars(tenacity), "retry": _retry})


def open_lock(url, name):
    u = urlsplit(url.split(",")[0])  # etcd://a:1,b:2/p -> the first endpoint
    client = etcd3.client(host=u.hostname, port=u.port or 2379, timeout=30)
    # The lease as dblock's default ttl (30 s); neither side renews within a cycle.
    lock = client.lock(name, ttl=30)
    return (lambda timeout_s: lock.acquire(timeout=timeout_s)), lock.release


sys.exit(run(open_lock, f"python-etcd3 {etcd3.__version__}"))
