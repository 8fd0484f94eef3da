// Tests of cancelling waits with an AbortSignal: CANCEL on the wire, local drops, raced grants.
// SPDX-License-Identifier: MIT

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { guard, waiters, shared, fresh } from './harness.js';

const fx = shared();
const client = () => fx.client();
const isAbort = (e) => e instanceof DOMException && e.name === 'AbortError';

test('abort during a wait in dlockd: AbortError, nothing held after, no desync', async () => {
  const [holder, c, watch] = [await client(), await client(), await client()];
  const name = fresh('cancel');
  const held = await holder.lock(name);
  const before = Number((await watch.info()).cancelled);
  const ac = new AbortController();
  const p = assert.rejects(guard(c.lock(name, { signal: ac.signal })), isAbort);
  await waiters(fx.srv.sock, 1);
  ac.abort();
  await p;
  assert.equal(Number((await watch.info()).cancelled), before + 1);
  assert.equal((await c.status(name)).state, 'TAKEN');
  await held.unlock();
  const h = await c.tryLock(name);
  assert.ok(h);
  await h.unlock();
  await c.ping();
});

test('abort of tryLock, rlock, fairLock and acquire waits', async () => {
  const [holder, c] = [await client(), await client()];
  const [a, rw, fair, sem] = [fresh('ct'), fresh('crw'), fresh('cfair'), fresh('csem')];
  const held = [await holder.lock(a), await holder.wlock(rw), await holder.fairLock(fair)];
  await holder.semInit(sem, 1);
  held.push(await holder.acquire(sem, 1));
  const waits = [
    (signal) => c.tryLock(a, { wait: 60000, signal }),
    (signal) => c.rlock(rw, { signal }),
    (signal) => c.fairLock(fair, { signal, lease: 5000 }),
    (signal) => c.acquire(sem, 1, { signal }),
  ];
  for (const start of waits) {
    const ac = new AbortController();
    const p = assert.rejects(guard(start(ac.signal)), isAbort);
    await waiters(fx.srv.sock, 1);
    ac.abort();
    await p;
  }
  assert.equal((await c.status(sem)).holds, 0);
  await Promise.all(held.map((h) => (h.release ? h.release() : h.unlock())));
  for (const n of [a, rw, fair]) assert.equal((await c.status(n)).state, 'FREE');
});

test('abort of a wait at the local gate, and of a lock aborted as soon as it is asked', async () => {
  const [holder, c] = [await client(), await client()];
  const [x, y, z] = [fresh('cx'), fresh('cy'), fresh('cz')];
  const hx = await holder.lock(x);
  const mine = await c.lock(y);
  const first = new AbortController();
  const pFirst = assert.rejects(guard(c.lock(x, { signal: first.signal })), isAbort);
  await waiters(fx.srv.sock, 1);
  // Sent at once (nothing holds it back), withdrawn by CANCEL #tag, or released if granted first.
  const early = new AbortController();
  const pEarly = assert.rejects(guard(c.lock(z, { signal: early.signal })), isAbort);
  const gated = new AbortController();
  const pGated = assert.rejects(guard(c.lock(y, { signal: gated.signal })), isAbort);
  early.abort();
  gated.abort();
  await pEarly;
  await pGated;
  assert.equal((await holder.status(z)).state, 'FREE');
  first.abort();
  await pFirst;
  await mine.unlock();
  const again = await c.tryLock(y);
  assert.ok(again);
  await again.unlock();
  await hx.unlock();
  const pre = new AbortController();
  pre.abort();
  await assert.rejects(c.lock(x, { signal: pre.signal }), isAbort);
  assert.equal((await c.status(x)).state, 'FREE');
});

test('a grant racing the abort is released: nothing stays held', async () => {
  const [holder, c] = [await client(), await client()];
  const name = fresh('race');
  let granted = 0;
  let cancelled = 0;
  for (let i = 0; i < 20; i++) {
    const held = await holder.lock(name);
    const ac = new AbortController();
    // settled either way before it is awaited: the cancel may be answered before the unlock
    const p = c.lock(name, { signal: ac.signal }).then((h) => ({ h }), (e) => ({ e }));
    await waiters(fx.srv.sock, 1);
    await Promise.all([held.unlock(), Promise.resolve().then(() => ac.abort())]);
    const { h, e } = await guard(p);
    if (h) {
      granted++; // the grant came before the abort was seen: a normal grant
      await h.unlock();
    } else {
      assert.ok(isAbort(e), e);
      cancelled++;
    }
    assert.notEqual((await c.status(name)).state, 'MINE');
    assert.equal((await holder.status(name)).state, 'FREE');
  }
  assert.equal(granted + cancelled, 20);
});
