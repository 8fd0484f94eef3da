// Count-down latches against real dlockd daemons sharing one redis-server.
// SPDX-License-Identifier: MIT

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, KindError } from '../index.js';
import { guard, waiters, shared, fresh } from './harness.js';

const fx = shared();
const client = () => fx.client();
const isAbort = (e) => e instanceof DOMException && e.name === 'AbortError';

test('ten awaits on two daemons go on after the third countDown, none before', async () => {
  const d2 = await fx.srv.daemon();
  const a = await client();
  const b = await connect({ path: d2.sock });
  fx.clients.push(b);
  const counter = await client();
  const name = fresh('latch');
  assert.equal(await counter.latchSet(name, 3), true);
  assert.equal(await a.latchSet(name, 5), false);
  assert.equal(await b.latchCount(name), 3);
  assert.equal(await b.tryAwait(name), 3);
  const t0 = performance.now();
  assert.equal(await a.tryAwait(name, { wait: 100 }), 3);
  assert.ok(performance.now() - t0 >= 90, 'tryAwait gave up early');

  const done = [];
  const waits = Array.from({ length: 10 }, (_, i) => (i % 2 ? b : a).await(name).then(() => done.push(i)));
  await waiters(fx.srv.sock, 5);
  await waiters(d2.sock, 5);
  assert.equal(await counter.countDown(name), 2);
  assert.equal(await counter.countDown(name), 1);
  assert.equal(await b.tryAwait(name), 1);
  assert.deepEqual(done, [], 'an await went on at count 1');
  assert.equal(await counter.countDown(name), 0);
  await guard(Promise.all(waits), 10000, 'the ten awaits');
  assert.equal(await a.latchCount(name), 0);
  assert.equal(await a.countDown(name), 0); // a latch that is gone stays so
  await guard(b.await(name)); // and is open
  assert.equal(await a.tryAwait(name, { wait: 1000 }), 0);
});

test('an aborted await leaves no waiter in dlockd; the client goes on', async () => {
  const c = await client();
  const name = fresh('latch-abort');
  assert.equal(await c.latchSet(name, 1), true);
  for (const start of [(signal) => c.await(name, { signal }), (signal) => c.tryAwait(name, { wait: 60000, signal })]) {
    const ac = new AbortController();
    const p = assert.rejects(guard(start(ac.signal)), isAbort);
    await waiters(fx.srv.sock, 1);
    ac.abort();
    await p;
    await waiters(fx.srv.sock, 0);
  }
  assert.equal(await c.countDown(name), 0);
});

test('a latch is not a lock, nor a lock a latch', async () => {
  const c = await client();
  const [latch, lock] = [fresh('latch-kind'), fresh('lock-kind')];
  assert.equal(await c.latchSet(latch, 2), true);
  await assert.rejects(c.tryLock(latch), KindError);
  const h = await c.lock(lock);
  await assert.rejects(c.latchSet(lock, 1), KindError);
  await assert.rejects(c.countDown(lock), KindError);
  await assert.rejects(c.tryAwait(lock), KindError);
  await h.unlock();
  await c.ping();
  assert.equal(await c.countDown(latch), 1);
  assert.equal(await c.countDown(latch), 0);
});
