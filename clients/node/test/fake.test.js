// Tests against a fake dlockd (a Unix socket server scripted per request line): races on the wire.
// SPDX-License-Identifier: MIT

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, ClosedError, LockLostError, ProtocolError } from '../index.js';
import { guard, aborted, until } from './harness.js';

const dir = mkdtempSync(join(tmpdir(), 'dlock-node-fake-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/**
 * A fake dlockd at a fresh socket: `script(line, tag, sock)` gets each
 * request line without its tag (tag: '#7', or '' if untagged) and returns
 * what to write back in one write, or nothing; `t(tag, reply)` tags a reply.
 */
const t = (tag, reply) => (tag ? `${tag} ${reply}\n` : `${reply}\n`);
const TAGGED = /^(#[0-9A-Za-z_-]{1,16})[ \t]+(.*)$/;

async function fake(script, opts) {
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
        const m = TAGGED.exec(line);
        const out = m ? script(m[2], m[1], sock) : script(line, '', sock);
        if (out) sock.write(out);
      }
    });
    sock.on('error', () => {});
  });
  await new Promise((r) => server.listen(path, r));
  const c = await connect({ path, ...opts });
  return {
    c,
    async close() {
      await c.close();
      await new Promise((r) => server.close(r));
    },
  };
}

test('a !LOST in the same read right behind the LOCK grant aborts the new handle', async () => {
  const f = await fake((line, tag) => (line === 'LOCK a' ? `${t(tag, 'OK 7 1')}!LOST a expired\n` : t(tag, 'OK 0')));
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
  const f = await fake((line, tag) => (line.startsWith('ACQUIRE s') ? `${t(tag, 'OK 1')}!LOST s forced\n` : t(tag, 'OK 0')));
  try {
    const p = await guard(f.c.acquire('s', 1));
    assert.equal((await guard(aborted(p.signal), 2000, 'the loss signal')).reason, 'forced');
  } finally {
    await f.close();
  }
});
test('a !LOST right behind an MLOCK grant aborts the new multi-lock handle', async () => {
  const f = await fake((line, tag) => (line === 'MLOCK 2 a b' ? `${t(tag, 'OK 3 4')}!LOST b expired\n` : t(tag, 'OK 0')));
  try {
    const h = await guard(f.c.mlock(['a', 'b']));
    const reason = await guard(aborted(h.signal), 2000, 'the loss signal');
    assert.equal(reason.lockName, 'b');
    assert.equal(reason.reason, 'expired');
  } finally {
    await f.close();
  }
});

test('every request goes out tagged; replies are matched by tag in any order', async () => {
  const seen = [];
  let sock;
  const f = await fake((line, tag, s) => { sock = s; seen.push([tag, line]); });
  try {
    const calls = Promise.all([f.c.ping(), f.c.status('a'), f.c.info()]);
    calls.catch(() => {}); // awaited below; a failed check before closes the client
    await until(() => seen.length === 3, 'three requests on the wire');
    for (const [tag] of seen) assert.match(tag, /^#[0-9a-z]{1,16}$/);
    assert.equal(new Set(seen.map(([tag]) => tag)).size, 3);
    const tagOf = (line) => seen.find(([, l]) => l === line)[0];
    sock.write(`${tagOf('INFO')} OK answered=first\n${tagOf('STATUS a')} OK FREE\n${tagOf('PING')} OK PONG\n`);
    const [pong, st, info] = await guard(calls);
    assert.equal(pong, undefined);
    assert.equal(st.state, 'FREE');
    assert.deepEqual(info, { answered: 'first' });
  } finally {
    await f.close();
  }
});

test('a tag is never in flight twice: 100 tasks locking and unlocking, answered in random order', async () => {
  const inflight = new Map(); // tag -> line
  const tags = [];
  let twice = 0;
  let sock;
  const f = await fake((line, tag, s) => {
    sock = s;
    if (inflight.has(tag)) twice++;
    inflight.set(tag, line);
    tags.push(tag);
  });
  let fence = 0;
  let stop = false;
  const answer = () => {
    if (stop) return;
    const open = [...inflight.keys()];
    if (open.length > 0) {
      const tag = open[Math.floor(Math.random() * open.length)];
      const line = inflight.get(tag);
      inflight.delete(tag);
      sock.write(line.startsWith('LOCK ') ? `${tag} OK ${++fence} 1\n` : `${tag} OK 0\n`);
    }
    setImmediate(answer);
  };
  try {
    const tasks = Array.from({ length: 100 }, async (_, i) => {
      for (let r = 0; r < 3; r++) {
        const h = await f.c.lock(`n${i}`);
        await h.unlock();
      }
    });
    answer();
    await guard(Promise.all(tasks), 10000, '100 tasks');
    assert.equal(twice, 0);
    assert.equal(tags.length, 600);
    for (const tag of tags) assert.match(tag, /^#[0-9a-z]{1,16}$/);
    assert.equal(new Set(tags).size, 600); // a counter: not even reused once answered
  } finally {
    stop = true;
    await f.close();
  }
});

test('a grant that raced the CANCEL is released before the cancelled call rejects', async () => {
  const log = [];
  let lockTag = '';
  let unlockTag = '';
  let sock;
  const f = await fake((line, tag, s) => {
    sock = s;
    log.push(line);
    if (line === 'LOCK a') lockTag = tag; // waits
    else if (line.startsWith('CANCEL ')) return `${lockTag} OK 9 1\n${t(tag, 'OK 0')}`; // the grant came first
    else if (line === 'UNLOCK a') unlockTag = tag; // answered below
    else if (line === 'PING') return t(tag, 'OK PONG');
    return undefined;
  });
  try {
    const ac = new AbortController();
    let settled = false;
    const p = f.c.lock('a', { signal: ac.signal }).finally(() => { settled = true; });
    p.catch(() => {}); // awaited below
    let otherSettled = false;
    const other = f.c.lock('b').finally(() => { otherSettled = true; }); // another task's wait
    other.catch(() => {});
    await until(() => lockTag !== '' && log.includes('LOCK b'), 'the waits on the wire');
    ac.abort();
    await until(() => unlockTag !== '', 'the UNLOCK of the raced grant');
    assert.deepEqual(log, ['LOCK a', 'LOCK b', `CANCEL ${lockTag}`, 'UNLOCK a']);
    await f.c.ping();
    assert.equal(settled, false, 'the cancelled call returned before the UNLOCK was answered');
    sock.write(t(unlockTag, 'OK 0'));
    await assert.rejects(guard(p), (e) => e instanceof DOMException && e.name === 'AbortError');
    await f.c.ping();
    assert.equal(otherSettled, false, 'the other wait was disturbed');
  } finally {
    await f.close();
  }
});

test('an untagged ERR (a request line dlockd could not read) fails the connection loudly', async () => {
  const f = await fake((line, tag) => {
    if (line === 'LOCK a') return t(tag, 'OK 3 1');
    if (line === 'PING') return 'ERR ARGS a tag is # and 1 to 16 of 0-9 A-Z a-z _ -\n';
    return undefined; // LOCK b waits
  });
  try {
    const h = await guard(f.c.lock('a'));
    const waiting = assert.rejects(guard(f.c.lock('b')), ClosedError);
    await assert.rejects(guard(f.c.ping()), (e) => e instanceof ClosedError && /ERR ARGS a tag is/.test(e.message)
      && e.cause instanceof ProtocolError);
    await waiting;
    assert.equal((await guard(aborted(h.signal))).reason, 'closed');
    assert.equal(f.c.closed, true);
  } finally {
    await f.close();
  }
});

test('a reply with a tag not in flight fails the connection', async () => {
  const f = await fake(() => '#zz OK 0\n');
  try {
    await assert.rejects(guard(f.c.ping()), (e) => e instanceof ClosedError && e.cause instanceof ProtocolError);
    assert.equal(f.c.closed, true);
  } finally {
    await f.close();
  }
});

test('past maxInflight, requests wait in the client (an abort drops one) and go out as replies come', async () => {
  const log = [];
  let sock;
  const f = await fake((line, tag, s) => { sock = s; log.push([tag, line]); }, { maxInflight: 2 });
  try {
    const pa = f.c.status('a');
    const pb = f.c.status('b');
    const ac = new AbortController();
    const pc = f.c.lock('c', { signal: ac.signal });
    const pd = f.c.status('d');
    for (const q of [pa, pb, pd]) q.catch(() => {}); // awaited below
    await until(() => log.length === 2, 'two requests on the wire');
    ac.abort();
    await assert.rejects(pc, (e) => e instanceof DOMException && e.name === 'AbortError');
    sock.write(`${log[1][0]} OK FREE\n`);
    assert.equal((await guard(pb)).state, 'FREE');
    await until(() => log.length === 3, 'the next request on the wire');
    assert.deepEqual(log.map(([, line]) => line), ['STATUS a', 'STATUS b', 'STATUS d']);
    sock.write(`${log[2][0]} OK FREE\n${log[0][0]} OK FREE\n`);
    await guard(Promise.all([pa, pd]));
  } finally {
    await f.close();
  }
});

test('an UNOBSERVE goes out only once its OBSERVE was answered', async () => {
  const log = [];
  let observeTag = '';
  let sock;
  const f = await fake((line, tag, s) => {
    sock = s;
    log.push(line);
    if (line === 'OBSERVE x') observeTag = tag;
    else if (line === 'PING') return t(tag, 'OK PONG');
    else if (line === 'UNOBSERVE x') return t(tag, 'OK 1');
    return undefined;
  });
  try {
    const ac = new AbortController();
    const next = f.c.observe('x', { signal: ac.signal }).next();
    await until(() => observeTag !== '', 'OBSERVE on the wire');
    ac.abort();
    assert.deepEqual(await guard(next), { value: undefined, done: true });
    await f.c.ping();
    assert.deepEqual(log, ['OBSERVE x', 'PING']);
    sock.write(t(observeTag, 'OK NONE'));
    await until(() => log.includes('UNOBSERVE x'), 'UNOBSERVE after the answer');
    await f.c.ping();
  } finally {
    await f.close();
  }
});

test('latches: the lines sent, OK <n> and TIMEOUT <n> read, bad input refused before anything is sent', async () => {
  const log = [];
  const replies = {
    'LATCHSET b 3': 'OK 1', 'LATCHSET b 2147483647': 'OK 0', 'COUNTDOWN b': 'OK 2', 'LATCHCOUNT b': 'OK 2',
    'TRYAWAIT b 2': 'TIMEOUT 2', 'TRYAWAIT b 0': 'OK 0', 'AWAIT b': 'OK 0', 'LATCHCOUNT bad': 'OK -1',
    'AWAIT odd': 'TIMEOUT 1', 'COUNTDOWN k': 'ERR KIND k is held as a plain lock', PING: 'OK PONG',
  };
  const f = await fake((line, tag) => { log.push(line); return t(tag, replies[line] ?? 'ERR ARGS unexpected'); });
  try {
    assert.equal(await guard(f.c.latchSet('b', 3)), true);
    assert.equal(await guard(f.c.latchSet('b', 2147483647)), false);
    assert.equal(await guard(f.c.countDown('b')), 2);
    assert.equal(await guard(f.c.latchCount('b')), 2);
    assert.equal(await guard(f.c.tryAwait('b', { wait: 1.5 })), 2);
    assert.equal(await guard(f.c.tryAwait('b')), 0);
    assert.equal(await guard(f.c.await('b')), undefined);
    await assert.rejects(guard(f.c.latchCount('bad')), ProtocolError);
    await assert.rejects(guard(f.c.await('odd')), ProtocolError);
    await assert.rejects(guard(f.c.countDown('k')), (e) => e.code === 'KIND');
    const sent = log.length;
    for (const bad of [0, -1, 2147483648, 1.5, '3']) {
      await assert.rejects(f.c.latchSet('b', bad), (e) => e.code === 'ARGS', `count ${bad}`);
    }
    await assert.rejects(f.c.latchSet('a b', 1), (e) => e.code === 'NAME' && e.message.includes('"a b"'));
    await assert.rejects(f.c.countDown(''), (e) => e.code === 'NAME');
    await assert.rejects(f.c.await('a\nb'), (e) => e.code === 'NAME');
    await assert.rejects(f.c.tryAwait('b', { wait: -1 }), (e) => e.code === 'ARGS');
    await assert.rejects(f.c.tryAwait('b', { wait: 2147483648 }), (e) => e.code === 'ARGS');
    await f.c.ping();
    assert.deepEqual(log.slice(sent), ['PING']);
  } finally {
    await f.close();
  }
});

test('an aborted await sends CANCEL #tag and rejects AbortError; an OK 0 that raced it needs no undo', async () => {
  for (const raced of [false, true]) {
    const log = [];
    let awaitTag = '';
    let otherTag = '';
    let sock;
    const f = await fake((line, tag, s) => {
      sock = s;
      log.push(line);
      if (line === 'AWAIT b') awaitTag = tag;
      else if (line === 'TRYAWAIT o 60000') otherTag = tag;
      else if (line.startsWith('CANCEL ')) {
        return raced ? `${awaitTag} OK 0\n${t(tag, 'OK 0')}` : `${awaitTag} ERR CANCELLED withdrawn\n${t(tag, 'OK 1')}`;
      } else if (line === 'PING') return t(tag, 'OK PONG');
      return undefined;
    });
    try {
      const ac = new AbortController();
      const p = f.c.await('b', { signal: ac.signal });
      p.catch(() => {}); // awaited below
      const other = f.c.tryAwait('o', { wait: 60000 });
      other.catch(() => {});
      await until(() => awaitTag !== '' && otherTag !== '', 'the waits on the wire');
      ac.abort();
      await assert.rejects(guard(p), (e) => e instanceof DOMException && e.name === 'AbortError');
      await f.c.ping();
      assert.deepEqual(log, ['AWAIT b', 'TRYAWAIT o 60000', `CANCEL ${awaitTag}`, 'PING'], `raced ${raced}`);
      sock.write(`${otherTag} TIMEOUT 4\n`);
      assert.equal(await guard(other), 4);
    } finally {
      await f.close();
    }
  }
});

test('many awaits on one client each resolve on their own reply, in any order', async () => {
  const tags = new Map(); // tag -> latch name
  let sock;
  const f = await fake((line, tag, s) => { sock = s; tags.set(tag, line.slice('AWAIT '.length)); });
  try {
    const done = [];
    const waits = Array.from({ length: 6 }, (_, i) => f.c.await(`l${i % 2}`).then(() => done.push(`l${i % 2}`)));
    await until(() => tags.size === 6, 'six AWAITs on the wire');
    sock.write([...tags].filter(([, n]) => n === 'l1').map(([tag]) => `${tag} OK 0\n`).join(''));
    await until(() => done.length === 3, 'the three awaits of l1');
    assert.deepEqual(done, ['l1', 'l1', 'l1']);
    sock.write([...tags].filter(([, n]) => n === 'l0').map(([tag]) => `${tag} OK 0\n`).join(''));
    await guard(Promise.all(waits));
    assert.deepEqual(done.slice(3), ['l0', 'l0', 'l0']);
  } finally {
    await f.close();
  }
});

test('the connection ending rejects a waiting await with a ClosedError', async () => {
  let sock;
  const f = await fake((line, tag, s) => { sock = s; });
  try {
    const p = f.c.await('b');
    p.catch(() => {});
    await until(() => sock !== undefined, 'the AWAIT on the wire');
    sock.destroy();
    await assert.rejects(guard(p), ClosedError);
  } finally {
    await f.close();
  }
});
