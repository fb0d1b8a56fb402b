// dblock-bench `peers` worker: the npm package advisory-lock, as its README has a user take
// it: advisoryLock(url)(name) gives a mutex whose lock() opens a connection of its own, hashes
// the name to two int4 keys, runs pg_advisory_lock(k1, k2) (the server queues the waiters: no
// polling, no wait limit) and answers an unlock function, which runs pg_advisory_unlock and
// closes that connection. So every acquire pays a connection setup. Protocol: peer_worker.js.
'use strict';

const {need, versionOf, run} = require('./peer_worker');

const advisoryLock = need('advisory-lock').default;

run(async (url, name) => {
  const mutex = advisoryLock(url)(name);
  let unlock = null;
  return {
    acquire: async () => {
      unlock = await mutex.lock();
      return true;
    },
    release: async () => {
      await unlock();
      unlock = null;
    },
  };
}, `advisory-lock ${versionOf('advisory-lock')} (pg ${versionOf('pg')})`);
