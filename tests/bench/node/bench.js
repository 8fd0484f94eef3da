#!/usr/bin/env node
// Node.js peer lock clients for dlockd's `make bench`.
//
//   node bench.js redlock|semaphore --socket REDIS_SOCK [--loops 50] [--seconds 8] [--warmup 1]
//                 [--names K] [--start-at EPOCH_MS] [--samples FILE]
//
// One process, one ioredis connection over the Unix socket, --loops async
// loops, each acquiring and releasing a lock name of its own (no contention):
//   redlock:   lock = await redlock.acquire([name], 30000); await lock.release()
//   semaphore: m = new Mutex(redis, name, {lockTimeout: 30000});
//              await m.acquire(); await m.release()
// After the warm-up, pairs are counted for --seconds: pairs_per_sec=<n>;
// all_pairs=<n> counts the warm-up's too.
//
// The fleet of `make bench` runs one such process per simulated host:
//   --names K      each pair on a name drawn at random among fleet:0 ..
//                  fleet:<K-1>, shared by every process; a taken lock is
//                  retried as the library does (redlock every 200 ms +
//                  jitter, without a retry limit; redis-semaphore every
//                  10 ms, for up to 60 s)
//   --start-at MS  start the loops at this wall-clock time (Date.now()),
//                  so that the hosts' processes start together
//   --samples FILE write the counted pairs' latencies, in us, one a line
// The loops stop at the end of the window; a loop still waiting for a lock
// gets 20 s to finish, then the process reports what it counted.
//
// run.sh copies this directory to build/bench/node and runs `npm install`
// there; node_modules never lands in the source tree.
// SPDX-License-Identifier: MIT
'use strict';

function parseArgs(argv) {
  const a = {
    mode: argv[0], socket: null, loops: 50, seconds: 8, warmup: 1, names: 0, startAt: 0,
    samples: null,
  };
  for (let i = 1; i < argv.length; i += 2) {
    const k = argv[i];
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`${k} needs a value`);
    if (k === '--socket') a.socket = v;
    else if (k === '--loops') a.loops = Number(v);
    else if (k === '--seconds') a.seconds = Number(v);
    else if (k === '--warmup') a.warmup = Number(v);
    else if (k === '--names') a.names = Number(v);
    else if (k === '--start-at') a.startAt = Number(v);
    else if (k === '--samples') a.samples = v;
    else throw new Error(`unknown option ${k}`);
  }
  if (a.mode !== 'redlock' && a.mode !== 'semaphore') throw new Error('mode: redlock or semaphore');
  if (!a.socket) throw new Error('--socket REDIS_SOCK is required');
  for (const k of ['loops', 'seconds', 'warmup', 'names', 'startAt']) {
    if (!Number.isFinite(a[k]) || a[k] < 0) throw new Error(`${k}: a non-negative number`);
  }
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const Redis = require('ioredis');
  const redis = new Redis({ path: a.socket, maxRetriesPerRequest: 1, lazyConnect: true });
  await redis.connect();

  let pair;
  if (a.mode === 'redlock') {
    const Redlock = require('redlock').default;
    // Shared names wait: retry as redlock does, but without its limit of 10.
    const redlock = new Redlock([redis], a.names > 0 ? { retryCount: -1 } : {});
    pair = async (name) => {
      const lock = await redlock.acquire([name], 30000);
      await lock.release();
    };
  } else {
    const { Mutex } = require('redis-semaphore');
    pair = async (name) => {
      const opts = { lockTimeout: 30000 };
      if (a.names > 0) opts.acquireTimeout = 60000; // not its default 10 s
      const m = new Mutex(redis, name, opts);
      await m.acquire();
      await m.release();
    };
  }

  let counting = false;
  let stop = false;
  let pairs = 0;
  let all = 0; // warm-up included: what Redis's CPU time is divided by
  const lat = [];
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  if (a.startAt > 0) await sleep(Math.max(0, a.startAt - Date.now()));
  const loops = [];
  for (let i = 0; i < a.loops; i++) {
    const own = `bench:${a.mode}:${i}`;
    const pick = a.names > 0 ? () => `fleet:${Math.floor(Math.random() * a.names)}` : () => own;
    loops.push((async () => {
      while (!stop) {
        const t = process.hrtime.bigint();
        await pair(pick());
        all++;
        if (counting) {
          pairs++;
          if (a.samples) lat.push(Number(process.hrtime.bigint() - t) / 1000);
        }
      }
    })());
  }
  await sleep(a.warmup * 1000);
  counting = true;
  const t0 = process.hrtime.bigint();
  await sleep(a.seconds * 1000);
  const n = pairs;
  const t1 = process.hrtime.bigint();
  stop = true;
  counting = false;
  let left = a.loops;
  for (const l of loops) l.then(() => { left--; });
  // The grace timer must not keep the process alive once the loops end.
  await Promise.race([Promise.all(loops), new Promise((r) => setTimeout(r, 20000).unref())]);
  if (a.samples) {
    require('fs').writeFileSync(a.samples, lat.map((x) => Math.round(x)).join('\n') + '\n');
  }
  const secs = Number(t1 - t0) / 1e9;
  console.log(`pairs_per_sec=${Math.round(n / secs)} pairs=${n} loops=${a.loops} seconds=${secs.toFixed(3)} all_pairs=${all} stuck_loops=${left}`);
  if (left > 0) process.exit(0); // loops still waiting for a lock: do not wait for them
  await redis.quit();
}

main().catch((e) => {
  console.error(`bench.js: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
