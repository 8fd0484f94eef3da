// Tests against a fake dlockd (a Unix socket server scripted per request line): races on the wire.
// SPDX-License-Identifier: MIT

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, LockLostError } from '../index.js';
import { guard, aborted } from './harness.js';

const dir = mkdtempSync(join(tmpdir(), 'dlock-node-fake-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** A fake dlockd at a fresh socket: `script(line)` returns what to write back (one write). */
async function fake(script) {
  const path = join(dir, `f${n++}.sock`);
  const server = net.createServer((sock) => {
    let buf = '';
    sock.setEncoding('latin1');
    sock.on('data', (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const out = script(line);
        if (out) sock.write(out);
      }
    });
    sock.on('error', () => {});
  });
  await new Promise((r) => server.listen(path, r));
  const c = await connect({ path });
  return {
    c,
    async close() {
      await c.close();
      await new Promise((r) => server.close(r));
    },
  };
}

test('a !LOST in the same read right behind the LOCK grant aborts the new handle', async () => {
  const f = await fake((line) => (line === 'LOCK a' ? 'OK 7 1\n!LOST a expired\n' : 'OK 0\n'));
  try {
    const h = await guard(f.c.lock('a'));
    const reason = await guard(aborted(h.signal), 2000, 'the loss signal');
    assert.ok(reason instanceof LockLostError);
    assert.equal(reason.reason, 'expired');
    assert.equal(h.done, true);
  } finally {
    await f.close();
  }
});

test('a !LOST right behind an ACQUIRE grant aborts the new permits handle', async () => {
  const f = await fake((line) => (line.startsWith('ACQUIRE s') ? 'OK 1\n!LOST s forced\n' : 'OK 0\n'));
  try {
    const p = await guard(f.c.acquire('s', 1));
    assert.equal((await guard(aborted(p.signal), 2000, 'the loss signal')).reason, 'forced');
  } finally {
    await f.close();
  }
});
test('a !LOST right behind an MLOCK grant aborts the new multi-lock handle', async () => {
  const f = await fake((line) => (line === 'MLOCK 2 a b' ? 'OK 3 4\n!LOST b expired\n' : 'OK 0\n'));
  try {
    const h = await guard(f.c.mlock(['a', 'b']));
    const reason = await guard(aborted(h.signal), 2000, 'the loss signal');
    assert.equal(reason.lockName, 'b');
    assert.equal(reason.reason, 'expired');
  } finally {
    await f.close();
  }
});
