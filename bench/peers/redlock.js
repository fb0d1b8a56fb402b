// dblock-bench `peers` worker: the npm package @sesamecare-oss/redlock (Redlock over ioredis),
// one ioredis client per node of dblock's redlock://HOST:PORT,HOST:PORT,... URL, as its README
// has a user take it: new Redlock(clients, settings).acquire([name], ttl), lock.release().
// Its settings are left at their defaults: a waiter polls, a refused attempt sleeping
// retryDelay +- retryJitter (200 +- 100 ms) before the next, 10 retries (about 2 s), after which
// acquire() releases what the attempts took on a minority of the nodes and throws; the worker
// then calls acquire() again, as a user who wants to wait must, until the bench's wait limit
// has passed (checked once each call throws). A larger retryCount would wait inside the library instead, but
// an attempt refused by a majority keeps the keys it set on the minority until acquire() gives
// up, and two waiters that split the nodes so block each other (and everyone) until then.
// Protocol: peer_worker.js.
'use strict';

const {need, versionOf, run} = require('./peer_worker');

const Redis = need('ioredis').default;
const {Redlock} = need('@sesamecare-oss/redlock');

// redlock://[[user]:password@]host:port,host:port,... (dblock's form) -> ioredis options per node.
function nodes(url) {
  const m = /^redlock:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?#]+)/.exec(url);
  if (!m) throw new Error(`not a redlock:// URL: ${url}`);
  const [, user, password] = m;
  return m[3].split(',').map((hostPort) => {
    const at = hostPort.lastIndexOf(':');
    return {
      host: hostPort.slice(0, at).replace(/^\[(.*)\]$/, '$1'),  // [::1] -> ::1
      port: Number(hostPort.slice(at + 1)),
      ...(user ? {username: decodeURIComponent(user)} : {}),
      ...(password ? {password: decodeURIComponent(password)} : {}),
    };
  });
}

run(async (url, name) => {
  const clients = nodes(url).map((o) => new Redis(o));
  const redlock = new Redlock(clients);
  let lock = null;
  return {
    acquire: async (timeoutMs) => {
      const until = Date.now() + timeoutMs;
      for (;;) {
        try {
          lock = await redlock.acquire([name], 30_000);  // dblock's default ttl; neither side renews
          return true;
        } catch (e) {
          if (e.name !== 'ExecutionError') throw e;  // else no quorum within the retries
          if (Date.now() >= until) return false;
        }
      }
    },
    release: async () => {
      await lock.release();
      lock = null;
    },
    // QUIT after every command sent: a release answers once 3 of 5 nodes have.
    close: () => Promise.all(clients.map((c) => c.quit())),
  };
}, `@sesamecare-oss/redlock ${versionOf('@sesamecare-oss/redlock')} (ioredis ${versionOf('ioredis')})`);
