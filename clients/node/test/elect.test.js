// Tests of leader election: elect, resign, leader, observe, against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BadRequestError, ClosedError, KindError, LockLostError } from '../index.js';
import { guard, aborted, waiters, shared, fresh } from './harness.js';

const fx = shared();
const client = () => fx.client();
const isAbort = (e) => e instanceof DOMException && e.name === 'AbortError';
const show = (l) => (l === null ? 'NONE' : `${l.fence} ${l.value}`);

/** Reads an observation in the background; `until(n)` resolves once it has n items. */
function reader(obs) {
  const items = [];
  let wake = () => {};
  let error = null;
  const done = (async () => {
    try {
      for await (const l of obs) {
        items.push(l);
        wake();
      }
    } catch (err) {
      error = err;
      wake();
    }
  })();
  const until = async (n, what) => {
    const check = () => items.length >= n || error !== null;
    await guard((async () => {
      while (!check()) await new Promise((r) => { wake = r; });
    })(), 5000, what);
    if (items.length < n) throw error;
  };
  return { items, until, done, error: () => error };
}

test('campaign, hand-over on resign, leader and resign results', async () => {
  const [a, b, watch] = [await client(), await client(), await client()];
  const name = fresh('elect');
  assert.equal(await watch.leader(name), null);
  const la = await a.elect(name, 'host-a:1');
  assert.equal(typeof la.fence, 'bigint');
  assert.deepEqual(await watch.leader(name), { fence: la.fence, value: 'host-a:1' });
  const pb = b.elect(name, 'host-b:2');
  await waiters(fx.srv.sock, 1);
  assert.equal(await la.resign(), true);
  assert.equal(la.done, true);
  assert.equal(la.signal.aborted, false);
  const lb = await guard(pb, 5000, 'hand-over');
  assert.ok(lb.fence > la.fence);
  assert.deepEqual(await watch.leader(name), { fence: lb.fence, value: 'host-b:2' });
  assert.equal(await la.resign(), false); // already resigned: nothing sent
  assert.equal(await lb.resign(), true);
  assert.equal(await watch.leader(name), null);
});

test('a leader that closes hands over to the next candidate; its signal aborts (closed)', async () => {
  const [a, b, watch] = [await client(), await client(), await client()];
  const name = fresh('closed');
  const la = await a.elect(name, 'a');
  const pb = b.elect(name, 'b');
  await waiters(fx.srv.sock, 1);
  await a.close();
  const why = await guard(aborted(la.signal), 5000, 'loss signal');
  assert.ok(why instanceof LockLostError);
  assert.equal(why.reason, 'closed');
  assert.equal(await la.resign(), false);
  const lb = await guard(pb, 5000, 'next leader');
  assert.ok(lb.fence > la.fence);
  assert.deepEqual(await watch.leader(name), { fence: lb.fence, value: 'b' });
  await lb.resign();
});

test('a leased leadership that is not renewed is lost (expired)', async () => {
  const [a, watch] = [await client(), await client()];
  const name = fresh('lease');
  const l = await a.elect(name, 'a', { lease: 200 });
  const why = await guard(aborted(l.signal), 5000, 'loss signal');
  assert.equal(why.reason, 'expired');
  assert.equal(await watch.leader(name), null);
  // the name is free for the next campaign of this client at once
  const l2 = await guard(a.elect(name, 'a'), 5000, 'campaign after loss');
  assert.ok(l2.fence > l.fence);
  await l2.resign();
});

test('observers see every leader in fence order, NONE between; two on one client get each once', async () => {
  const [a, b, obsClient] = [await client(), await client(), await client()];
  const name = fresh('observe');
  const ac = new AbortController();
  const r1 = reader(obsClient.observe(name, { signal: ac.signal }));
  const r2 = reader(obsClient.observe(name));
  await r1.until(1, 'first NONE');
  await r2.until(1, 'first NONE (second observer)');
  const la = await a.elect(name, 'a');
  await r1.until(2, 'leader a');
  await la.resign();
  await r1.until(3, 'NONE after a');
  const lb = await b.elect(name, 'b');
  await r1.until(4, 'leader b');
  await b.close();
  await r1.until(5, 'NONE after b');
  const want = ['NONE', `${la.fence} a`, 'NONE', `${lb.fence} b`, 'NONE'];
  assert.deepEqual(r1.items.map(show), want);
  await r2.until(5, 'NONE after b (second observer)');
  assert.deepEqual(r2.items.map(show), want);
  ac.abort();
  await guard(r1.done, 5000, 'observation end on abort');
  assert.equal(r1.error(), null);
  // the second one goes on after the first ended
  const la2 = await a.elect(name, 'a2');
  await r2.until(6, 'leader a2');
  assert.equal(show(r2.items[5]), `${la2.fence} a2`);
  assert.equal(r1.items.length, 5);
  await la2.resign();
  await obsClient.ping(); // no desync
});

test('breaking the loop ends the observation; observe fails with ClosedError on close', async () => {
  const [a, c] = [await client(), await client()];
  const name = fresh('break');
  const la = await a.elect(name, 'a');
  for await (const l of c.observe(name)) {
    assert.deepEqual(l, { fence: la.fence, value: 'a' });
    break;
  }
  await c.ping();
  const r = reader(c.observe(name));
  await r.until(1, 'leader a again');
  assert.equal(show(r.items[0]), `${la.fence} a`);
  await c.close();
  await guard(r.done, 5000, 'observation end on close');
  assert.ok(r.error() instanceof ClosedError);
  await la.resign();
});

test('abort of a waiting campaign: AbortError, no candidacy left, no desync', async () => {
  const [a, b, watch] = [await client(), await client(), await client()];
  const name = fresh('cancel');
  const la = await a.elect(name, 'a');
  const ac = new AbortController();
  const p = assert.rejects(guard(b.elect(name, 'b', { signal: ac.signal })), isAbort);
  await waiters(fx.srv.sock, 1);
  ac.abort();
  await p;
  await b.ping();
  assert.equal(await la.resign(), true);
  assert.equal(await watch.leader(name), null); // b did not take over
  const lb = await b.elect(name, 'b');
  assert.ok(lb.fence > la.fence);
  await lb.resign();
});

test('a second task of one client campaigns after the first leadership ends', async () => {
  const c = await client();
  const name = fresh('local');
  const l1 = await c.elect(name, 'one');
  let won = false;
  const p2 = c.elect(name, 'two').then((l) => { won = true; return l; });
  await c.ping();
  assert.equal(won, false);
  await l1.resign();
  const l2 = await guard(p2, 5000, 'second task');
  assert.ok(l2.fence > l1.fence);
  assert.deepEqual(await c.leader(name), { fence: l2.fence, value: 'two' });
  await l2.resign();
});

test('bad values and names are refused before sending; election names are their own kind', async () => {
  const c = await client();
  const name = fresh('bad');
  const before = Number((await c.info()).requests);
  for (const v of ['', 'a b', 'v'.repeat(256), 'caf\u00e9', 'nl\n', 42, undefined]) {
    await assert.rejects(c.elect(name, v), (e) => e instanceof BadRequestError && e.code === 'ARGS');
  }
  await assert.rejects(c.elect('a b', 'v'), (e) => e instanceof BadRequestError && e.code === 'NAME');
  await assert.rejects(c.leader('x'.repeat(300)), (e) => e.code === 'NAME');
  assert.throws(() => c.observe(''), (e) => e.code === 'NAME');
  await assert.rejects(c.elect(name, 'v', { lease: -1 }), (e) => e.code === 'ARGS');
  assert.equal(Number((await c.info()).requests), before + 1); // this INFO only
  const l = await c.elect(name, 'v'.repeat(255));
  assert.deepEqual(await c.leader(name), { fence: l.fence, value: 'v'.repeat(255) });
  const other = await client();
  await assert.rejects(other.lock(name), KindError);
  await l.resign();
  await c.ping();
});
