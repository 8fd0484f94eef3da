// Tests of the Node client against a real dlockd and redis-server: grants, loss, contention, errors.
// SPDX-License-Identifier: MIT

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  connect, DlockError, BadRequestError, ConnectError, ClosedError, KindError, NotHeldError, LockLostError,
} from '../index.js';
import { guard, aborted, waiters, shared, fresh } from './harness.js';

const fx = shared();
const client = () => fx.client();

test('lock grants a handle with a bigint fence that rises from grant to grant', async () => {
  const c = await client();
  const name = fresh('grant');
  const h1 = await c.lock(name);
  assert.equal(typeof h1.fence, 'bigint');
  assert.ok(h1.fence > 0n);
  assert.equal(h1.holds, 1);
  assert.equal(h1.signal.aborted, false);
  const st = await c.status(name);
  assert.deepEqual({ state: st.state, holds: st.holds, fence: st.fence }, { state: 'MINE', holds: 1, fence: h1.fence });
  assert.equal(await h1.unlock(), 0);
  const h2 = await c.lock(name);
  assert.ok(h2.fence > h1.fence);
  await h2.unlock();
  assert.equal((await c.status(name)).state, 'FREE');
  await c.ping();
});

test('tryLock resolves null on TIMEOUT, after its wait', async () => {
  const [a, b] = [await client(), await client()];
  const name = fresh('try');
  const h = await a.tryLock(name);
  assert.ok(h);
  assert.equal(await b.tryLock(name), null);
  const t0 = Date.now();
  assert.equal(await b.tryLock(name, { wait: 100 }), null);
  assert.ok(Date.now() - t0 >= 90);
  const st = await b.status(name);
  assert.equal(st.state, 'TAKEN');
  assert.equal(typeof st.ttl, 'number');
  await h.unlock();
  const h2 = await b.tryLock(name, { wait: 1000, lease: 5000 });
  assert.ok(h2);
  await h2.unlock();
});

test('reentry through the handle: same fence, one hold more', async () => {
  const c = await client();
  const name = fresh('reenter');
  const h = await c.lock(name);
  assert.equal(await h.relock(), h);
  assert.equal(h.holds, 2);
  assert.equal((await c.status(name)).holds, 2);
  const fence = h.fence;
  await h.relock();
  assert.equal(h.fence, fence);
  assert.equal(await h.unlock(), 2);
  assert.equal(await h.unlock(), 1);
  assert.equal(await h.unlock(), 0);
  await assert.rejects(h.unlock(), NotHeldError);
  assert.equal((await c.status(name)).state, 'FREE');
});

test('a lease running out aborts the handle signal with reason expired', async () => {
  const c = await client();
  const name = fresh('expire');
  const h = await c.lock(name, { lease: 150 });
  assert.equal(await h.renew(200), 200);
  const why = await guard(aborted(h.signal), 5000, 'loss signal');
  assert.ok(why instanceof LockLostError);
  assert.equal(why.reason, 'expired');
  assert.equal(why.lockName, name);
  assert.equal(h.lost, why);
  await assert.rejects(h.unlock(), LockLostError);
  // the name is free for the next task at once
  const h2 = await guard(c.lock(name), 5000, 'lock after loss');
  await h2.unlock();
});

test('a lease below 1 ms is 1 ms, not "no lease": the lock expires (issue 42)', async () => {
  const c = await client();
  const name = fresh('subms');
  const h = await c.lock(name, { lease: 0.5 });
  const why = await guard(aborted(h.signal), 5000, 'loss signal of a 0.5 ms lease');
  assert.equal(why.reason, 'expired');
  assert.equal((await c.status(name)).state, 'FREE');
  // a fraction above 1 ms rounds up too, as the Go and Java clients' durations do
  const h2 = await c.lock(name, { lease: 30000 });
  assert.equal(await h2.renew(1000.25), 1001);
  await h2.unlock();
  const holder = await c.lock(name);
  const other = await client();
  assert.equal(await other.tryLock(name, { wait: 0.5 }), null);
  await holder.unlock();
  for (const bad of [-0.5, NaN, Infinity, 2 ** 31 - 0.5]) {
    await assert.rejects(c.lock(name, { lease: bad }), (e) => e.code === 'ARGS', `lease ${bad}`);
  }
});

test('FORCEUNLOCK aborts the holder signal with reason forced', async () => {
  const [a, admin] = [await client(), await client()];
  const name = fresh('forced');
  const h = await a.lock(name);
  assert.equal(await admin.forceUnlock(name), true);
  const why = await guard(aborted(h.signal), 5000, 'loss signal');
  assert.equal(why.reason, 'forced');
  assert.equal(why.code, 'LOST');
});

test('100 concurrent promises on one client, 5 names: no overlap, rising fences', async () => {
  const c = await client();
  const prefix = fresh('contend');
  const holder = new Map();
  const last = new Map();
  let overlaps = 0;
  let nonrising = 0;
  let grants = 0;
  const task = async (t) => {
    for (let r = 0; r < 5; r++) {
      const name = `${prefix}-${(t + r) % 5}`;
      const h = await c.lock(name);
      grants++;
      if (holder.has(name)) overlaps++;
      holder.set(name, t);
      if (last.has(name) && h.fence <= last.get(name)) nonrising++;
      last.set(name, h.fence);
      await new Promise((res) => setImmediate(res));
      holder.delete(name);
      await h.unlock();
    }
  };
  await guard(Promise.all(Array.from({ length: 100 }, (_, t) => task(t))), 30000, 'contention');
  assert.deepEqual({ grants, overlaps, nonrising }, { grants: 500, overlaps: 0, nonrising: 0 });
});

test('using() locks, passes the loss signal, and unlocks even on throw', async () => {
  const c = await client();
  const name = fresh('using');
  const out = await c.using(name, async (signal, h) => {
    assert.equal(signal.aborted, false);
    assert.equal(h.holds, 1);
    return 42;
  });
  assert.equal(out, 42);
  assert.equal((await c.status(name)).state, 'FREE');
  await assert.rejects(c.using(name, async () => { throw new Error('boom'); }), /boom/);
  assert.equal((await c.status(name)).state, 'FREE');
  // a loss inside rejects with the LockLostError
  const admin = await client();
  await assert.rejects(c.using(name, async (signal) => {
    await admin.forceUnlock(name);
    await aborted(signal);
  }), (e) => e instanceof LockLostError && e.reason === 'forced');
});

test('a second task waits locally until the first handle is fully unlocked', async () => {
  const c = await client();
  const name = fresh('local');
  const h1 = await c.lock(name);
  await h1.relock();
  let got = false;
  const p = c.lock(name).then((h) => { got = true; return h; });
  assert.equal(await c.tryLock(name), null); // the gate is taken: no reentrant grant for another task
  await h1.unlock();
  await c.ping();
  assert.equal(got, false);
  await h1.unlock();
  const h2 = await guard(p);
  assert.ok(h2.fence > h1.fence);
  await h2.unlock();
});

test('read/write lock, semaphore and fair lock, each once', async () => {
  const [a, b] = [await client(), await client()];
  const rw = fresh('rw');
  const r1 = await a.rlock(rw);
  const r2 = await a.rlock(rw); // a second local reader shares it
  const rb = await b.tryRLock(rw);
  assert.ok(rb);
  let st = await a.status(rw);
  assert.deepEqual([st.state, st.readers, st.holds], ['READ', 2, 2]);
  assert.equal(await b.tryWLock(rw, { wait: 50 }), null);
  await Promise.all([r1.unlock(), r2.unlock(), rb.unlock()]);
  const w = await b.wlock(rw);
  assert.equal(typeof w.fence, 'bigint');
  st = await b.status(rw);
  assert.deepEqual([st.state, st.holds], ['WRITE', 1]);
  await assert.rejects(a.lock(rw), KindError);
  await w.unlock();

  const sem = fresh('sem');
  assert.equal(await a.semInit(sem, 3), true);
  assert.equal(await a.semInit(sem, 9), false);
  const p1 = await a.acquire(sem, 2);
  assert.deepEqual([p1.permits, p1.held], [2, 2]);
  const p2 = await a.acquire(sem);
  assert.equal(p2.held, 3);
  assert.equal(await b.tryAcquire(sem, 1), null);
  st = await a.status(sem);
  assert.deepEqual([st.state, st.available, st.holds], ['SEM', 0, 3]);
  assert.equal(await p1.release(1), 2);
  assert.equal(await p1.release(), 1);
  const pb = await b.tryAcquire(sem, 2, { wait: 1000 });
  assert.equal(pb.held, 2);
  await Promise.all([p2.release(), pb.release()]);

  const fair = fresh('fair');
  const f = await a.fairLock(fair);
  assert.equal(await b.tryFairLock(fair), null);
  const fb = b.fairLock(fair);
  await f.unlock();
  const g = await guard(fb);
  assert.ok(g.fence > f.fence);
  await g.unlock();
});

test('bad and 300-byte names, bad numbers: errors without desync', async () => {
  const c = await client();
  for (const bad of ['', 'a b', 'x'.repeat(300), 'caf\u00e9', 'a\nPING']) {
    await assert.rejects(c.lock(bad), (e) => e instanceof BadRequestError && e.code === 'NAME');
    await assert.rejects(c.status(bad), (e) => e.code === 'NAME');
    // the error shows the name, as every client's does (issue 42): the first 40 characters
    await assert.rejects(c.lock(bad), (e) => e.message.includes(JSON.stringify(bad.slice(0, 40))));
  }
  assert.ok(await c.tryLock('x'.repeat(255)).then((h) => h.unlock()) === 0);
  await assert.rejects(c.lock('ok', { lease: -1 }), (e) => e instanceof DlockError && e.code === 'ARGS');
  await assert.rejects(c.tryLock('ok', { wait: 2 ** 31 }), (e) => e.code === 'ARGS');
  await assert.rejects(c.acquire('ok', 10001), (e) => e.code === 'ARGS');
  await assert.rejects(c.semInit('ok', 1.5), (e) => e.code === 'ARGS');
  await c.ping();
  const name = fresh('after-bad');
  const h = await c.lock(name);
  assert.equal((await c.status(name)).fence, h.fence);
  await h.unlock();
});

test('a missing socket: ConnectError naming the path, with the hint', async () => {
  const path = join(fx.srv.dir, 'nope.sock');
  await assert.rejects(connect({ path }), (e) => {
    assert.ok(e instanceof ConnectError);
    assert.equal(e.code, 'CONNECT');
    assert.equal(e.message, `cannot connect to dlockd at ${path}: No such file or directory (is dlockd running?)`);
    return true;
  });
  const saved = process.env.DLOCK_SOCKET;
  process.env.DLOCK_SOCKET = path;
  try {
    await assert.rejects(connect(), (e) => e.path === path);
    process.env.DLOCK_SOCKET = fx.srv.sock;
    const c = await connect();
    await c.ping();
    await c.close();
  } finally {
    if (saved === undefined) delete process.env.DLOCK_SOCKET;
    else process.env.DLOCK_SOCKET = saved;
  }
});

test('close() rejects pending calls and aborts every live handle (closed)', async () => {
  const [holder, c] = [await client(), await client()];
  const name = fresh('close');
  const other = fresh('close-other');
  const held = await holder.lock(name);
  const mine = await c.lock(other);
  const waiting = assert.rejects(guard(c.lock(name)), ClosedError);
  const queued = assert.rejects(guard(c.ping()), ClosedError);
  await c.close();
  await waiting;
  await queued;
  const why = await guard(aborted(mine.signal));
  assert.equal(why.reason, 'closed');
  await assert.rejects(c.ping(), (e) => e.code === 'CLOSED');
  await held.unlock();
  assert.equal((await holder.status(other)).state, 'FREE');
});

test('dlockd killed during a wait: the wait rejects, no hang, signals aborted', async () => {
  const d = await fx.srv.daemon();
  const holder = await client();
  const c = await connect({ path: d.sock });
  const name = fresh('killed');
  const held = await holder.lock(name);
  const mine = await c.lock(fresh('killed-mine'));
  const waiting = assert.rejects(guard(c.lock(name), 5000, 'wait after kill'),
    (e) => e instanceof ClosedError && e.code === 'CLOSED');
  await waiters(d.sock, 1);
  const other = fresh('killed-other');
  const heldOther = await holder.lock(other);
  const second = assert.rejects(guard(c.lock(other), 5000, 'a second wait after kill'), ClosedError);
  await waiters(d.sock, 2);
  d.proc.kill('SIGKILL');
  await waiting;
  await second;
  const why = await guard(aborted(mine.signal));
  assert.equal(why.reason, 'closed');
  await assert.rejects(c.lock(name), ClosedError);
  await held.unlock();
  await heldOther.unlock();
});
