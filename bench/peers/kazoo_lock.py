"""dblock-bench `peers` worker: Kazoo's kazoo.recipe.lock.Lock (ZooKeeper's lock recipe:
an ephemeral sequential node, waiters watch their predecessor) at its defaults. The URL is
dblock's zookeeper://HOST:PORT[,...]/ROOT; the lock's node is ROOT/NAME. Protocol:
peer_worker.py."""

import sys
from urllib.parse import urlsplit

from peer_worker import run, say

try:
    import kazoo
    from kazoo.client import KazooClient
    from kazoo.exceptions import LockTimeout
except ImportError as e:
    say({"unavailable": f"{e} (Debian: python3-kazoo)"})
    sys.exit(69)


def open_lock(url, name):
    u = urlsplit(url)
    zk = KazooClient(hosts=u.netloc, timeout=30)
    zk.start(timeout=30)
    lock = zk.Lock(f"{u.path.rstrip('/')}/{name}")

    def acquire(timeout_s):  # Kazoo raises when a waiter's timeout passes; the protocol answers False
        try:
            return lock.acquire(timeout=timeout_s)
        except LockTimeout:
            return False

    return acquire, lock.release


sys.exit(run(open_lock, f"Kazoo {kazoo.__version__}"))
