// Type declarations of dlockd-client, the Node.js client of dlockd (hand-written; index.d.ts re-exports them).
// SPDX-License-Identifier: MIT

/** Default socket path when neither `path` nor $DLOCK_SOCKET is given. */
export const DEFAULT_SOCKET: string;
/** Longest lock name, in bytes. */
export const NAME_MAX: number;
/** Largest number the protocol accepts (ms, permits). */
export const NUM_MAX: number;
/** Most permits in one acquire or release. */
export const PERMITS_MAX: number;
/** Most names in one multi-lock (mlock, tryMlock). */
export const MNAMES_MAX: number;
/** Returns `name` if it is a valid lock name (1-255 chars of 0x21-0x7E), else throws a BadRequestError (code NAME). */
export function checkName(name: string): string;

export type ErrorCode =
  | 'NAME' | 'ARGS' | 'KIND' | 'NOTHELD' | 'LIMIT' | 'DENIED' | 'BACKEND' | 'CANCELLED'
  | 'CLOSED' | 'CONNECT' | 'LOST' | 'PROTOCOL' | 'UNKNOWN' | 'TOOLONG';

export type LossReason = 'expired' | 'forced' | 'backend' | 'closed';

/** Any dlockd error; `code` is the protocol's ERR code or the client's own. */
export class DlockError extends Error {
  constructor(code: ErrorCode | string, message: string, options?: { cause?: unknown });
  readonly code: ErrorCode | string;
}
/** NAME, ARGS (also UNKNOWN, TOOLONG). */
export class BadRequestError extends DlockError {
  constructor(code: 'NAME' | 'ARGS' | 'UNKNOWN' | 'TOOLONG' | string, message: string);
}
/** KIND: the name is another kind of lock (or an upgrade was asked). */
export class KindError extends DlockError {
  constructor(message: string);
}
/** NOTHELD: this connection does not hold that lock (or fewer permits). */
export class NotHeldError extends DlockError {
  constructor(message: string);
}
/** LIMIT: a daemon limit was reached. */
export class LimitError extends DlockError {
  constructor(message: string);
}
/** DENIED: not allowed for this peer. */
export class DeniedError extends DlockError {
  constructor(message: string);
}
/** BACKEND: Redis is unreachable or failed. */
export class BackendError extends DlockError {
  constructor(message: string);
}
/** The connection ended (dlockd went away, or the client was closed). */
export class ClosedError extends DlockError {
  constructor(message?: string, options?: { cause?: unknown });
}
/** dlockd said something this client does not understand. */
export class ProtocolError extends DlockError {
  constructor(message: string);
}
/** The connect failed; the message names the path, with a hint. */
export class ConnectError extends DlockError {
  constructor(path: string, err: unknown);
  readonly path: string;
  /** The system error code, e.g. 'ENOENT'. */
  readonly errno: string | undefined;
}
/** A held lock is gone: the `reason` of a handle's `signal`. */
export class LockLostError extends DlockError {
  constructor(lockName: string, reason: LossReason);
  readonly lockName: string;
  readonly reason: LossReason;
}

export interface ConnectOptions {
  /** Socket path; default $DLOCK_SOCKET, else /run/dlockd/dlockd.sock. */
  path?: string;
  /**
   * Requests in flight at once (1 to 2147483647; default 1024, dlockd's
   * default `max_inflight`); past it, the next requests wait in the client
   * until a reply comes. Raise it with dlockd's `max_inflight`.
   */
  maxInflight?: number;
}

export interface LockOptions {
  /**
   * Lease in ms, a fraction rounded up (0.5 is 1 ms, never "no lease"); 0 or
   * absent: watchdog mode (dlockd renews while the connection lives).
   */
  lease?: number;
  /** Aborting it cancels the wait: the call rejects with a DOMException named 'AbortError'. */
  signal?: AbortSignal;
}

export interface TryLockOptions extends LockOptions {
  /** How long to wait, in ms, a fraction rounded up (default 0: one try). */
  wait?: number;
}

export interface AwaitOptions {
  /** Aborting it withdraws the wait: the call rejects with a DOMException named 'AbortError'. */
  signal?: AbortSignal;
}

export interface TryAwaitOptions extends AwaitOptions {
  /** How long to wait, in ms, a fraction rounded up (default 0: one look). */
  wait?: number;
}

export interface UsingOptions extends LockOptions {
  /** The lock kind: 'lock' (default), 'fair', 'read' or 'write'. */
  kind?: 'lock' | 'fair' | 'read' | 'write';
}

export type LockKind = 'lock' | 'fair' | 'read' | 'write';

/** A held plain, fair, read or write lock. */
export class LockHandle {
  private constructor();
  readonly name: string;
  readonly kind: LockKind;
  /** The grant's fence: rises strictly from grant to grant of the name. */
  readonly fence: bigint;
  /** This handle's holds. */
  readonly holds: number;
  /** Aborted when the lock is lost; `signal.reason` is a LockLostError. */
  readonly signal: AbortSignal;
  /** The LockLostError once lost, else null. */
  readonly lost: LockLostError | null;
  /** True once fully unlocked, or lost. */
  readonly done: boolean;
  /** Reentry: same fence, one hold more. Resolves this handle. */
  relock(opts?: { lease?: number }): Promise<this>;
  /** One hold less (the last releases the lock); resolves the holds left. Rejects with the LockLostError if lost. */
  unlock(): Promise<number>;
  /** RENEW; resolves the new ttl in ms. */
  renew(lease?: number): Promise<number>;
}

export interface MultiLockOptions extends LockOptions {
  /**
   * Handles through which this task already holds some of the names (a
   * plain lock's, or another set's): those names count as a reentry (their
   * fence is that hold's) instead of waiting for the handle's local turn.
   * Handles holding none of the names are ignored.
   */
  held?: Iterable<LockHandle | MultiLockHandle>;
}

export interface TryMultiLockOptions extends MultiLockOptions {
  /** How long to wait, in ms, a fraction rounded up (default 0: one try). */
  wait?: number;
}

/** A set of names locked together by `client.mlock()`: one hold of each. */
export class MultiLockHandle {
  private constructor();
  readonly kind: 'multi';
  /** The names, in the order given. */
  readonly names: readonly string[];
  /** The grant's fences, in the order of `names`. */
  readonly fences: readonly bigint[];
  /** Aborted when the first of the names is lost; `signal.reason` is a LockLostError naming it. The others stay held until unlock(). */
  readonly signal: AbortSignal;
  /** The first LockLostError, else null. */
  readonly lost: LockLostError | null;
  /** True once unlocked, or every name lost. */
  readonly done: boolean;
  /** The fence of one of the names. */
  fenceOf(name: string): bigint;
  /**
   * MUNLOCK: one hold less of every name; resolves the holds left of each, in
   * the order of `names`. If a name was lost, releases the others still held
   * and rejects with that LockLostError.
   */
  unlock(): Promise<number[]>;
}

/** Permits of a semaphore, acquired through a client. */
export class PermitsHandle {
  private constructor();
  readonly name: string;
  readonly kind: 'sem';
  /** Permits this handle holds. */
  readonly permits: number;
  /** Permits the connection held of the semaphore at the last grant or release. */
  readonly held: number;
  readonly signal: AbortSignal;
  readonly lost: LockLostError | null;
  readonly done: boolean;
  /** Gives back `n` (default: all) of this handle's permits; resolves what the connection still holds. */
  release(n?: number): Promise<number>;
  renew(lease?: number): Promise<number>;
}

/** A name's leader: the leadership's fence and the value its leader campaigned with. */
export interface Leader {
  fence: bigint;
  value: string;
}

export interface ElectOptions extends LockOptions {}

/** Leadership of a name, won by `client.elect()`. */
export class Leadership {
  private constructor();
  readonly name: string;
  readonly kind: 'leader';
  /** The value observers are told. */
  readonly value: string;
  /** The leadership's fence: rises strictly from leader to leader of the name. */
  readonly fence: bigint;
  /** Aborted when leadership is lost; `signal.reason` is a LockLostError. */
  readonly signal: AbortSignal;
  /** The LockLostError once lost, else null. */
  readonly lost: LockLostError | null;
  /** True once resigned, or lost. */
  readonly done: boolean;
  /** RESIGN: the next candidate takes over at once. Resolves true if it was still held, false if it had ended. */
  resign(): Promise<boolean>;
  /** RENEW of a leased leadership; resolves the new ttl in ms. */
  renew(lease?: number): Promise<number>;
}

/**
 * The leaders of a name as they change: first the leader when observing
 * started, then every change; null when nobody leads. Fences never go down,
 * and one is told again only after a null.
 */
export class Observation implements AsyncIterableIterator<Leader | null> {
  private constructor();
  readonly name: string;
  [Symbol.asyncIterator](): this;
  /** Rejects with the OBSERVE error (e.g. LimitError) or a ClosedError when the connection ends. */
  next(): Promise<IteratorResult<Leader | null, undefined>>;
  /** Ends it at once and tells dlockd (UNOBSERVE, when no other observation of the name on this client is left). */
  return(): Promise<IteratorResult<Leader | null, undefined>>;
}

export interface ListOptions {
  /** Redis's glob (`*`, `?`, `[abc]`, `\` escapes), 1-255 chars of 0x21-0x7E; default '*'. */
  pattern?: string;
  /** 1 to 1000; omitted: dlockd's default (100). */
  limit?: number;
  /** Aborted while queued in the client (past maxInflight): the request is dropped; later: rejects once answered. */
  signal?: AbortSignal;
}

/** A holder or waiter of a listed lock; null where dlockd does not know. */
export interface ListParty {
  host: string | null;
  dlockdPid: number | null;
  pid: number | null;
  uid: number | null;
  /** Its holds, its permits, or the permits it asks. */
  count: number | null;
  /** Milliseconds since it took the lock. */
  age: number | null;
}

/** An entry's holders or waiters: how many in all, up to 8 described. */
export interface ListParties {
  total: number;
  list: ListParty[];
}

/** One lock of a listing. */
export interface ListEntry {
  name: string;
  kind: 'lock' | 'read' | 'write' | 'fair' | 'elect' | 'sem' | 'latch';
  /** Lease left in ms; -1: no expiry. */
  ttl: number;
  /** null for a semaphore or a latch. */
  fence: bigint | null;
  holders: ListParties;
  waiters: ListParties;
  /** An election's value, a semaphore's free permits, a latch's count; null for none. */
  value: string | null;
}

/** LIST's answer; `more` when more names matched than were told. */
export interface Listing {
  entries: ListEntry[];
  more: boolean;
}

/** STATUS of a name. */
export interface Status {
  state: 'FREE' | 'MINE' | 'TAKEN' | 'READ' | 'WRITE' | 'SEM';
  /** This connection's holds (MINE, READ, WRITE) or permits (SEM); else 0. */
  holds: number;
  /** Remaining lease in ms (MINE, TAKEN, READ, WRITE; may be -1), else null. */
  ttl: number | null;
  /** This connection's fence when MINE, else null. */
  fence: bigint | null;
  /** Owners holding read holds (READ), 1 (WRITE), else null. */
  readers: number | null;
  /** Permits free now (SEM), else null. */
  available: number | null;
}

/**
 * One connection to dlockd, shared by any number of async tasks: every
 * request is tagged and answered when ready, so a task's wait holds back
 * no other task's requests. Two tasks asking for one name queue in the
 * client (a held lock is reentrant only through its handle).
 */
export class Client {
  private constructor();
  readonly path: string;
  readonly closed: boolean;
  lock(name: string, opts?: LockOptions): Promise<LockHandle>;
  /** Resolves null on TIMEOUT. */
  tryLock(name: string, opts?: TryLockOptions): Promise<LockHandle | null>;
  rlock(name: string, opts?: LockOptions): Promise<LockHandle>;
  tryRLock(name: string, opts?: TryLockOptions): Promise<LockHandle | null>;
  wlock(name: string, opts?: LockOptions): Promise<LockHandle>;
  tryWLock(name: string, opts?: TryLockOptions): Promise<LockHandle | null>;
  fairLock(name: string, opts?: LockOptions): Promise<LockHandle>;
  tryFairLock(name: string, opts?: TryLockOptions): Promise<LockHandle | null>;
  /** Locks, runs fn, always unlocks; rejects with the LockLostError if the lock was lost meanwhile. */
  using<T>(name: string, fn: (signal: AbortSignal, handle: LockHandle) => Promise<T> | T, opts?: UsingOptions): Promise<T>;
  /** The same for a set of names (mlock): `signal` aborts if any of them is lost; all are released at the end. */
  using<T>(names: string[], fn: (signal: AbortSignal, handle: MultiLockHandle) => Promise<T> | T, opts?: MultiLockOptions): Promise<T>;
  /**
   * MLOCK: locks all of `names` (1 to 64 distinct names) at once, all or
   * nothing; dlockd holds none of them while it waits, so sets taken in any
   * order cannot deadlock. Fences in the order of `names`. Aborting
   * `signal` withdraws the wait (rejects with an 'AbortError', nothing held).
   * Bad input (no names, more than 64, a name twice, a bad name) rejects
   * with a BadRequestError before anything is sent.
   */
  mlock(names: Iterable<string>, opts?: MultiLockOptions): Promise<MultiLockHandle>;
  /** TRYMLOCK; resolves null on TIMEOUT. */
  tryMlock(names: Iterable<string>, opts?: TryMultiLockOptions): Promise<MultiLockHandle | null>;
  /**
   * ELECT: campaigns; resolves the Leadership once this client leads. `value`
   * (1-255 chars of 0x21-0x7E) is what observers are told. Aborting
   * `signal` withdraws the campaign (rejects with an 'AbortError').
   */
  elect(name: string, value: string, opts?: ElectOptions): Promise<Leadership>;
  /** LEADER: the name's leader, or null if nobody leads. */
  leader(name: string): Promise<Leader | null>;
  /**
   * OBSERVE: iterate with `for await`; ends (UNOBSERVE) when `signal` aborts
   * or the loop breaks. Throws a BadRequestError (code NAME) at once for a
   * bad name.
   */
  observe(name: string, opts?: { signal?: AbortSignal }): Observation;
  /** Sets a semaphore's size unless it was set; resolves true if set now. */
  semInit(name: string, permits: number): Promise<boolean>;
  acquire(name: string, permits?: number, opts?: LockOptions): Promise<PermitsHandle>;
  acquire(name: string, opts: LockOptions): Promise<PermitsHandle>;
  /** Resolves null on TIMEOUT. */
  tryAcquire(name: string, permits?: number, opts?: TryLockOptions): Promise<PermitsHandle | null>;
  tryAcquire(name: string, opts: TryLockOptions): Promise<PermitsHandle | null>;
  /**
   * LATCHSET: sets the count-down latch's count (1 to NUM_MAX) unless the
   * latch exists; resolves true if set now, false if it existed (unchanged).
   */
  latchSet(name: string, count: number): Promise<boolean>;
  /** COUNTDOWN: one less; resolves the count left (0: the latch is gone, its waiters go on; also for a latch that does not exist). */
  countDown(name: string): Promise<number>;
  /** LATCHCOUNT: the latch's count now, 0 when it does not exist. */
  latchCount(name: string): Promise<number>;
  /**
   * AWAIT: resolves once the latch's count is 0 (at once when it does not
   * exist). Aborting `signal` withdraws the wait (rejects with an 'AbortError').
   */
  await(name: string, opts?: AwaitOptions): Promise<void>;
  /** TRYAWAIT: as await() within `wait` ms; resolves 0 once the count is 0, else the count when the wait ended. */
  tryAwait(name: string, opts?: TryAwaitOptions): Promise<number>;
  status(name: string): Promise<Status>;
  /**
   * LIST: the locks of every kind whose names match `pattern` (Redis's glob,
   * default '*'), across every dlockd sharing the Redis, only names this peer
   * may read; at most `limit` (1 to 1000, default dlockd's: 100). A bad
   * pattern or limit rejects with a BadRequestError (code ARGS).
   */
  list(opts?: ListOptions): Promise<Listing>;
  /** FORCEUNLOCK (uid 0 or admin_uids): resolves true if a lock was removed. */
  forceUnlock(name: string): Promise<boolean>;
  ping(): Promise<void>;
  info(): Promise<Record<string, string>>;
  /** Closes the connection: dlockd releases its locks; every live handle's signal aborts with reason 'closed'. */
  close(): Promise<void>;
}

/** Connects to dlockd; rejects with a ConnectError naming the path. */
export function connect(opts?: ConnectOptions): Promise<Client>;
