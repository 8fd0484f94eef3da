// One Unix-socket connection to dlockd: tagged requests answered in any order, one reader, events, CANCEL #tag.
// SPDX-License-Identifier: MIT
'use strict';

const net = require('node:net');
const { BadRequestError, ClosedError, ConnectError, ProtocolError, abortError } = require('./errors.cjs');
const { listCount } = require('./list.cjs');
const { NUM_MAX, parseReply } = require('./proto.cjs');

const LINE_MAX = 65536; // longest line accepted from dlockd
/** Requests in flight at once before the client queues them: dlockd's default max_inflight. */
const INFLIGHT_MAX = 1024;
const TAGGED_RE = /^#([0-9A-Za-z_-]{1,16}) (.*)$/; // a reply line: `#<tag> <reply>`

/** Opens the socket; resolves a Connection or rejects with a ConnectError naming the path. */
function openConnection(path, { maxInflight = INFLIGHT_MAX } = {}) {
  if (!Number.isInteger(maxInflight) || maxInflight < 1 || maxInflight > NUM_MAX) {
    return Promise.reject(new BadRequestError('ARGS', `maxInflight must be an integer 1 to ${NUM_MAX}, not ${maxInflight}`));
  }
  return new Promise((resolve, reject) => {
    const sock = net.createConnection({ path });
    const fail = (err) => { sock.destroy(); reject(new ConnectError(path, err)); };
    sock.once('error', fail);
    sock.once('connect', () => {
      sock.off('error', fail);
      resolve(new Connection(sock, path, maxInflight));
    });
  });
}

/**
 * Every request goes out tagged (`#<tag> <request>`, the tag a counter in
 * base 36, never used twice on a connection), and dlockd answers each when
 * it is ready (`#<tag> <reply>`), in any order: no request waits behind
 * another. Untagged lines are events (`!…`), or an untagged ERR, a line
 * dlockd could not read: a bug, which ends the connection. Past
 * maxInflight requests in flight, the next ones wait in the outbox.
 */
class Connection {
  constructor(sock, path, maxInflight = INFLIGHT_MAX) {
    this.path = path;
    this.sock = sock;
    this.maxInflight = maxInflight;
    this.buf = '';
    this.pending = new Map(); // tag -> request written, awaiting its reply (CANCELs too)
    this.inflight = 0;        // of them, those counted toward maxInflight (not CANCELs)
    this.outbox = [];         // requests not written yet: past maxInflight
    this.lastTag = 0;         // the last tag's number
    this.wbuf = '';           // lines to write at the end of this tick, in one write
    this.closedError = null;
    this.counted = null;      // a counted reply (LIST) being read: {req, header, left, lines}
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
   * Sends `line` (tagged); resolves its parsed reply ({type, words, code, text}).
   * opts.waits: the request may wait in dlockd, so that an abort withdraws it;
   * opts.signal: an AbortSignal; aborted while queued in the client, the
   * request is dropped (rejects AbortError); aborted while it waits in
   * dlockd, `CANCEL #<tag>` is sent and the reply resolves with
   * `cancelled: true` (the caller releases a grant that raced the cancel).
   * An abort of a request that does not wait lets it finish.
   * opts.commit: called with the reply as it is read, before any later line
   * (an event right behind it finds what it made); what it returns or throws
   * becomes the reply's `value` or `error`.
   */
  request(line, { waits = false, signal, what, commit } = {}) {
    if (this.closedError) return Promise.reject(this.closedError);
    if (signal?.aborted) return Promise.reject(abortError(what ?? line, signal));
    return new Promise((resolve, reject) => {
      const req = { line, waits, resolve, reject, signal, tag: null, state: 'queued', cancelled: false, onAbort: null, commit };
      if (signal) {
        req.onAbort = () => this.#abort(req, what ?? line);
        signal.addEventListener('abort', req.onAbort, { once: true });
      }
      if (this.inflight < this.maxInflight && this.outbox.length === 0) this.#send(req);
      else this.outbox.push(req);
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

  #send(req) {
    const tag = (++this.lastTag).toString(36);
    req.tag = tag;
    req.state = 'sent';
    this.pending.set(tag, req);
    if (!req.internal) this.inflight++;
    // Lines asked for in one tick go out in one write, after every promise
    // that tick settled has had its turn to add its own.
    if (this.wbuf === '') process.nextTick(() => this.#flush());
    this.wbuf += `#${tag} ${req.line}\n`;
  }

  #flush() {
    const out = this.wbuf;
    this.wbuf = '';
    if (out !== '' && !this.closedError) this.sock.write(out);
  }

  /** Writes queued requests while there is room in flight. */
  #pump() {
    while (this.outbox.length > 0 && this.inflight < this.maxInflight && !this.closedError) {
      this.#send(this.outbox.shift());
    }
  }

  #abort(req, what) {
    if (req.state === 'queued') {
      this.outbox.splice(this.outbox.indexOf(req), 1);
      req.state = 'done';
      req.reject(abortError(what, req.signal));
    } else if (req.state === 'sent' && req.waits && !req.cancelled) {
      req.cancelled = true;
      this.#send({ line: `CANCEL #${req.tag}`, internal: true, state: 'queued', resolve() {}, reject() {} });
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
      else if (line.startsWith('#')) this.#tagged(line);
      else if (line.startsWith('!')) this.#event(line);
      else if (line.trim() !== '') this.#untagged(line);
      if (this.closedError) return;
    }
    if (this.buf.length > LINE_MAX) this.#fail(new ProtocolError('line from dlockd too long'));
  }

  #tagged(line) {
    const m = TAGGED_RE.exec(line);
    if (m === null) return this.#fail(new ProtocolError(`bad tagged line from dlockd: ${JSON.stringify(line)}`));
    const req = this.pending.get(m[1]);
    if (req === undefined) return this.#fail(new ProtocolError(`reply to a tag not in flight: ${JSON.stringify(line)}`));
    if (m[2].startsWith('OK LIST ')) return this.#listHeader(req, m[2]);
    return this.#reply(req, m[2]);
  }

  // Every request is tagged, so an untagged reply is an ERR about a line
  // dlockd could not read as a request (a bad tag, a line too long): this
  // client sent something wrong, and cannot tell which request it was.
  #untagged(line) {
    this.#fail(new ProtocolError(`untagged reply from dlockd: ${JSON.stringify(line)}`));
  }

  // A counted reply: `#<tag> OK LIST <n> <more>` then exactly n `= …` lines,
  // untagged, with nothing between them; it goes to its request as one
  // reply (reply.lines).
  #listHeader(req, header) {
    const n = listCount(header);
    if (n < 0) return this.#fail(new ProtocolError(`bad LIST header: ${JSON.stringify(header)}`));
    if (n === 0) return this.#reply(req, header, []);
    this.counted = { req, header, left: n, lines: [] };
  }

  #counted(line) {
    if (!line.startsWith('= ')) return this.#fail(new ProtocolError(`LIST entry expected: ${JSON.stringify(line)}`));
    const c = this.counted;
    c.lines.push(line);
    if (--c.left > 0) return;
    this.counted = null;
    this.#reply(c.req, c.header, c.lines);
  }

  #event(line) {
    const words = line.slice(1).split(/[ \t]+/);
    if (words[0] === 'LOST' && words.length >= 3) this.onEvent(words[1], words[2]);
    else if (words[0] === 'LEADER' && words.length >= 3) this.onLeader(words[1], words.slice(2));
  }

  #reply(req, line, lines = []) {
    let reply;
    try {
      reply = parseReply(line);
    } catch (err) {
      return this.#fail(err);
    }
    this.pending.delete(req.tag);
    if (!req.internal) this.inflight--;
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
    this.#pump();
  }

  #fail(err) {
    this.#end(new ClosedError(`dlockd connection at ${this.path} dropped: ${err.message}`, { cause: err }));
    this.sock.destroy();
  }

  #end(err) {
    if (this.closedError) return;
    this.closedError = err;
    const reqs = [...this.pending.values(), ...this.outbox];
    this.pending.clear();
    this.outbox = [];
    this.inflight = 0;
    this.counted = null;
    for (const req of reqs) {
      if (req.state === 'done' || req.internal) continue;
      req.state = 'done';
      req.signal?.removeEventListener('abort', req.onAbort);
      req.reject(req.cancelled ? abortError(req.line, req.signal) : err);
    }
    this.onClose(err);
  }
}

module.exports = { INFLIGHT_MAX, openConnection, Connection };
