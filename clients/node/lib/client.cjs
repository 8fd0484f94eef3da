// The dlockd client: one connection, many tasks; locks, semaphores, elections, status, ping, using().
// SPDX-License-Identifier: MIT
'use strict';

const { openConnection } = require('./connection.cjs');
const { Leadership, Observers, checkValue, parseElected, parseLeader } = require('./election.cjs');
const { BadRequestError, ProtocolError, abortError, errorFromReply } = require('./errors.cjs');
const { Gate } = require('./gate.cjs');
const { listLine, parseListing } = require('./list.cjs');
const { KINDS, LockHandle, PermitsHandle, leaseWords } = require('./handles.cjs');
const { MultiLockHandle, checkNames, parseFences, setWords } = require('./multi.cjs');
const {
  DEFAULT_SOCKET, PERMITS_MAX, checkMs, checkName, checkNum, parseCount, parseGrant, parseStatus,
} = require('./proto.cjs');

/**
 * Connects to dlockd at `path`, else $DLOCK_SOCKET, else /run/dlockd/dlockd.sock.
 * Rejects with a ConnectError whose message names the path. `maxInflight`
 * (default 1024, dlockd's default max_inflight): requests in flight at once
 * before the next ones wait in the client.
 */
async function connect({ path, maxInflight } = {}) {
  const p = path || process.env.DLOCK_SOCKET || DEFAULT_SOCKET;
  return new Client(await openConnection(p, { maxInflight }));
}

class Client {
  #names = new Map(); // name -> { gate, handles }
  #observers;

  constructor(conn) {
    this._conn = conn;
    this.#observers = new Observers(conn);
    conn.onEvent = (name, reason) => this.#lost(name, reason);
    conn.onLeader = (name, words) => this.#observers.event(name, words);
    conn.onClose = (err) => this.#closed(err);
  }

  /** The socket path. */
  get path() { return this._conn.path; }

  /** True once the connection ended. */
  get closed() { return this._conn.closed; }

  /** Closes the connection: dlockd releases its locks; every live handle's signal aborts ('closed'). */
  close() { return this._conn.close(); }

  lock(name, opts) { return this.#take('lock', name, opts, false); }
  tryLock(name, opts) { return this.#take('lock', name, opts, true); }
  rlock(name, opts) { return this.#take('read', name, opts, false); }
  tryRLock(name, opts) { return this.#take('read', name, opts, true); }
  wlock(name, opts) { return this.#take('write', name, opts, false); }
  tryWLock(name, opts) { return this.#take('write', name, opts, true); }
  fairLock(name, opts) { return this.#take('fair', name, opts, false); }
  tryFairLock(name, opts) { return this.#take('fair', name, opts, true); }

  /**
   * MLOCK: locks every one of `names` (1 to 64 distinct names) at once, all
   * or nothing: dlockd grants the whole set together and holds none of it
   * while it waits, so two sets in opposite orders cannot deadlock. Resolves
   * a MultiLockHandle (fences in the order of names); aborting opts.signal
   * withdraws the wait (rejects AbortError, nothing held). Another task of
   * this client holding one of the names makes it wait locally first (the
   * names' local turns are taken in sorted order). A name this task already
   * holds through a handle (a plain lock's, or another set's) counts as a
   * reentry on the wire: pass that handle in opts.held, so that the set does
   * not wait for the handle's own local turn.
   */
  mlock(names, opts) { return this.#mtake(names, opts ?? {}, false); }

  /** TRYMLOCK: as mlock(), waiting at most opts.wait ms (default 0); resolves null on TIMEOUT. */
  tryMlock(names, opts) { return this.#mtake(names, opts ?? {}, true); }

  /**
   * Locks `name` (opts.kind: 'lock' (default), 'fair', 'read' or 'write'), runs
   * `fn(signal, handle)`, and always unlocks. `signal` aborts if the lock is
   * lost; then the call rejects with that LockLostError even if fn resolved.
   */
  async using(name, fn, opts = {}) {
    const h = Array.isArray(name)
      ? await this.#mtake(name, opts, false)
      : await this.#take(opts.kind ?? 'lock', name, opts, false);
    let ok = false;
    let result;
    let error;
    try {
      result = await fn(h.signal, h);
      ok = true;
    } catch (err) {
      error = err;
    }
    try {
      while (!h.done) await h.unlock();
    } catch (err) {
      if (ok && !h.lost) {
        ok = false;
        error = err;
      }
    }
    if (!ok) throw error;
    if (h.lost) throw h.lost;
    return result;
  }

  /**
   * ELECT: campaigns for `name`, telling observers `value`; resolves a
   * Leadership once this client leads. opts.lease as for locks; aborting
   * opts.signal withdraws the campaign (rejects AbortError, nothing held).
   * Another task of this client campaigning for the name waits locally
   * until the first leadership ends.
   */
  async elect(name, value, opts = {}) {
    const { lease, signal } = opts;
    checkName(name);
    checkValue(value);
    leaseWords(lease);
    const what = `ELECT ${name}`;
    const entry = this.#entry(name);
    if (signal?.aborted || !entry.gate.tryEnter('x')) {
      try {
        await entry.gate.enter('x', { signal, what });
      } catch (err) {
        this.#tidy(name);
        throw err;
      }
    }
    let h = null;
    try {
      // The handle is made as the reply is read, so that a !LOST right behind it finds it.
      const reply = await this._conn.request(`ELECT ${name} ${value}${leaseWords(lease)}`, {
        waits: true,
        signal,
        what,
        commit: (r) => {
          if (r.type !== 'OK' || r.cancelled) return;
          h = new Leadership(this, name, value, parseElected(r.words));
          entry.handles.add(h);
        },
      });
      if (reply.cancelled) {
        if (reply.type === 'OK') await this._dropQuietly('RESIGN', name); // the win raced the cancel
        throw abortError(what, signal);
      }
      if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
      if (reply.error) throw reply.error;
      if (h === null) throw new ProtocolError(`unexpected ELECT reply: ${reply.words.join(' ')}`);
      return h;
    } finally {
      if (h === null) this._leaveGate(name, 'x');
    }
  }

  /** LEADER: resolves {fence, value} of the name's leader, or null if nobody leads. */
  async leader(name) {
    checkName(name);
    return parseLeader((await this.#call(`LEADER ${name}`)).slice(1));
  }

  /**
   * OBSERVE: an async iterable of the name's leaders, {fence, value} or null
   * (nobody leads): first the leader now, then every change, fences never
   * going down. It ends, and dlockd is told (UNOBSERVE), when opts.signal
   * aborts or the loop breaks; it throws a ClosedError if the connection ends.
   */
  observe(name, { signal } = {}) {
    checkName(name);
    return this.#observers.open(name, signal);
  }

  /** SEMINIT: sets the semaphore's size unless it was set; resolves true if set now. */
  async semInit(name, permits) {
    checkName(name);
    checkNum('permits', permits);
    return parseCount(await this.#call(`SEMINIT ${name} ${permits}`)) === 1;
  }

  acquire(name, permits = 1, opts = {}) { return this.#acquire(name, permits, opts, false); }
  tryAcquire(name, permits = 1, opts = {}) { return this.#acquire(name, permits, opts, true); }

  /**
   * LATCHSET: sets the count-down latch's count (1 to NUM_MAX) unless the
   * latch exists; resolves true if set now, false if it existed (its count
   * unchanged), as Redisson's trySetCount. A latch has no holder: nothing of
   * it belongs to this client, and closing it changes no count.
   */
  async latchSet(name, count) {
    checkName(name);
    checkNum('count', count, 1);
    return latchCount(await this.#call(`LATCHSET ${name} ${count}`), 'LATCHSET') === 1;
  }

  /**
   * COUNTDOWN: one less; resolves the count left. At 0 the latch is deleted
   * and every waiter goes on, on every dlockd of the Redis and in Redisson.
   * A latch that does not exist resolves 0, and nothing changes.
   */
  async countDown(name) {
    checkName(name);
    return latchCount(await this.#call(`COUNTDOWN ${name}`), 'COUNTDOWN');
  }

  /** LATCHCOUNT: resolves the latch's count now (0 when it does not exist). */
  async latchCount(name) {
    checkName(name);
    return latchCount(await this.#call(`LATCHCOUNT ${name}`), 'LATCHCOUNT');
  }

  /**
   * AWAIT: resolves once the latch's count is 0 (at once when it does not
   * exist). Aborting opts.signal withdraws the wait (CANCEL; rejects with an
   * AbortError). Any number of tasks may wait at once on one client.
   */
  async await(name, opts = {}) {
    await this.#await(name, opts ?? {}, false);
  }

  /**
   * TRYAWAIT: as await(), waiting at most opts.wait ms (default 0: one
   * look); resolves 0 once the count is 0, else the count when the wait
   * ended.
   */
  tryAwait(name, opts = {}) { return this.#await(name, opts ?? {}, true); }

  /** STATUS as {state, holds, ttl, fence, readers, available}. */
  async status(name) {
    checkName(name);
    return parseStatus(await this.#call(`STATUS ${name}`));
  }

  /**
   * LIST: the locks of every kind whose names match `pattern` (Redis's glob,
   * default '*'), across every dlockd sharing the Redis, at most `limit` (1
   * to 1000; default dlockd's, 100), only names this peer may read. Resolves
   * {entries, more}; a bad pattern or limit rejects with code ARGS. An abort
   * of `signal` drops the request if it is still queued in the client (past
   * maxInflight), else rejects once its reply came.
   */
  async list({ pattern = '*', limit, signal } = {}) {
    const line = listLine(pattern, limit);
    const reply = await this._conn.request(line, { signal, what: 'LIST' });
    if (signal?.aborted) throw abortError('LIST', signal);
    if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
    if (reply.type !== 'OK' || reply.words[1] !== 'LIST') {
      throw new ProtocolError(`unexpected reply to LIST: ${reply.words.join(' ')}`);
    }
    return parseListing(reply.words.join(' '), reply.lines);
  }

  /** FORCEUNLOCK (admins only): resolves true if a lock was removed. */
  async forceUnlock(name) {
    checkName(name);
    return parseCount(await this.#call(`FORCEUNLOCK ${name}`)) === 1;
  }

  /** PING: resolves once dlockd answered. */
  async ping() {
    const words = await this.#call('PING');
    if (words[1] !== 'PONG') throw new ProtocolError(`bad PING reply: ${words.join(' ')}`);
  }

  /** INFO as an object of strings. */
  async info() {
    const out = {};
    for (const w of (await this.#call('INFO')).slice(1)) {
      const eq = w.indexOf('=');
      if (eq > 0) out[w.slice(0, eq)] = w.slice(eq + 1);
    }
    return out;
  }

  async #call(line) {
    const reply = await this._conn.request(line);
    if (reply.type === 'OK') return reply.words;
    if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
    throw new ProtocolError(`unexpected reply: ${reply.words.join(' ')}`);
  }

  async #take(kind, name, opts = {}, isTry) {
    const { lease, signal } = opts;
    checkName(name);
    leaseWords(lease);
    const wait = isTry ? checkMs('wait', opts.wait ?? 0) : undefined;
    const k = KINDS[kind];
    const what = `${k.take} ${name}`;
    const entry = this.#entry(name);
    const t0 = performance.now();
    // The gate's fast path is synchronous, so uncontended calls go out in call order.
    let passed = !signal?.aborted && entry.gate.tryEnter(k.mode);
    if (!passed) {
      try {
        passed = await entry.gate.enter(k.mode, { waitMs: wait, signal, what });
      } catch (err) {
        this.#tidy(name);
        throw err;
      }
    }
    if (!passed) {
      this.#tidy(name);
      return null;
    }
    let h = null;
    try {
      let line;
      let waits = true;
      if (isTry) {
        const left = Math.max(0, wait - Math.floor(performance.now() - t0));
        line = `${k.try} ${name} ${left}${leaseWords(lease)}`;
        waits = left > 0;
      } else {
        line = `${k.take} ${name}${leaseWords(lease)}`;
      }
      // The handle is made as the reply is read, so that a !LOST right behind it finds it.
      const reply = await this._conn.request(line, {
        waits,
        signal,
        what,
        commit: (r) => {
          if (r.type !== 'OK' || r.cancelled) return;
          h = new LockHandle(this, kind, name, parseGrant(r.words).fence, 1);
          entry.handles.add(h);
        },
      });
      if (reply.cancelled) {
        if (reply.type === 'OK') await this._dropQuietly(k.drop, name); // the grant raced the cancel
        throw abortError(what, signal);
      }
      if (reply.type === 'TIMEOUT') return null;
      if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
      if (reply.error) throw reply.error;
      return h;
    } finally {
      if (h === null) this._leaveGate(name, k.mode);
    }
  }

  async #mtake(names, opts, isTry) {
    const { lease, signal } = opts;
    const list = checkNames(names);
    leaseWords(lease);
    const wait = isTry ? checkMs('wait', opts.wait ?? 0) : undefined;
    const held = [...(opts.held ?? [])];
    for (const lender of held) {
      if (lender?.client !== this || typeof lender._holds !== 'function') {
        throw new BadRequestError('ARGS', 'opts.held must hold lock handles of this client');
      }
    }
    const what = `MLOCK ${setWords(list)}`;
    const t0 = performance.now();
    const left = () => Math.max(0, wait - Math.floor(performance.now() - t0));
    // Local turns in sorted order: two sets of this client cannot wait for each other.
    const entered = [];
    const leaveAll = () => { for (const n of entered.splice(0)) this._leaveGate(n, 'x'); };
    const lent = new Set(list.filter((name) => held.some((lender) => lender._holds(name))));
    for (const name of lent) {
      this.#entry(name).lent++; // shares the holder's turn: the gate opens once both let go
      entered.push(name);
    }
    for (const name of [...list].sort()) {
      if (lent.has(name)) continue;
      const entry = this.#entry(name);
      // Fast paths are synchronous, so uncontended calls go out in call order.
      let passed = !signal?.aborted && entry.gate.tryEnter('x');
      if (!passed) {
        try {
          passed = await entry.gate.enter('x', { waitMs: isTry ? left() : undefined, signal, what });
        } catch (err) {
          this.#tidy(name);
          leaveAll();
          throw err;
        }
      }
      if (!passed) {
        this.#tidy(name);
        leaveAll();
        return null;
      }
      entered.push(name);
    }
    let h = null;
    try {
      const w = isTry ? left() : 0;
      const line = isTry
        ? `TRYMLOCK ${setWords(list)} ${w}${leaseWords(lease)}`
        : `MLOCK ${setWords(list)}${leaseWords(lease)}`;
      // The handle is made as the reply is read, so that a !LOST right behind it finds it.
      const reply = await this._conn.request(line, {
        waits: !isTry || w > 0,
        signal,
        what,
        commit: (r) => {
          if (r.type !== 'OK' || r.cancelled) return;
          h = new MultiLockHandle(this, list, parseFences(r.words, list.length));
          for (const name of list) this.#entry(name).handles.add(h);
        },
      });
      if (reply.cancelled) {
        if (reply.type === 'OK') await this._dropQuietly('MUNLOCK', setWords(list)); // the grant raced the cancel
        throw abortError(what, signal);
      }
      if (reply.type === 'TIMEOUT') return null;
      if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
      if (reply.error) throw reply.error;
      return h;
    } finally {
      if (h === null) leaveAll();
    }
  }

  async #acquire(name, permits, opts, isTry) {
    if (typeof permits === 'object' && permits !== null) {
      opts = permits;
      permits = 1;
    }
    const { lease, signal } = opts ?? {};
    checkName(name);
    checkNum('permits', permits, 1, PERMITS_MAX);
    const wait = isTry ? checkMs('wait', opts?.wait ?? 0) : 0;
    const what = `ACQUIRE ${name} ${permits}`;
    const line = isTry
      ? `TRYACQUIRE ${name} ${permits} ${wait}${leaseWords(lease)}`
      : `ACQUIRE ${name} ${permits}${leaseWords(lease)}`;
    let h = null;
    const reply = await this._conn.request(line, {
      waits: !isTry || wait > 0,
      signal,
      what,
      commit: (r) => {
        if (r.type !== 'OK' || r.cancelled) return;
        h = new PermitsHandle(this, name, permits, parseCount(r.words));
        this.#entry(name).handles.add(h);
      },
    });
    if (reply.cancelled) {
      if (reply.type === 'OK') await this._dropQuietly('RELEASE', name, permits);
      throw abortError(what, signal);
    }
    if (reply.type === 'TIMEOUT') return null;
    if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
    if (reply.error) throw reply.error;
    return h;
  }

  async #await(name, { signal, wait }, isTry) {
    checkName(name);
    const ms = isTry ? checkMs('wait', wait ?? 0) : 0;
    const what = `${isTry ? 'TRYAWAIT' : 'AWAIT'} ${name}`;
    // A wait holds nothing: an OK that raced the cancel leaves nothing to give back.
    const reply = await this._conn.request(isTry ? `${what} ${ms}` : what, { waits: !isTry || ms > 0, signal, what });
    if (reply.cancelled) throw abortError(what, signal);
    if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
    const n = latchCount(reply.words, what);
    if (reply.type === 'OK' ? n !== 0 : !isTry) {
      throw new ProtocolError(`unexpected reply to ${what}: ${reply.words.join(' ')}`);
    }
    return n;
  }

  /** Gives back a grant nobody will hold (it raced a cancel, or came after a loss). */
  async _dropQuietly(verb, name, permits) {
    try {
      await this._conn.request(permits === undefined ? `${verb} ${name}` : `${verb} ${name} ${permits}`);
    } catch {
      // the connection ended: dlockd released it with the connection
    }
  }

  #entry(name) {
    let e = this.#names.get(name);
    if (e === undefined) {
      e = { gate: new Gate(), handles: new Set(), lent: 0 }; // lent: extra holders of the 'x' turn
      this.#names.set(name, e);
    }
    return e;
  }

  #tidy(name) {
    const e = this.#names.get(name);
    if (e && e.gate.idle && e.handles.size === 0 && e.lent === 0) this.#names.delete(name);
  }

  _leaveGate(name, mode) {
    const e = this.#names.get(name);
    if (e && mode === 'x' && e.lent > 0) e.lent--;
    else e?.gate.leave(mode);
    this.#tidy(name);
  }

  _forget(handle, name = handle.name) {
    this.#names.get(name)?.handles.delete(handle);
    this.#tidy(name);
  }

  #lost(name, reason) {
    const e = this.#names.get(name);
    if (e) for (const h of [...e.handles]) h._lose(reason, name);
  }

  #closed(err) {
    this.#observers.fail(err);
    for (const [name, e] of [...this.#names.entries()]) {
      e.gate.fail(err);
      for (const h of [...e.handles]) h._lose('closed', name);
    }
  }
}

/** A latch's `OK <n>` or `TIMEOUT <n>` as n (0 or more). */
function latchCount(words, what) {
  if (words.length !== 2 || !/^[0-9]+$/.test(words[1])) {
    throw new ProtocolError(`unexpected reply to ${what}: ${words.join(' ')}`);
  }
  return Number(words[1]);
}

module.exports = { connect, Client };
