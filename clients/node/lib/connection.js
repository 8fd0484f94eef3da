// One Unix-socket connection to dlockd: FIFO requests, one reader, events, waits and CANCEL.
// SPDX-License-Identifier: MIT

import net from 'node:net';
import { ClosedError, ConnectError, ProtocolError, abortError } from './errors.js';
import { listCount } from './list.js';
import { parseReply } from './proto.js';

const LINE_MAX = 65536; // longest line accepted from dlockd

/** Opens the socket; resolves a Connection or rejects with a ConnectError naming the path. */
export function openConnection(path) {
  return new Promise((resolve, reject) => {
    const sock = net.createConnection({ path });
    const fail = (err) => { sock.destroy(); reject(new ConnectError(path, err)); };
    sock.once('error', fail);
    sock.once('connect', () => {
      sock.off('error', fail);
      resolve(new Connection(sock, path));
    });
  });
}

/**
 * Requests are written in FIFO order and their replies matched FIFO. A request
 * that may wait (`waits`) is the last one written until its reply comes:
 * later requests stay in the outbox, so that CANCEL can follow it directly.
 */
export class Connection {
  constructor(sock, path) {
    this.path = path;
    this.sock = sock;
    this.buf = '';
    this.sent = [];      // requests written, awaiting their replies, in order
    this.outbox = [];    // requests not written yet
    this.waiting = null; // the waiting request in flight, if any
    this.closedError = null;
    this.counted = null; // a counted reply (LIST) being read: {header, left, lines}
    this.onEvent = () => {};
    this.onLeader = () => {};
    this.onClose = () => {};
    sock.setEncoding('latin1');
    sock.setNoDelay?.(true);
    sock.on('data', (chunk) => this.#read(chunk));
    sock.on('error', (err) => this.#end(new ClosedError(`dlockd connection at ${path} failed: ${err.message}`, { cause: err })));
    sock.on('close', () => this.#end(new ClosedError(`dlockd closed the connection at ${path}`)));
  }

  get closed() { return this.closedError !== null; }

  /**
   * Sends `line`; resolves its parsed reply ({type, words, code, text}).
   * opts.waits: the request may wait (holds back the later ones);
   * opts.signal: an AbortSignal; aborted while queued, the request is dropped
   * (rejects AbortError); aborted while waiting in flight, CANCEL is sent and
   * the reply resolves with `cancelled: true` (the caller releases a grant
   * that raced the cancel).
   * opts.commit: called with the reply as it is read, before any later line
   * (an event right behind it finds what it made); what it returns or throws
   * becomes the reply's `value` or `error`.
   */
  request(line, { waits = false, signal, what, commit } = {}) {
    if (this.closedError) return Promise.reject(this.closedError);
    if (signal?.aborted) return Promise.reject(abortError(what ?? line, signal));
    return new Promise((resolve, reject) => {
      const req = { line, waits, resolve, reject, signal, state: 'queued', cancelled: false, onAbort: null, commit };
      if (signal) {
        req.onAbort = () => this.#abort(req, what ?? line);
        signal.addEventListener('abort', req.onAbort, { once: true });
      }
      this.outbox.push(req);
      this.#flush();
    });
  }

  /** Closes the socket both ways; resolves when it is closed. */
  close() {
    if (this.sock.destroyed) return Promise.resolve();
    return new Promise((resolve) => {
      this.sock.once('close', resolve);
      this.#end(new ClosedError('the dlockd client is closed'));
      this.sock.destroy();
    });
  }

  #flush() {
    let out = '';
    while (this.outbox.length > 0 && this.waiting === null) {
      const req = this.outbox.shift();
      req.state = 'sent';
      this.sent.push(req);
      out += req.line + '\n';
      if (req.waits) this.waiting = req;
    }
    if (out !== '') this.sock.write(out);
  }

  #abort(req, what) {
    if (req.state === 'queued') {
      this.outbox.splice(this.outbox.indexOf(req), 1);
      req.state = 'done';
      req.reject(abortError(what, req.signal));
    } else if (req.state === 'sent' && req === this.waiting && !req.cancelled) {
      // CANCEL follows the waiting request directly: nothing was written behind it.
      req.cancelled = true;
      this.sent.push({ line: 'CANCEL', internal: true, state: 'sent', resolve() {}, reject() {} });
      this.sock.write('CANCEL\n');
    }
    // A request in flight that does not wait is answered soon: let it finish.
  }

  #read(chunk) {
    this.buf += chunk;
    let nl;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      let line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (this.counted) this.#counted(line);
      else if (line.startsWith('!')) this.#event(line);
      else if (line.startsWith('OK LIST ')) this.#listHeader(line);
      else if (line.trim() !== '') this.#reply(line);
      if (this.closedError) return;
    }
    if (this.buf.length > LINE_MAX) this.#fail(new ProtocolError('line from dlockd too long'));
  }

  // A counted reply: `OK LIST <n> <more>` then exactly n `= …` lines, no
  // event between them; it goes to its request as one reply (reply.lines).
  #listHeader(line) {
    const n = listCount(line);
    if (n < 0) return this.#fail(new ProtocolError(`bad LIST header: ${JSON.stringify(line)}`));
    if (n === 0) return this.#reply(line, []);
    this.counted = { header: line, left: n, lines: [] };
  }

  #counted(line) {
    if (!line.startsWith('= ')) return this.#fail(new ProtocolError(`LIST entry expected: ${JSON.stringify(line)}`));
    const c = this.counted;
    c.lines.push(line);
    if (--c.left > 0) return;
    this.counted = null;
    this.#reply(c.header, c.lines);
  }

  #event(line) {
    const words = line.slice(1).split(/[ \t]+/);
    if (words[0] === 'LOST' && words.length >= 3) this.onEvent(words[1], words[2]);
    else if (words[0] === 'LEADER' && words.length >= 3) this.onLeader(words[1], words.slice(2));
  }

  #reply(line, lines = []) {
    const req = this.sent.shift();
    if (req === undefined) return this.#fail(new ProtocolError(`reply with no request: ${JSON.stringify(line)}`));
    let reply;
    try {
      reply = parseReply(line);
    } catch (err) {
      return this.#fail(err);
    }
    if (req === this.waiting) this.waiting = null;
    req.state = 'done';
    req.signal?.removeEventListener('abort', req.onAbort);
    reply.cancelled = req.cancelled;
    reply.lines = lines;
    if (req.commit) {
      try {
        reply.value = req.commit(reply);
      } catch (err) {
        reply.error = err;
      }
    }
    req.resolve(reply);
    this.#flush();
  }

  #fail(err) {
    this.#end(new ClosedError(`dlockd connection at ${this.path} dropped: ${err.message}`, { cause: err }));
    this.sock.destroy();
  }

  #end(err) {
    if (this.closedError) return;
    this.closedError = err;
    const reqs = [...this.sent, ...this.outbox];
    this.sent = [];
    this.outbox = [];
    this.waiting = null;
    for (const req of reqs) {
      if (req.state === 'done' || req.internal) continue;
      req.state = 'done';
      req.signal?.removeEventListener('abort', req.onAbort);
      req.reject(req.cancelled ? abortError(req.line, req.signal) : err);
    }
    this.onClose(err);
  }
}
