#!/usr/bin/env node
// Node.js peer lock clients for dlockd's `make bench`.
//
//   node bench.js redlock|semaphore --socket REDIS_SOCK [--loops 50] [--seconds 8] [--warmup 1]
//
// One process, one ioredis connection over the Unix socket, --loops async
// loops, each acquiring and releasing a lock name of its own (no contention):
//   redlock:   lock = await redlock.acquire([name], 30000); await lock.release()
//   semaphore: m = new Mutex(redis, name, {lockTimeout: 30000});
//              await m.acquire(); await m.release()
// After the warm-up, pairs are counted for --seconds: pairs_per_sec=<n>;
// all_pairs=<n> counts the warm-up's too.
//
// run.sh copies this directory to build/bench/node and runs `npm install`
// there; node_modules never lands in the source tree.
// SPDX-License-Identifier: MIT
'use strict';

function parseArgs(argv) {
  const a = { mode: argv[0], socket: null, loops: 50, seconds: 8, warmup: 1 };
  for (let i = 1; i < argv.length; i += 2) {
    const k = argv[i];
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`${k} needs a value`);
    if (k === '--socket') a.socket = v;
    else if (k === '--loops') a.loops = Number(v);
    else if (k === '--seconds') a.seconds = Number(v);
    else if (k === '--warmup') a.warmup = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  if (a.mode !== 'redlock' && a.mode !== 'semaphore') throw new Error('mode: redlock or semaphore');
  if (!a.socket) throw new Error('--socket REDIS_SOCK is required');
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
    const redlock = new Redlock([redis]);
    pair = async (name) => {
      const lock = await redlock.acquire([name], 30000);
      await lock.release();
    };
  } else {
    const { Mutex } = require('redis-semaphore');
    pair = async (name) => {
      const m = new Mutex(redis, name, { lockTimeout: 30000 });
      await m.acquire();
      await m.release();
    };
  }

  let counting = false;
  let stop = false;
  let pairs = 0;
  let all = 0; // warm-up included: what Redis's CPU time is divided by
  const loops = [];
  for (let i = 0; i < a.loops; i++) {
    const name = `bench:${a.mode}:${i}`;
    loops.push((async () => {
      while (!stop) {
        await pair(name);
        all++;
        if (counting) pairs++;
      }
    })());
  }
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  await sleep(a.warmup * 1000);
  counting = true;
  const t0 = process.hrtime.bigint();
  await sleep(a.seconds * 1000);
  const n = pairs;
  const t1 = process.hrtime.bigint();
  stop = true;
  await Promise.all(loops);
  await redis.quit();
  const secs = Number(t1 - t0) / 1e9;
  console.log(`pairs_per_sec=${Math.round(n / secs)} pairs=${n} loops=${a.loops} seconds=${secs.toFixed(3)} all_pairs=${all}`);
}

main().catch((e) => {
  console.error(`bench.js: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
