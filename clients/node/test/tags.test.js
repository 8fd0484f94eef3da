// Tests of many tasks at once on one client (tagged requests) against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClosedError } from '../index.js';
import { guard, aborted, waiters, shared, fresh } from './harness.js';

const fx = shared();
const client = () => fx.client();
const isAbort = (e) => e instanceof DOMException && e.name === 'AbortError';

/** Fisher-Yates over a copy of xs. */
function shuffled(xs) {
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** n names, each held by `holder`; resolves [names, handles]. */
async function heldElsewhere(holder, tag, n) {
  const names = Array.from({ length: n }, (_, i) => `${fresh(tag)}-${i}`);
  return [names, await Promise.all(names.map((name) => holder.lock(name)))];
}

test('20 tasks wait at once on one client; each is granted right after its own release', async () => {
  const [holder, c] = [await client(), await client()];
  const n = 20;
  const [names, held] = await heldElsewhere(holder, 'many', n);
  const granted = [];
  const grants = names.map((name, i) => c.lock(name).then((h) => { granted.push(i); return h; }));
  await waiters(fx.srv.sock, n); // every one of them is waiting in dlockd, not in the client
  const handles = [];
  for (const i of shuffled(names.keys())) {
    await held[i].unlock();
    handles.push(await guard(grants[i], 5000, `the grant of ${names[i]} after its release`));
    assert.deepEqual(granted, handles.map((h) => names.indexOf(h.name)), 'granted in the order of release');
  }
  await Promise.all(handles.map((h) => h.unlock()));
  for (const name of names) assert.equal((await holder.status(name)).state, 'FREE');
});

test('cancelling one of 20 waits: it holds nothing, the other 19 are undisturbed', async () => {
  const [holder, c, watch] = [await client(), await client(), await client()];
  const n = 20;
  const victim = 7;
  const [names, held] = await heldElsewhere(holder, 'one-of', n);
  const before = Number((await watch.info()).cancelled);
  const acs = names.map(() => new AbortController());
  const outcomes = names.map((name, i) => c.lock(name, { signal: acs[i].signal }).then(
    (h) => ({ h }),
    (err) => ({ err }),
  ));
  await waiters(fx.srv.sock, n);
  acs[victim].abort();
  const out = await guard(outcomes[victim], 5000, 'the cancelled wait');
  assert.ok(isAbort(out.err), String(out.err));
  await waiters(fx.srv.sock, n - 1);
  assert.equal(Number((await watch.info()).cancelled), before + 1);
  for (const h of held) await h.unlock();
  const rest = await guard(Promise.all(outcomes.filter((_, i) => i !== victim)), 5000, 'the other grants');
  for (const o of rest) assert.ok(o.h, String(o.err));
  assert.equal((await watch.status(names[victim])).state, 'FREE');
  await Promise.all(rest.map((o) => o.h.unlock()));
  await c.ping();
});

test('an unlock, a lock of a free name and a status are not held back by a wait', async () => {
  const [holder, c] = [await client(), await client()];
  const [x, y, z] = [fresh('hol-x'), fresh('hol-y'), fresh('hol-z')];
  const hy = await holder.lock(y);
  const hx = await c.lock(x);
  const wait = c.lock(y);
  await waiters(fx.srv.sock, 1);
  assert.equal(await guard(hx.unlock(), 2000, 'unlock of x behind the wait for y'), 0);
  assert.equal((await holder.status(x)).state, 'FREE');
  const hz = await guard(c.lock(z), 2000, 'lock of a free name behind the wait');
  assert.equal((await guard(c.status(y), 2000, 'status behind the wait')).state, 'TAKEN');
  await hz.unlock();
  await hy.unlock();
  const h = await guard(wait);
  await h.unlock();
});

test('100 tasks, a name each, on one client, with a wait in the middle of them', async () => {
  const [holder, c] = [await client(), await client()];
  const prefix = fresh('hundred');
  const blocked = `${prefix}-blocked`;
  const hb = await holder.lock(blocked);
  const wait = c.lock(blocked);
  await waiters(fx.srv.sock, 1);
  const names = await guard(Promise.all(Array.from({ length: 100 }, (_, i) => c.using(`${prefix}-${i}`,
    async (signal, h) => h.name))), 10000, '100 using() calls');
  assert.equal(new Set(names).size, 100);
  await hb.unlock();
  await (await guard(wait)).unlock();
});

test('close() with many waits in flight: every one rejects at once, every handle is lost', async () => {
  const [holder, c] = [await client(), await client()];
  const [names, held] = await heldElsewhere(holder, 'close-many', 10);
  const mine = await c.lock(fresh('close-mine'));
  const waits = names.map((name) => assert.rejects(guard(c.lock(name)), ClosedError));
  await waiters(fx.srv.sock, 10);
  await c.close();
  await Promise.all(waits);
  assert.equal((await guard(aborted(mine.signal))).reason, 'closed');
  await waiters(fx.srv.sock, 0);
  await Promise.all(held.map((h) => h.unlock()));
});
