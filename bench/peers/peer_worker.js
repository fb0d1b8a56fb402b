// The worker side of dblock-bench's `peers` scenario for an npm lock library, the same
// protocol and arguments as peer_worker.py (read its description there):
//
//   node SCRIPT uncontended NAME CYCLES WARMUP HOLD_MS   {"samples_us": [...], "version": ...}
//   node SCRIPT contended   NAME MILLIS WARMUP HOLD_MS   {"holds": [[grant_ns, release_ns], ...],
//                                                         "timeouts": N, "elapsed_s": S, "version": ...}
//
// Stamps are process.hrtime.bigint(): libuv reads CLOCK_MONOTONIC on Linux, the clock of the
// bench's steady_clock, so the bench can put these holds on one time line with its own.
// A waiter gives up after WAIT_MS; a contended one also GRACE_MS after the round's end.
// The libraries come from the node_modules folder the build fills with `npm ci` (package.json
// and package-lock.json here); a missing one gives {"unavailable": why} instead of "ready".
'use strict';

const WAIT_MS = 60_000;  // a waiter gives up after this long, as the bench's own workers do
const GRACE_MS = 3_000;  // and a contended one this long after the round's end

function say(obj) {
  // Pipes are written synchronously on Linux: the line is out before process.exit().
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// require() that turns a missing package into the bench's "unavailable" answer and exit 69.
function need(pkg) {
  try {
    return require(pkg);
  } catch (e) {
    say({unavailable: `${pkg}: ${e.code || e.message} (the build installs it with npm ci from bench/peers)`});
    process.exit(69);
  }
}

function versionOf(pkg) {
  return require(`${pkg}/package.json`).version;
}

const now = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function startSignal() {
  return new Promise((resolve) => {
    process.stdin.on('data', () => {});
    process.stdin.on('end', resolve);
    process.stdin.resume();
  });
}

// openLock(url, name) -> {acquire: async (timeoutMs) => bool (false: gave up waiting after about
// timeoutMs; 0: one try), release: async (), close: async () (optional)}. close() runs before the
// result line: a release that answered once a majority did must still reach every server
// before the process exits, or the next round finds the lock held there.
// Exits the process with the protocol's status (0, or 70 after {"error": ...}).
async function run(openLock, version) {
  version = `${version}, Node.js ${process.versions.node}`;
  const [mode, name] = process.argv.slice(2, 4);
  const [count, warmup, holdMs] = process.argv.slice(4, 7).map(Number);
  const fail = (e) => {
    say({error: `${e && e.name ? e.name : 'Error'}: ${e && e.message ? e.message : e}`});
    process.exit(70);
  };
  let acquire, release, close;
  try {
    ({acquire, release, close} = await openLock(process.env.DBLOCK_BENCH_WORKER_URL, name));
    // As peer_worker.py's warm_up: a contended round's warm-up is one attempt.
    for (let i = 0; i < warmup; ++i) {
      if (mode === 'uncontended') {
        if (!(await acquire(WAIT_MS))) throw new Error(`a warm-up acquire of a free lock waited ${WAIT_MS / 1000} s`);
        await release();
      } else if (await acquire(0)) {
        await release();
      }
    }
  } catch (e) {
    fail(e);  // before "ready": the bench reports the first worker's complaint
  }
  process.stdout.write('ready\n');
  await startSignal();

  try {
    if (mode === 'uncontended') {
      const samples = [];
      for (let i = 0; i < count; ++i) {
        const t0 = now();
        if (!(await acquire(WAIT_MS))) throw new Error('an acquire of a free lock timed out');
        await release();
        samples.push(Math.round(Number(now() - t0) / 100) / 10);
      }
      if (close) await close();
      say({samples_us: samples, version});
    } else {
      const holds = [];
      let timeouts = 0;
      const start = now(), until = start + BigInt(count) * 1_000_000n;
      const giveUp = until + BigInt(GRACE_MS) * 1_000_000n;
      while (now() < until) {
        const left = Number(giveUp - now()) / 1e6;
        if (!(await acquire(Math.min(WAIT_MS, Math.max(0, left))))) {
          ++timeouts;
          continue;
        }
        const granted = now();
        if (holdMs > 0) await sleep(holdMs);
        const releasing = now();
        await release();
        // As a Number: exact below 2^53 ns (104 days since boot), a few ns off after, far
        // below what is measured.
        holds.push([Number(granted), Number(releasing)]);
      }
      const elapsed = Number(now() - start) / 1e9;
      if (close) await close();
      say({holds, timeouts, elapsed_s: elapsed, version});
    }
  } catch (e) {
    fail(e);
  }
  process.exit(0);  // the libraries' sockets would keep the event loop alive
}

module.exports = {need, versionOf, run};
