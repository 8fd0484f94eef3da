// Tests of client.list() against a real dlockd and redis-server, and its framing against a scripted socket.
// SPDX-License-Identifier: MIT

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, BadRequestError } from '../index.js';
import { guard, shared, fresh } from './harness.js';

const fx = shared();
const client = () => fx.client();
const isArgs = (e) => e instanceof BadRequestError && e.code === 'ARGS';

test('list shows a held lock with its fence and holder pid, and a semaphore', async () => {
  const [c, other] = [await client(), await client()];
  const name = fresh('list');
  const h = await c.lock(name);
  const got = await guard(other.list({ pattern: name }));
  assert.equal(got.more, false);
  assert.equal(got.entries.length, 1);
  const e = got.entries[0];
  assert.deepEqual([e.name, e.kind, e.fence, e.value], [name, 'lock', h.fence, null]);
  assert.equal(e.holders.total, 1);
  assert.equal(e.waiters.total, 0);
  const p = e.holders.list[0];
  assert.equal(p.pid, process.pid);
  assert.equal(p.uid, process.getuid());
  assert.equal(p.count, 1);
  assert.ok(p.host && p.dlockdPid > 0 && p.age >= 0, JSON.stringify(p));

  const sem = `${name}-sem`;
  await c.semInit(sem, 3);
  const permits = await c.acquire(sem, 2);
  const s = (await c.list({ pattern: sem })).entries[0];
  assert.deepEqual([s.kind, s.fence, s.value, s.holders.list[0].count], ['sem', null, '1', 2]);
  await permits.release(2);
  await h.unlock();
});

test('list by pattern, limit and more', async () => {
  const c = await client();
  const prefix = fresh('pat');
  for (let i = 0; i < 3; i++) await c.lock(`${prefix}-${i}`);
  await c.lock(`${prefix}x`); // not matched by prefix-*
  const all = await c.list({ pattern: `${prefix}-*` });
  assert.equal(all.more, false);
  assert.deepEqual(all.entries.map((e) => e.name), [0, 1, 2].map((i) => `${prefix}-${i}`));
  const two = await c.list({ pattern: `${prefix}-*`, limit: 2 });
  assert.deepEqual([two.entries.length, two.more], [2, true]);
  const three = await c.list({ pattern: `${prefix}-*`, limit: 3 });
  assert.deepEqual([three.entries.length, three.more], [3, false]);
  assert.deepEqual(await c.list({ pattern: `${prefix}-nothing*` }), { entries: [], more: false });
  // Concurrent with other requests on the connection: replies stay in step.
  const [l, st] = await Promise.all([c.list({ pattern: `${prefix}-*` }), c.status(`${prefix}-0`)]);
  assert.equal(l.entries.length, 3);
  assert.equal(st.state, 'MINE');
});

test('a bad limit or pattern rejects with ARGS; dlockd says the same', async () => {
  const c = await client();
  for (const limit of [0, 1001, 1.5, '5']) {
    await assert.rejects(c.list({ pattern: '*', limit }), isArgs, `limit ${limit}`);
  }
  await assert.rejects(c.list({ pattern: 'a'.repeat(300) }), isArgs);
  await assert.rejects(c.list({ pattern: 'a b' }), isArgs);
  const reply = await c._conn.request('LIST * 1001');
  assert.deepEqual([reply.type, reply.code], ['ERR', 'ARGS']);
  await c.ping();
});

test('framing: a tagged header after another reply and an event, entries split across writes, a reply behind', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'dlock-node-list-'));
  const path = join(dir, 'fake.sock');
  const server = net.createServer((sock) => {
    let buf = '';
    sock.on('data', (d) => {
      buf += d;
      const list = /^(#\S+) LIST j\* 5$/m.exec(buf);
      const pings = [...buf.matchAll(/^(#\S+) PING$/mg)];
      if (list && pings.length === 2) {
        sock.write(`${pings[0][1]} OK PONG\n!LOST other expired\n${list[1]} OK LIST 2 1\n`
          + '= j1 lock -1 17 1,vm/10/20/1000/1/5 2,vm/10/21/1000/0/-,-/-/-/-/0/- -\n= j2 el');
        setImmediate(() => sock.write(`ect 900 3 1,-/-/-/-/1/- 0 -\n${pings[1][1]} OK PONG\n`));
      }
    });
  });
  await new Promise((resolve) => server.listen(path, resolve));
  try {
    const c = await connect({ path });
    const [, got] = await guard(Promise.all([c.ping(), c.list({ pattern: 'j*', limit: 5 }), c.ping()]));
    assert.equal(got.more, true);
    assert.deepEqual(got.entries.map((e) => [e.name, e.kind, e.ttl, e.fence]), [['j1', 'lock', -1, 17n], ['j2', 'elect', 900, 3n]]);
    assert.deepEqual(got.entries[0].waiters.list[1], { host: null, dlockdPid: null, pid: null, uid: null, count: 0, age: null });
    assert.equal(got.entries[0].holders.list[0].pid, 20);
    await c.close();
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
