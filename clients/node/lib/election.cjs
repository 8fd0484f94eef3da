// Leader election: the Leadership handle, leader values and replies, and observing a name's leaders.
// SPDX-License-Identifier: MIT
'use strict';

const { BadRequestError, ClosedError, ProtocolError, errorFromReply } = require('./errors.cjs');
const { Held } = require('./handles.cjs');
const { NAME_MAX, parseCount, toFence } = require('./proto.cjs');

const VALUE_RE = /^[\x21-\x7e]{1,255}$/;

/** Returns value if it is a valid leader value (1-255 bytes of 0x21-0x7E, as a name), else throws code ARGS. */
function checkValue(value) {
  if (typeof value !== 'string') {
    throw new BadRequestError('ARGS', `leader value must be a string, not ${typeof value}`);
  }
  if (!VALUE_RE.test(value)) {
    const why = value.length < 1 || value.length > NAME_MAX
      ? `must be 1 to ${NAME_MAX} bytes` : 'only printable ASCII without spaces is allowed';
    const shown = value.length > 40 ? `${JSON.stringify(value.slice(0, 40))}... (${value.length} chars)` : JSON.stringify(value);
    throw new BadRequestError('ARGS', `bad leader value ${shown}: ${why}`);
  }
  return value;
}

/** The words after `OK` (LEADER, OBSERVE) or after `!LEADER <name>`: {fence, value}, or null for NONE. */
function parseLeader(words) {
  if (words.length === 1 && words[0] === 'NONE') return null;
  if (words.length === 2) return { fence: toFence(words[0]), value: words[1] };
  throw new ProtocolError(`bad leader from dlockd: ${words.join(' ')}`);
}

/** `OK <fence>` of ELECT as the fence. */
function parseElected(words) {
  if (words.length !== 2) throw new ProtocolError(`bad ELECT reply: ${words.join(' ')}`);
  return toFence(words[1]);
}

/** Leadership of a name, won by `client.elect()`. */
class Leadership extends Held {
  #resigning = null;

  constructor(client, name, value, fence) {
    super(client, name);
    this.kind = 'leader';
    /** The value observers are told. */
    this.value = value;
    /** The leadership's fence (bigint), rising from leader to leader of the name. */
    this.fence = fence;
  }

  _left() { this.client._leaveGate(this.name, 'x'); }

  /**
   * RESIGN: gives the leadership up (the next candidate takes over at once).
   * Resolves true if it was still held, false if it had ended (lost, or resigned).
   */
  resign() {
    if (this.done) return Promise.resolve(false);
    if (this.#resigning) return this.#resigning; // one in flight: share its answer
    this.#resigning = this.#resign();
    return this.#resigning;
  }

  async #resign() {
    let reply;
    try {
      reply = await this.client._conn.request(`RESIGN ${this.name}`, {
        commit: (r) => { if (r.type === 'OK') this._finish(); },
      });
    } catch (err) {
      if (this.lost) return false; // the connection ended: so did the leadership
      throw err;
    }
    if (reply.type === 'ERR') throw errorFromReply(reply.code, reply.text);
    return parseCount(reply.words) === 1;
  }
}

/**
 * A client's observations, per name: how many asked dlockd (OBSERVE), and
 * the live ones. dlockd serves a connection's OBSERVE and UNOBSERVE of a
 * name at once, not in turn, and an OBSERVE counts only once its read of
 * the leader came back: an UNOBSERVE sent while the OBSERVE is in flight
 * would find nothing to end, and the observation would stay. So each
 * name's OBSERVE and UNOBSERVE go out one at a time, in order.
 */
class Observers {
  #names = new Map(); // name -> { refs, live: Set<Observation> }
  #turns = new Map(); // name -> settles once the name's last OBSERVE or UNOBSERVE was answered

  constructor(conn) {
    this.conn = conn;
  }

  /** Sends OBSERVE or UNOBSERVE of `name` once the name's earlier one was answered. */
  _request(name, line, opts) {
    const prev = this.#turns.get(name);
    const p = prev === undefined ? this.conn.request(line, opts) : prev.then(() => this.conn.request(line, opts));
    const turn = p.then(() => {}, () => {});
    this.#turns.set(name, turn);
    turn.then(() => { if (this.#turns.get(name) === turn) this.#turns.delete(name); });
    return p;
  }

  /** A new observation of `name`; it sends OBSERVE when first iterated. */
  open(name, signal) { return new Observation(this, name, signal); }

  _ref(name) {
    let e = this.#names.get(name);
    if (e === undefined) {
      e = { refs: 0, live: new Set() };
      this.#names.set(name, e);
    }
    e.refs++;
    return e;
  }

  /** One observation of `name` less; the last sends UNOBSERVE (not awaited). */
  _unref(name) {
    const e = this.#names.get(name);
    if (e === undefined || --e.refs > 0) return;
    this.#names.delete(name);
    if (!this.conn.closed) this._request(name, `UNOBSERVE ${name}`).catch(() => {});
  }

  /** `!LEADER <name> …`: tells every live observation of the name. */
  event(name, words) {
    const e = this.#names.get(name);
    if (e === undefined) return;
    let item;
    try {
      item = parseLeader(words);
    } catch {
      return; // a malformed event is ignored, as unknown events are
    }
    for (const o of [...e.live]) o._offer(item);
  }

  /** The connection ended: every live observation fails with `err`. */
  fail(err) {
    for (const e of [...this.#names.values()]) for (const o of [...e.live]) o._fail(err);
    this.#names.clear();
  }
}

/**
 * An async iterator of a name's leaders: first the leader when it started,
 * then every change, as {fence, value} or null (nobody leads). Fences never
 * go down; one is told again only after a null. Ends (and UNOBSERVEs) when
 * its signal aborts or return() is called (a `for await` loop's break).
 */
class Observation {
  #reg;
  #signal;
  #onAbort = null;
  #entry = null;
  #queue = [];
  #waiters = [];
  #state = 'new'; // new, starting, live, ended
  #error = null;
  #top = -1n; // the highest fence told
  #gap = false; // a null was told since #top
  #lastNull = false;

  constructor(reg, name, signal) {
    this.#reg = reg;
    this.name = name;
    this.#signal = signal;
    if (signal?.aborted) this.#state = 'ended';
    else if (signal) {
      this.#onAbort = () => this.#end();
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  [Symbol.asyncIterator]() { return this; }

  next() {
    if (this.#state === 'new') this.#start();
    if (this.#queue.length > 0) return Promise.resolve({ value: this.#queue.shift(), done: false });
    if (this.#error) {
      const err = this.#error;
      this.#error = null;
      return Promise.reject(err);
    }
    if (this.#state === 'ended') return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /** Ends the observation at once (pending next() calls resolve done). */
  return() {
    this.#end();
    return Promise.resolve({ value: undefined, done: true });
  }

  #start() {
    this.#state = 'starting';
    this.#entry = this.#reg._ref(this.name);
    this.#reg._request(this.name, `OBSERVE ${this.name}`, {
      signal: this.#signal,
      what: `OBSERVE ${this.name}`,
      commit: (r) => this.#answered(r),
    }).catch((err) => {
      if (err?.name === 'AbortError') this.#end(); // dropped while queued
      else this._fail(err);
    });
  }

  #answered(reply) {
    if (this.#state !== 'starting') return;
    if (reply.type !== 'OK') {
      this._fail(reply.type === 'ERR' ? errorFromReply(reply.code, reply.text)
        : new ProtocolError(`unexpected OBSERVE reply: ${reply.words.join(' ')}`));
      return;
    }
    let item;
    try {
      item = parseLeader(reply.words.slice(1));
    } catch (err) {
      this._fail(err);
      return;
    }
    this.#state = 'live';
    this.#entry.live.add(this);
    this._offer(item);
  }

  /** A leader (or null) for this observation; dropped if it would break the promise on fences. */
  _offer(item) {
    if (this.#state !== 'live') return;
    if (item === null) {
      if (this.#lastNull) return;
      this.#lastNull = true;
      this.#gap = true;
    } else {
      if (item.fence < this.#top || (item.fence === this.#top && !this.#gap)) return;
      this.#top = item.fence;
      this.#gap = false;
      this.#lastNull = false;
    }
    const w = this.#waiters.shift();
    if (w) w.resolve({ value: item, done: false });
    else this.#queue.push(item);
  }

  #leave() {
    const was = this.#state;
    this.#state = 'ended';
    this.#signal?.removeEventListener('abort', this.#onAbort);
    if (was === 'starting' || was === 'live') {
      this.#entry.live.delete(this);
      this.#reg._unref(this.name);
    }
    return was;
  }

  #end() {
    if (this.#state === 'ended') return;
    this.#leave();
    this.#queue = [];
    for (const w of this.#waiters.splice(0)) w.resolve({ value: undefined, done: true });
  }

  _fail(err) {
    if (this.#state === 'ended') return;
    this.#leave();
    const e = err instanceof Error ? err : new ClosedError(String(err));
    const waiters = this.#waiters.splice(0);
    if (waiters.length === 0) {
      this.#error = e;
      return;
    }
    waiters[0].reject(e);
    for (const w of waiters.slice(1)) w.resolve({ value: undefined, done: true });
  }
}

module.exports = { checkValue, parseLeader, parseElected, Leadership, Observers, Observation };
