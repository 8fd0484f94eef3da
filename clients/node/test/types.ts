// The package's types under tsc --noEmit --strict: every export used as a program would.
// SPDX-License-Identifier: MIT
//
// Never run, only type-checked; types.test.js checks that it names every
// export of index.d.cts (index.d.ts re-exports it). make clients-node-types
// compiles it twice, as an ES module and as CommonJS, each importing the
// package by its name through package.json's exports. A `@ts-expect-error`
// line is a misuse the types must refuse: tsc fails if it is accepted.

import {
  connect, Client, LockHandle, PermitsHandle, Leadership, Observation, MultiLockHandle,
  DlockError, BadRequestError, KindError, NotHeldError, LimitError, DeniedError, BackendError,
  ClosedError, ConnectError, LockLostError, ProtocolError,
  DEFAULT_SOCKET, NAME_MAX, NUM_MAX, PERMITS_MAX, MNAMES_MAX, checkName,
} from 'dlockd-client';
import type {
  ErrorCode, LossReason, ConnectOptions, LockOptions, TryLockOptions, UsingOptions, LockKind,
  MultiLockOptions, TryMultiLockOptions, Leader, ElectOptions, ListOptions, ListParty, ListParties,
  ListEntry, Listing, Status, AwaitOptions, TryAwaitOptions,
} from 'dlockd-client';

const limits: number[] = [NAME_MAX, NUM_MAX, PERMITS_MAX, MNAMES_MAX];
const socket: string = DEFAULT_SOCKET;
const checked: string = checkName('orders');

async function locks(client: Client, signal: AbortSignal): Promise<bigint> {
  const opts: LockOptions = { lease: 30000, signal };
  const h: LockHandle = await client.lock('orders', opts);
  const kind: LockKind = h.kind;
  const again: LockHandle = await h.relock({ lease: 1000 });
  const left: number = await again.unlock();
  const ttl: number = await h.renew(5000);
  const lost: LockLostError | null = h.lost;
  const done: boolean = h.done;
  h.signal.addEventListener('abort', () => {
    const why: unknown = h.signal.reason;
    if (why instanceof LockLostError) {
      const reason: LossReason = why.reason;
      const name: string = why.lockName;
      void [reason, name];
    }
  });
  // @ts-expect-error a fence is a bigint, not a number
  const wrong: number = h.fence;
  // @ts-expect-error handles come from the client, never from `new`
  void new LockHandle();
  // @ts-expect-error a plain lock takes no wait
  void client.lock('orders', { wait: 10 });
  void [kind, left, ttl, lost, done, wrong];

  const tries: TryLockOptions = { wait: 100, lease: 0, signal };
  const t = await client.tryLock('orders', tries);
  // @ts-expect-error a try resolves null on TIMEOUT
  void t.fence;
  const r = await client.rlock('rw');
  const tr = await client.tryRLock('rw', { wait: 5 });
  const w = await client.wlock('rw');
  const tw = await client.tryWLock('rw');
  const f = await client.fairLock('queue', { lease: 100 });
  const tf = await client.tryFairLock('queue', { wait: 50 });
  for (const x of [t, r, tr, w, tw, f, tf]) if (x !== null) await x.unlock();

  const using: UsingOptions = { kind: 'read', lease: 100, signal };
  const n: number = await client.using('orders', async (s: AbortSignal, held: LockHandle) => held.holds + (s.aborted ? 1 : 0), using);
  // @ts-expect-error no such kind
  void client.using('orders', () => 1, { kind: 'sem' });
  void n;
  return h.fence;
}

async function sets(client: Client, held: LockHandle): Promise<void> {
  const m: MultiLockOptions = { lease: 1000, held: [held] };
  const set: MultiLockHandle = await client.mlock(['a', 'b'], m);
  const fences: readonly bigint[] = set.fences;
  const one: bigint = set.fenceOf('a');
  const names: readonly string[] = set.names;
  const kind: 'multi' = set.kind;
  const lefts: number[] = await set.unlock();
  const tm: TryMultiLockOptions = { wait: 10, held: [set, held] };
  const maybe: MultiLockHandle | null = await client.tryMlock(new Set(['a', 'b']), tm);
  const out: string = await client.using(['a', 'b'], async (_s, h: MultiLockHandle) => h.names.join(','), m);
  void [fences, one, names, kind, lefts, maybe, out, set.signal, set.lost, set.done];
}

async function semaphores(client: Client): Promise<void> {
  const set: boolean = await client.semInit('pool', 3);
  const p: PermitsHandle = await client.acquire('pool', 2, { lease: 100 });
  const q: PermitsHandle = await client.acquire('pool', { signal: AbortSignal.timeout(10) });
  const tp: PermitsHandle | null = await client.tryAcquire('pool', 1, { wait: 5 });
  const tq: PermitsHandle | null = await client.tryAcquire('pool', { wait: 5 });
  const still: number = await p.release(1);
  const ttl: number = await q.renew();
  const kind: 'sem' = p.kind;
  void [set, tp, tq, still, ttl, kind, p.permits, p.held, p.name, p.signal, p.lost, p.done];
}

async function latches(client: Client, signal: AbortSignal): Promise<void> {
  const set: boolean = await client.latchSet('batch', 3);
  const left: number = await client.countDown('batch');
  const count: number = await client.latchCount('batch');
  const opts: AwaitOptions = { signal };
  const open: void = await client.await('batch', opts);
  const tries: TryAwaitOptions = { wait: 500, signal };
  const still: number = await client.tryAwait('batch', tries);
  const look: number = await client.tryAwait('batch');
  // @ts-expect-error await takes no wait: tryAwait does
  void client.await('batch', { wait: 10 });
  // @ts-expect-error a count is a number
  void client.latchSet('batch', '3');
  void [set, left, count, open, still, look];
}

async function elections(client: Client, signal: AbortSignal): Promise<void> {
  const opts: ElectOptions = { lease: 1000, signal };
  const l: Leadership = await client.elect('billing', '10.0.0.5:8080', opts);
  const fence: bigint = l.fence;
  const value: string = l.value;
  const ttl: number = await l.renew();
  const had: boolean = await l.resign();
  const now: Leader | null = await client.leader('billing');
  const obs: Observation = client.observe('billing', { signal });
  for await (const leader of obs) {
    const v: string | undefined = leader?.value;
    // @ts-expect-error null: nobody leads
    void leader.fence;
    void v;
    break;
  }
  const r: IteratorResult<Leader | null, undefined> = await obs.next();
  await obs.return();
  void [fence, value, ttl, had, now, r, obs.name, l.name, l.kind, l.signal, l.lost, l.done];
}

async function listing(client: Client): Promise<void> {
  const opts: ListOptions = { pattern: 'job*', limit: 50, signal: AbortSignal.timeout(1000) };
  const l: Listing = await client.list(opts);
  const more: boolean = l.more;
  for (const e of l.entries) {
    const entry: ListEntry = e;
    const parties: ListParties = entry.holders;
    const first: ListParty | undefined = parties.list[0];
    const pid: number | null = first?.pid ?? null;
    const kinds: ListEntry['kind'][] = ['lock', 'read', 'write', 'fair', 'elect', 'sem', 'latch'];
    void [pid, kinds, parties.total, entry.waiters, entry.value, entry.fence, entry.ttl, entry.name];
  }
  void more;
}

async function other(client: Client): Promise<void> {
  const st: Status = await client.status('orders');
  const states: Status['state'][] = ['FREE', 'MINE', 'TAKEN', 'READ', 'WRITE', 'SEM'];
  const fence: bigint | null = st.fence;
  const removed: boolean = await client.forceUnlock('orders');
  await client.ping();
  const info: Record<string, string> = await client.info();
  const path: string = client.path;
  const closed: boolean = client.closed;
  await client.close();
  // @ts-expect-error a client comes from connect()
  void new Client();
  void [st.holds, st.ttl, st.readers, st.available, states, fence, removed, info, path, closed];
}

function errors(e: unknown): string {
  if (e instanceof ConnectError) return `${e.path} ${e.errno ?? ''}`;
  if (e instanceof LockLostError) return e.reason;
  for (const cls of [BadRequestError, KindError, NotHeldError, LimitError, DeniedError, BackendError,
    ClosedError, ProtocolError]) {
    if (e instanceof cls) return e.code;
  }
  if (e instanceof DlockError) {
    const code: ErrorCode | string = e.code;
    return code;
  }
  const made: DlockError[] = [
    new DlockError('CANCELLED', 'cancelled'), new BadRequestError('NAME', 'bad name'), new KindError('kind'),
    new NotHeldError('not held'), new LimitError('limit'), new DeniedError('denied'), new BackendError('redis'),
    new ClosedError(), new ClosedError('closed', { cause: e }), new ProtocolError('what'),
    new ConnectError('/run/dlockd/dlockd.sock', e), new LockLostError('orders', 'expired'),
  ];
  // @ts-expect-error no such loss reason
  void new LockLostError('orders', 'stolen');
  return made.map((x) => x.message).join();
}

export async function main(): Promise<void> {
  const copts: ConnectOptions = { path: socket, maxInflight: 4096 };
  const client: Client = await connect(copts);
  const ac = new AbortController();
  // Many tasks at once on one client: each waits for its own name.
  const handles: LockHandle[] = await Promise.all(
    Array.from({ length: 100 }, (_, i) => client.lock(`job-${i}`, { signal: ac.signal })));
  await Promise.all(handles.map((h) => h.unlock()));
  const fence = await locks(client, ac.signal);
  const held = await client.lock(checked);
  await sets(client, held);
  await semaphores(client);
  await latches(client, ac.signal);
  await elections(client, ac.signal);
  await listing(client);
  await other(await connect());
  void [fence, limits, errors(null)];
}
