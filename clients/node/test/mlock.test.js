// Tests of multi-name locks (mlock, tryMlock, MultiLockHandle) against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequestError, LockLostError, MNAMES_MAX, NotHeldError } from '../index.js';
import { guard, aborted, until, waiters, shared, fresh } from './harness.js';

const fx = shared();
const client = () => fx.client();
const isAbort = (e) => e instanceof DOMException && e.name === 'AbortError';

/** Resolves once dlockd has a request waiting (a waiting set counts once per name). */
async function someWaiting(watch) {
  await until(async () => Number((await watch.info()).waiters) > 0, 'a waiter');
}

test('mlock grants the whole set: fences in the order given, each name MINE, unlock frees all', async () => {
  const c = await client();
  const names = [fresh('m3'), fresh('m1'), fresh('m2')];
  const h = await guard(c.mlock(names));
  assert.deepEqual(h.names, names);
  assert.equal(h.fences.length, 3);
  for (const [i, name] of names.entries()) {
    assert.equal(typeof h.fences[i], 'bigint');
    const st = await c.status(name);
    assert.deepEqual({ state: st.state, holds: st.holds, fence: st.fence }, { state: 'MINE', holds: 1, fence: h.fences[i] });
    assert.equal(h.fenceOf(name), h.fences[i]);
  }
  assert.deepEqual(await h.unlock(), [0, 0, 0]);
  assert.equal(h.done, true);
  await assert.rejects(h.unlock(), NotHeldError);
  for (const name of names) assert.equal((await c.status(name)).state, 'FREE');
  const again = await c.mlock(names);
  for (const i of [0, 1, 2]) assert.ok(again.fences[i] > h.fences[i]);
  await again.unlock();
});

test('all or nothing: a waiting mlock holds none of the set; freeing the last name grants all', async () => {
  const [holder, c, watch] = [await client(), await client(), await client()];
  const [x, y, z] = [fresh('ax'), fresh('ay'), fresh('az')];
  const hy = await holder.lock(y);
  let granted = false;
  const p = guard(c.mlock([x, y, z])).then((h) => { granted = true; return h; });
  await someWaiting(watch);
  for (const name of [x, z]) assert.equal((await watch.status(name)).state, 'FREE');
  assert.equal(granted, false);
  await hy.unlock();
  const h = await p;
  assert.ok(h.fences[1] > hy.fence);
  for (const name of [x, y, z]) assert.equal((await watch.status(name)).state, 'TAKEN');
  await h.unlock();
});

test('two clients, and two tasks of one client, locking {a,b} and {b,a}: no deadlock, no overlap', async () => {
  const [c1, c2, shared] = [await client(), await client(), await client()];
  const [a, b] = [fresh('oa'), fresh('ob')];
  let holding = 0;
  let overlaps = 0;
  const last = new Map();
  const loop = async (c, names, rounds) => {
    for (let r = 0; r < rounds; r++) {
      const h = await c.mlock(names);
      if (holding++ > 0) overlaps++;
      for (const [i, name] of names.entries()) {
        assert.ok(h.fences[i] > (last.get(name) ?? 0n), `fence of ${name} did not rise`);
        last.set(name, h.fences[i]);
      }
      await new Promise((res) => setImmediate(res));
      holding--;
      await h.unlock();
    }
  };
  await guard(Promise.all([
    loop(c1, [a, b], 40), loop(c2, [b, a], 40), loop(shared, [a, b], 40), loop(shared, [b, a], 40),
  ]), 60000, 'the opposite-order loops');
  assert.equal(overlaps, 0);
});

test('abort of a waiting mlock (in dlockd, and queued locally): AbortError, nothing of the set held', async () => {
  const [holder, c, watch] = [await client(), await client(), await client()];
  const [x, y] = [fresh('cx'), fresh('cy')];
  const hy = await holder.lock(y);
  const ac = new AbortController();
  const p = assert.rejects(guard(c.mlock([x, y], { signal: ac.signal })), isAbort);
  await someWaiting(watch);
  ac.abort();
  await p;
  await waiters(fx.srv.sock, 0);
  assert.equal((await watch.status(x)).state, 'FREE');
  // Waiting locally behind this client's own hold of x: dropped, x keeps its holder.
  const hx = await c.lock(x);
  const ac2 = new AbortController();
  const q = assert.rejects(guard(c.mlock([x, fresh('cz')], { signal: ac2.signal })), isAbort);
  ac2.abort();
  await q;
  assert.equal((await watch.status(x)).state, 'TAKEN');
  await hx.unlock();
  await hy.unlock();
  const h = await c.tryMlock([x, y]);
  assert.ok(h);
  await h.unlock();
  for (const name of [x, y]) assert.equal((await watch.status(name)).state, 'FREE');
});

test('tryMlock resolves null on TIMEOUT with nothing held; using([names]) releases the set', async () => {
  const [holder, c] = [await client(), await client()];
  const [x, y] = [fresh('tx'), fresh('ty')];
  const hy = await holder.lock(y);
  assert.equal(await c.tryMlock([x, y]), null);
  const t0 = Date.now();
  assert.equal(await c.tryMlock([y, x], { wait: 100 }), null);
  assert.ok(Date.now() - t0 >= 90);
  assert.equal((await c.status(x)).state, 'FREE');
  await hy.unlock();
  const out = await c.using([x, y], async (signal, h) => {
    assert.equal(signal.aborted, false);
    assert.equal((await c.status(y)).fence, h.fences[1]);
    return 'done';
  });
  assert.equal(out, 'done');
  for (const name of [x, y]) assert.equal((await c.status(name)).state, 'FREE');
});

test('a name held through a handle passed in held counts as a reentry', async () => {
  const c = await client();
  const [x, y] = [fresh('rx'), fresh('ry')];
  const hx = await c.lock(x);
  const h = await guard(c.mlock([x, y], { held: [hx] }));
  assert.equal(h.fences[0], hx.fence);
  assert.equal((await c.status(x)).holds, 2);
  assert.deepEqual(await h.unlock(), [1, 0]);
  assert.equal((await c.status(x)).state, 'MINE');
  assert.equal(await hx.unlock(), 0);
  // The other way round: the plain handle let go first, the set keeps x to itself.
  const hx2 = await c.lock(x);
  const h2 = await c.mlock([y, x], { held: [hx2] });
  await hx2.unlock();
  let second = false;
  const p = c.lock(x).then((hh) => { second = true; return hh; });
  await new Promise((res) => setImmediate(res));
  assert.equal(second, false);
  assert.deepEqual(await h2.unlock(), [0, 0]);
  await (await guard(p)).unlock();
  await assert.rejects(c.mlock([x], { held: [{}] }), BadRequestError);
});

test('one name forced: the signal aborts naming it, the others stay held until unlock()', async () => {
  const [c, admin] = [await client(), await client()];
  const [x, y] = [fresh('lx'), fresh('ly')];
  const h = await c.mlock([x, y], { lease: 60000 });
  assert.equal(await admin.forceUnlock(y), true);
  const reason = await guard(aborted(h.signal));
  assert.ok(reason instanceof LockLostError);
  assert.equal(reason.lockName, y);
  assert.equal(reason.reason, 'forced');
  assert.equal(h.done, false);
  assert.equal((await c.status(x)).state, 'MINE');
  await assert.rejects(h.unlock(), LockLostError);
  assert.equal(h.done, true);
  assert.equal((await c.status(x)).state, 'FREE');
});

test('bad input is refused locally, with no desync', async () => {
  const c = await client();
  const x = fresh('bx');
  const many = Array.from({ length: MNAMES_MAX + 1 }, (_, i) => `${x}-${i}`);
  for (const [names, opts, code] of [
    [[], {}, 'ARGS'], [many, {}, 'ARGS'], [[x, 'y', x], {}, 'ARGS'], ['ab', {}, 'ARGS'], [undefined, {}, 'ARGS'],
    [[x, 'n'.repeat(300)], {}, 'NAME'], [[x, 'a b'], {}, 'NAME'], [[x], { lease: 2147483648 }, 'ARGS'],
    [[x], { lease: -1 }, 'ARGS'],
  ]) {
    await assert.rejects(c.mlock(names, opts), (e) => e instanceof BadRequestError && e.code === code);
  }
  await assert.rejects(c.tryMlock([x], { wait: NaN }), BadRequestError); // (1.5 is 2 ms: rounded up)
  await c.ping();
  assert.equal((await c.status(x)).state, 'FREE');
  const h = await c.mlock(many.slice(0, MNAMES_MAX));
  assert.equal(h.fences.length, MNAMES_MAX);
  assert.deepEqual(await h.unlock(), new Array(MNAMES_MAX).fill(0));
});
