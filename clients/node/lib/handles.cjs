// Lock and permit handles: fence, holds, unlock/relock/renew, and the loss signal.
// SPDX-License-Identifier: MIT
'use strict';

const { LockLostError, NotHeldError, ProtocolError, errorFromReply } = require('./errors.cjs');
const { checkMs, checkNum, parseCount, parseGrant } = require('./proto.cjs');

/** The verbs of each lock kind, and how it passes the client's local gate. */
const KINDS = {
  lock: { take: 'LOCK', try: 'TRYLOCK', drop: 'UNLOCK', mode: 'x' },
  fair: { take: 'FAIRLOCK', try: 'TRYFAIRLOCK', drop: 'UNLOCK', mode: 'x' },
  read: { take: 'RLOCK', try: 'TRYRLOCK', drop: 'RUNLOCK', mode: 's' },
  write: { take: 'WLOCK', try: 'TRYWLOCK', drop: 'WUNLOCK', mode: 'x' },
};

/** A request's lease words: none for absent or 0 (watchdog, or RENEW's own lease), else ` <ms>`. */
function leaseWords(lease) {
  const ms = lease === undefined ? 0 : checkMs('lease', lease);
  return ms === 0 ? '' : ` ${ms}`;
}

/** What handles share: a loss signal and their client's bookkeeping. */
class Held {
  #ac = null; // made at the first look at signal: most handles never need one
  #done = false;

  constructor(client, name) {
    this.client = client;
    this.name = name;
    /** The LockLostError once lost, else null. */
    this.lost = null;
  }

  /** Aborted when the lock is lost; `signal.reason` is a LockLostError. */
  get signal() {
    if (this.#ac === null) {
      this.#ac = new AbortController();
      if (this.lost) this.#ac.abort(this.lost);
    }
    return this.#ac.signal;
  }

  /** True once fully unlocked / released, or lost. */
  get done() { return this.#done; }

  _check() {
    if (this.lost) throw this.lost;
    if (this.#done) throw new NotHeldError(`${this.name}: this handle was already unlocked`);
  }

  _lose(reason) {
    if (this.#done) return;
    this.lost = new LockLostError(this.name, reason);
    this._finish();
    if (this.#ac !== null) this.#ac.abort(this.lost);
  }

  _finish() {
    if (this.#done) return;
    this.#done = true;
    this._left();
    this.client._forget(this);
  }

  _left() {}

  async _send(line) {
    const reply = await this.client._conn.request(line);
    if (reply.type === 'OK') return reply.words;
    if (this.lost) throw this.lost; // the !LOST came before this reply
    if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
    throw new ProtocolError(`unexpected reply: ${reply.words.join(' ')}`);
  }

  /** RENEW: a leased lock gets `lease` ms (or its own lease); resolves the new ttl in ms. */
  async renew(lease) {
    this._check();
    return parseCount(await this._send(`RENEW ${this.name}${leaseWords(lease)}`));
  }
}

/** A plain, fair, read or write lock held through a client. */
class LockHandle extends Held {
  constructor(client, kind, name, fence, holds) {
    super(client, name);
    this.kind = kind;
    /** The grant's fence (bigint): pass it to the resource you protect. */
    this.fence = fence;
    /** This handle's holds. */
    this.holds = holds;
  }

  _left() { this.client._leaveGate(this.name, KINDS[this.kind].mode); }

  /** Whether this handle holds `name` as a plain lock (a multi-lock may count it as a reentry). */
  _holds(name) { return !this.done && this.kind === 'lock' && this.name === name; }

  /** Reentry: locks again through this handle; same fence, one hold more. Resolves this handle. */
  async relock({ lease } = {}) {
    this._check();
    const k = KINDS[this.kind];
    const reply = await this.client._conn.request(`${k.take} ${this.name}${leaseWords(lease)}`, { waits: true });
    if (reply.type === 'OK' && this.lost) {
      // lost meanwhile: that was a new grant, not a reentry; give it back
      await this.client._dropQuietly(k.drop, this.name);
    }
    if (this.lost) throw this.lost;
    if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
    const g = parseGrant(reply.words);
    this.fence = g.fence;
    this.holds++;
    return this;
  }

  /** One hold less (the last releases the lock); resolves the holds this handle has left. */
  async unlock() {
    this._check();
    const left = parseCount(await this._send(`${KINDS[this.kind].drop} ${this.name}`));
    if (this.done) return 0;
    this.holds--;
    if (this.holds <= 0 || (this.kind !== 'read' && left === 0)) {
      this.holds = 0;
      this._finish();
    }
    return this.holds;
  }
}

/** Permits of a semaphore this handle acquired. */
class PermitsHandle extends Held {
  constructor(client, name, permits, held) {
    super(client, name);
    this.kind = 'sem';
    /** Permits this handle holds. */
    this.permits = permits;
    /** Permits the connection held of the semaphore after this grant. */
    this.held = held;
  }

  /** Gives `n` (default: all) of this handle's permits back; resolves what the connection still holds. */
  async release(n = this.permits) {
    this._check();
    checkNum('permits', n, 1, this.permits);
    const still = parseCount(await this._send(`RELEASE ${this.name} ${n}`));
    this.permits -= n;
    this.held = still;
    if (this.permits === 0) this._finish();
    return still;
  }
}

module.exports = { KINDS, leaseWords, Held, LockHandle, PermitsHandle };
