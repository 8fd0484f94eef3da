#!/usr/bin/env node
// Conformance adapter: speaks tests/conformance/README.md's protocol through the public API only.
// SPDX-License-Identifier: MIT

import { createInterface } from 'node:readline';
import { connect, DlockError, LockLostError } from './index.js';

const clients = new Map(); // cid -> Client
const handles = new Map(); // hid -> LockHandle | PermitsHandle | Leadership
const observations = new Map(); // oid -> { ac, stopped }
const inflight = new Map(); // rid -> AbortController

const say = (line) => process.stdout.write(`${line}\n`);
const oneLine = (s) => String(s).replace(/[\r\n]+/g, ' ');

const KIND_OF_CODE = {
  NAME: 'name', ARGS: 'args', KIND: 'kind', NOTHELD: 'notheld', LIMIT: 'limit', DENIED: 'denied',
  BACKEND: 'backend', CANCELLED: 'cancelled', CLOSED: 'closed', CONNECT: 'connect',
};

function errKind(e) {
  if (e?.name === 'AbortError') return 'cancelled';
  if (e instanceof LockLostError) return e.reason === 'closed' ? 'closed' : 'notheld';
  if (e instanceof DlockError) return KIND_OF_CODE[e.code] ?? 'other';
  return 'other';
}

function client(cid) {
  const c = clients.get(cid);
  if (!c) throw new Error(`no client ${cid}`);
  return c;
}

function handle(hid) {
  const h = handles.get(hid);
  if (!h) throw new Error(`no handle ${hid}`);
  return h;
}

function keep(hid, h) {
  handles.set(hid, h);
  const tell = () => say(`* lost ${hid} ${h.signal.reason.reason}`);
  // A !LOST read with the grant (a 1 ms lease) aborts the signal before the
  // grant's await resumes, and an aborted signal fires no more 'abort': tell
  // it after the answer.
  if (h.signal.aborted) setImmediate(tell);
  else h.signal.addEventListener('abort', tell, { once: true });
  return h;
}

/** A <lease> in ms, maybe with a fraction (below 1 ms): passed as it is, for the client to round. */
const lease = (w) => Number(w);
/** lock's <name>: `%` and hex digits stand for the name's bytes (`%` alone: the empty name). */
const nameArg = (w) => (w.startsWith('%') ? Buffer.from(w.slice(1), 'hex').toString('latin1') : w);

function statusWords(s) {
  switch (s.state) {
    case 'FREE': return 'FREE';
    case 'MINE': return `MINE ${s.holds} ${s.ttl} ${s.fence}`;
    case 'TAKEN': return `TAKEN ${s.ttl}`;
    case 'READ': case 'WRITE': return `${s.state} ${s.readers} ${s.holds} ${s.ttl}`;
    case 'SEM': return `SEM ${s.available} ${s.holds}`;
    default: return s.state;
  }
}

async function grant(hid, p) {
  const h = await p;
  if (h === null) return 'timeout';
  keep(hid, h);
  return `ok ${h.fence} ${h.holds}`;
}

/** The handles through which client `c` holds plain locks or sets: an mlock counts their names as reentries. */
const heldOf = (c) => [...handles.values()].filter((h) => h.client === c && (h.kind === 'lock' || h.kind === 'multi'));

async function mgrant(hid, p) {
  const h = await p;
  if (h === null) return 'timeout';
  keep(hid, h);
  return `ok ${h.fences.join(' ')}`;
}

const leaderWords = (l) => (l === null ? 'NONE' : `${l.fence} ${l.value}`);

/** observe: answers the first leader; the loop telling later ones starts once that answer is out. */
async function observe(c, oid, name, signal) {
  const ac = new AbortController();
  const it = c.observe(name, { signal: AbortSignal.any([ac.signal, signal]) });
  const first = await it.next();
  if (first.done) throw new DOMException('observe was aborted', { name: 'AbortError' });
  const obs = { ac, stopped: false };
  observations.get(oid)?.ac.abort();
  observations.set(oid, obs);
  const tell = async () => {
    try {
      for (;;) {
        const r = await it.next();
        if (r.done || obs.stopped) return;
        say(`* leader ${oid} ${leaderWords(r.value)}`);
      }
    } catch {
      // the connection ended
    }
  };
  return { answer: `ok ${leaderWords(first.value)}`, after: tell };
}

async function contend(c, tasks, names, rounds, prefix) {
  const holder = new Map();
  const last = new Map();
  let grants = 0;
  let overlaps = 0;
  let nonrising = 0;
  const task = async (t) => {
    for (let r = 0; r < rounds; r++) {
      const name = `${prefix}${(t + r) % names}`;
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
  await Promise.all(Array.from({ length: tasks }, (_, t) => task(t)));
  return `ok ${grants} ${overlaps} ${nonrising}`;
}

async function run(cmd, a, signal) {
  switch (cmd) {
    case 'connect':
      clients.set(a[0], await connect(a[1] === '-' ? {} : { path: a[1] }));
      return 'ok';
    case 'close':
      await client(a[0]).close();
      return 'ok';
    case 'lock': return grant(a[1], client(a[0]).lock(nameArg(a[2]), { lease: lease(a[3]), signal }));
    case 'rlock': return grant(a[1], client(a[0]).rlock(nameArg(a[2]), { lease: lease(a[3]), signal }));
    case 'wlock': return grant(a[1], client(a[0]).wlock(nameArg(a[2]), { lease: lease(a[3]), signal }));
    case 'fairlock': return grant(a[1], client(a[0]).fairLock(nameArg(a[2]), { lease: lease(a[3]), signal }));
    case 'trylock':
      return grant(a[1], client(a[0]).tryLock(a[2], { wait: Number(a[3]), lease: lease(a[4]), signal }));
    case 'mlock': {
      const c = client(a[0]);
      return mgrant(a[1], c.mlock(a.slice(3), { lease: lease(a[2]), signal, held: heldOf(c) }));
    }
    case 'trymlock': {
      const c = client(a[0]);
      return mgrant(a[1], c.tryMlock(a.slice(4), { wait: Number(a[2]), lease: lease(a[3]), signal, held: heldOf(c) }));
    }
    case 'munlock': return `ok ${(await handle(a[0]).unlock()).join(' ')}`;
    case 'reenter': {
      const h = await handle(a[0]).relock();
      return `ok ${h.fence} ${h.holds}`;
    }
    case 'unlock': return `ok ${await handle(a[0]).unlock()}`;
    case 'renew': return `ok ${await handle(a[0]).renew(lease(a[1]))}`;
    case 'seminit': return `ok ${(await client(a[0]).semInit(a[1], Number(a[2]))) ? 1 : 0}`;
    case 'acquire': {
      const h = await client(a[0]).acquire(a[2], Number(a[3]), { lease: lease(a[4]), signal });
      keep(a[1], h);
      return `ok ${h.held}`;
    }
    case 'release': return `ok ${await handle(a[0]).release(Number(a[1]))}`;
    case 'latchset': return `ok ${(await client(a[0]).latchSet(a[1], Number(a[2]))) ? 1 : 0}`;
    case 'countdown': return `ok ${await client(a[0]).countDown(a[1])}`;
    case 'latchcount': return `ok ${await client(a[0]).latchCount(a[1])}`;
    case 'await':
      await client(a[0]).await(a[1], { signal });
      return 'ok';
    case 'tryawait': {
      const left = await client(a[0]).tryAwait(a[1], { wait: Number(a[2]), signal });
      return left === 0 ? 'ok' : `timeout ${left}`;
    }
    case 'status': return `ok ${statusWords(await client(a[0]).status(a[1]))}`;
    case 'ping':
      await client(a[0]).ping();
      return 'ok';
    case 'list': {
      // '-': no limit (dlockd's default); another word goes as a number, or as-is if it is not one.
      const limit = a[2] === '-' ? undefined : (/^-?[0-9]+$/.test(a[2]) ? Number(a[2]) : a[2]);
      const l = await client(a[0]).list({ pattern: a[1], limit, signal });
      const words = l.entries.map((e) => `${e.name} ${e.kind} ${e.fence ?? '-'} ${e.holders.total}`);
      return ['ok', l.entries.length, l.more ? 1 : 0, ...words].join(' ');
    }
    case 'elect': {
      const h = await client(a[0]).elect(a[2], a[3], { lease: lease(a[4]), signal });
      keep(a[1], h);
      return `ok ${h.fence}`;
    }
    case 'resign': return `ok ${(await handle(a[0]).resign()) ? 1 : 0}`;
    case 'leader': return `ok ${leaderWords(await client(a[0]).leader(a[1]))}`;
    case 'observe': return observe(client(a[0]), a[1], a[2], signal);
    case 'unobserve': {
      const obs = observations.get(a[0]);
      if (!obs) throw new Error(`no observation ${a[0]}`);
      obs.stopped = true;
      obs.ac.abort();
      observations.delete(a[0]);
      return 'ok';
    }
    case 'contend':
      return contend(client(a[0]), Number(a[1]), Number(a[2]), Number(a[3]), a[4]);
    default:
      throw new Error(`unknown command ${cmd}`);
  }
}

function command(line) {
  const [rid, cmd, ...args] = line.split(' ');
  if (!rid || !cmd) return;
  if (cmd === 'cancel') {
    inflight.get(args[0])?.abort();
    say(`${rid} ok`);
    return;
  }
  const ac = new AbortController();
  inflight.set(rid, ac);
  run(cmd, args, ac.signal).then(
    (answer) => {
      if (typeof answer === 'string') return say(`${rid} ${answer}`);
      say(`${rid} ${answer.answer}`);
      answer.after();
    },
    (e) => say(`${rid} err ${errKind(e)} ${oneLine(e?.message ?? e)}`),
  ).finally(() => inflight.delete(rid));
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => { if (line.trim() !== '') command(line.trim()); });
rl.on('close', async () => {
  await Promise.all([...clients.values()].map((c) => c.close()));
  process.stdout.write('', () => process.exit(0));
});
say('* ready');
