// Multi-name locks (MLOCK, TRYMLOCK, MUNLOCK): checking a set of names, and the handle of a set.
// SPDX-License-Identifier: MIT
'use strict';

const { BadRequestError, LockLostError, NotHeldError, ProtocolError, errorFromReply } = require('./errors.cjs');
const { checkName, toFence, toInt } = require('./proto.cjs');

/** Most names in one MLOCK (the protocol's PROTO_MNAMES_MAX). */
const MNAMES_MAX = 64;

/** Returns the names as an array if they are 1 to MNAMES_MAX valid, distinct names; else throws (ARGS, NAME). */
function checkNames(names) {
  if (typeof names === 'string' || typeof names?.[Symbol.iterator] !== 'function') {
    throw new BadRequestError('ARGS', 'names must be an array of lock names');
  }
  const list = [...names];
  if (list.length < 1 || list.length > MNAMES_MAX) {
    throw new BadRequestError('ARGS', `a multi-lock takes 1 to ${MNAMES_MAX} names, not ${list.length}`);
  }
  const seen = new Set();
  for (const name of list) {
    checkName(name);
    if (seen.has(name)) throw new BadRequestError('ARGS', `lock name ${JSON.stringify(name)} given twice`);
    seen.add(name);
  }
  return list;
}

/** The words of a set's request: `<n> <name1> … <name_n>`. */
const setWords = (names) => `${names.length} ${names.join(' ')}`;

/** `OK <fence1> … <fence_n>` as the fences (bigint). */
function parseFences(words, n) {
  if (words.length !== n + 1) throw new ProtocolError(`bad MLOCK reply: ${words.join(' ')}`);
  return words.slice(1).map(toFence);
}

/** `OK <left1> … <left_n>` of MUNLOCK as numbers. */
function parseLefts(words, n) {
  if (words.length !== n + 1) throw new ProtocolError(`bad MUNLOCK reply: ${words.join(' ')}`);
  return words.slice(1).map(toInt);
}

/**
 * A set of names locked together by `client.mlock()`: one hold of each.
 * Its signal aborts when the first of them is lost (the set is no longer
 * all held); the others stay held until unlock().
 */
class MultiLockHandle {
  #ac = new AbortController();
  #held;              // the names still held through this handle
  #unlocking = null;

  constructor(client, names, fences) {
    this.client = client;
    this.kind = 'multi';
    /** The names, in the order given. */
    this.names = names;
    /** The grant's fences (bigint), in the order of names. */
    this.fences = fences;
    /** Aborted when any of the names is lost; `signal.reason` is a LockLostError naming it. */
    this.signal = this.#ac.signal;
    /** The first LockLostError, else null. */
    this.lost = null;
    this.#held = new Set(names);
  }

  /** True once unlocked, or every name lost. */
  get done() { return this.#held.size === 0; }

  /** The fence of one of the names. */
  fenceOf(name) {
    const i = this.names.indexOf(name);
    if (i < 0) throw new BadRequestError('ARGS', `${name} is not one of this handle's names`);
    return this.fences[i];
  }

  _holds(name) { return this.#held.has(name); }

  _lose(reason, name) {
    if (!this.#held.has(name)) return;
    this.#let(name);
    if (this.lost === null) {
      this.lost = new LockLostError(name, reason);
      this.#ac.abort(this.lost);
    }
  }

  #let(name) {
    this.#held.delete(name);
    this.client._forget(this, name);
    this.client._leaveGate(name, 'x');
  }

  /**
   * MUNLOCK: one hold less of every name (a name held only through this
   * handle is released). Resolves the holds left of each name, in the order
   * of names. If a name was lost, the others still held are released and
   * it rejects with that LockLostError.
   */
  unlock() {
    if (this.done) {
      return Promise.reject(this.lost ?? new NotHeldError(`${this.names.join(',')}: this handle was already unlocked`));
    }
    if (this.#unlocking === null) this.#unlocking = this.#unlock().finally(() => { this.#unlocking = null; });
    return this.#unlocking;
  }

  async #unlock() {
    for (;;) {
      const names = [...this.#held];
      if (names.length === 0) throw this.lost;
      const reply = await this.client._conn.request(`MUNLOCK ${setWords(names)}`, {
        commit: (r) => {
          if (r.type !== 'OK') return undefined;
          const lefts = parseLefts(r.words, names.length);
          for (const name of names) this.#let(name);
          return lefts;
        },
      });
      if (reply.type === 'OK') {
        if (reply.error) throw reply.error;
        if (this.lost) throw this.lost;
        return reply.value;
      }
      // A !LOST that came before the reply made one name not held: release the rest.
      if (reply.type === 'ERR' && reply.code === 'NOTHELD' && this.lost && this.#held.size < names.length) continue;
      if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
      throw new ProtocolError(`unexpected MUNLOCK reply: ${reply.words.join(' ')}`);
    }
  }
}

module.exports = { MNAMES_MAX, checkNames, setWords, parseFences, MultiLockHandle };
