// Local exclusion per name: a FIFO gate that lets one exclusive holder or many shared ones pass.
// SPDX-License-Identifier: MIT
'use strict';

const { abortError } = require('./errors.cjs');

/**
 * dlockd's owner is the connection, so two tasks of one client must not hold
 * one name at once: plain, fair and write locks pass the gate exclusively
 * ('x'), read locks shared ('s'), first come first served.
 */
class Gate {
  constructor() {
    this.excl = false;
    this.shared = 0;
    this.queue = [];
  }

  get idle() { return !this.excl && this.shared === 0 && this.queue.length === 0; }

  #fits(mode) {
    return !this.excl && (mode === 's' || this.shared === 0);
  }

  #take(mode) {
    if (mode === 'x') this.excl = true;
    else this.shared++;
  }

  /** Passes at once if the gate is free for `mode` (nobody queued); returns whether it did. */
  tryEnter(mode) {
    if (this.queue.length > 0 || !this.#fits(mode)) return false;
    this.#take(mode);
    return true;
  }

  /**
   * Resolves true once passed, false when `waitMs` (undefined: forever) ran
   * out first; rejects with an AbortError when `signal` aborts first.
   */
  enter(mode, { waitMs, signal, what } = {}) {
    if (this.queue.length === 0 && this.#fits(mode)) {
      this.#take(mode);
      return Promise.resolve(true);
    }
    if (waitMs === 0) return Promise.resolve(false);
    if (signal?.aborted) return Promise.reject(abortError(what, signal));
    return new Promise((resolve, reject) => {
      const w = { mode, resolve, reject, timer: null, signal, onAbort: null };
      const leave = () => {
        this.queue.splice(this.queue.indexOf(w), 1);
        clearTimeout(w.timer);
        signal?.removeEventListener('abort', w.onAbort);
        this.#wake(); // a waiter behind an exclusive one may pass now
      };
      if (waitMs !== undefined) w.timer = setTimeout(() => { leave(); resolve(false); }, waitMs);
      if (signal) {
        w.onAbort = () => { leave(); reject(abortError(what, signal)); };
        signal.addEventListener('abort', w.onAbort, { once: true });
      }
      this.queue.push(w);
    });
  }

  /** One holder of `mode` leaves. */
  leave(mode) {
    if (mode === 'x') this.excl = false;
    else this.shared--;
    this.#wake();
  }

  /** Rejects every waiter (the client closed). */
  fail(err) {
    for (const w of this.queue.splice(0)) {
      clearTimeout(w.timer);
      w.signal?.removeEventListener('abort', w.onAbort);
      w.reject(err);
    }
  }

  #wake() {
    while (this.queue.length > 0 && this.#fits(this.queue[0].mode)) {
      const w = this.queue.shift();
      clearTimeout(w.timer);
      w.signal?.removeEventListener('abort', w.onAbort);
      this.#take(w.mode);
      w.resolve(true);
    }
  }
}

module.exports = { Gate };
