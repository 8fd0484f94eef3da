#!/usr/bin/env node
// dlockd's node client in `make bench`'s shape: one process, one client, N async lock/unlock loops.
//
//   node clients/node/bench.js --socket DLOCKD_SOCK [--loops 50] [--seconds 8] [--warmup 1]
//
// One connection (one Client), --loops async loops, each taking and dropping
// a lock name of its own (no contention): h = await client.lock(name);
// await h.unlock(). After the warm-up, pairs are counted for --seconds; the
// output mirrors tests/bench/node/bench.js: pairs_per_sec=<n> pairs=<n>
// loops=<n> seconds=<s> all_pairs=<n> (all_pairs counts the warm-up's too).
// SPDX-License-Identifier: MIT

import { connect } from './index.js';

function parseArgs(argv) {
  const a = { socket: null, loops: 50, seconds: 8, warmup: 1 };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (v === undefined) throw new Error(`${k} needs a value`);
    if (k === '--socket') a.socket = v;
    else if (k === '--loops') a.loops = Number(v);
    else if (k === '--seconds') a.seconds = Number(v);
    else if (k === '--warmup') a.warmup = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  if (!a.socket) throw new Error('--socket DLOCKD_SOCK is required');
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const client = await connect({ path: a.socket });
  let counting = false;
  let stop = false;
  let pairs = 0;
  let all = 0; // warm-up included: what the servers' CPU time is divided by
  const loops = [];
  for (let i = 0; i < a.loops; i++) {
    const name = `bench:node-dlockd:${process.pid}:${i}`;
    loops.push((async () => {
      while (!stop) {
        const h = await client.lock(name);
        await h.unlock();
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
  await client.close();
  const secs = Number(t1 - t0) / 1e9;
  console.log(`pairs_per_sec=${Math.round(n / secs)} pairs=${n} loops=${a.loops} seconds=${secs.toFixed(3)} all_pairs=${all}`);
}

main().catch((e) => {
  console.error(`bench.js: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
