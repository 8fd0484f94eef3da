// The dlockd client's error classes: one per ERR code family, plus closed, connect and loss.
// SPDX-License-Identifier: MIT
'use strict';

const { getSystemErrorMap } = require('node:util');

/** Any dlockd error. `code` is the protocol's ERR code or the client's own. */
class DlockError extends Error {
  constructor(code, message, options) {
    super(message, options);
    this.name = 'DlockError';
    this.code = code;
  }
}

/** NAME, ARGS (also UNKNOWN, TOOLONG): a bad request, found by dlockd or the client. */
class BadRequestError extends DlockError {
  constructor(code, message) { super(code, message); this.name = 'BadRequestError'; }
}

/** KIND: the name is another kind of lock (or an upgrade was asked). */
class KindError extends DlockError {
  constructor(message) { super('KIND', message); this.name = 'KindError'; }
}

/** NOTHELD: this connection does not hold that lock (or fewer permits). */
class NotHeldError extends DlockError {
  constructor(message) { super('NOTHELD', message); this.name = 'NotHeldError'; }
}

/** LIMIT: a daemon limit was reached. */
class LimitError extends DlockError {
  constructor(message) { super('LIMIT', message); this.name = 'LimitError'; }
}

/** DENIED: not allowed for this peer (FORCEUNLOCK, CLIENTS). */
class DeniedError extends DlockError {
  constructor(message) { super('DENIED', message); this.name = 'DeniedError'; }
}

/** BACKEND: Redis is unreachable or failed. */
class BackendError extends DlockError {
  constructor(message) { super('BACKEND', message); this.name = 'BackendError'; }
}

/** CLOSED: the connection ended (dlockd went away, or the client was closed). */
class ClosedError extends DlockError {
  constructor(message = 'dlockd connection closed', options) {
    super('CLOSED', message, options);
    this.name = 'ClosedError';
  }
}

/** PROTOCOL: dlockd said something this client does not understand. */
class ProtocolError extends DlockError {
  constructor(message) { super('PROTOCOL', message); this.name = 'ProtocolError'; }
}

const CONNECT_HINTS = {
  ENOENT: ' (is dlockd running?)',
  ECONNREFUSED: ' (is dlockd running?)',
  EACCES: ' (add yourself to the dlockd group, or check socket_mode)',
};

function strerror(err) {
  const known = typeof err?.errno === 'number' ? getSystemErrorMap().get(err.errno) : undefined;
  const text = known ? known[1] : String(err?.message ?? err ?? 'failed');
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** CONNECT: the client could not connect; the message names the path, with a hint. */
class ConnectError extends DlockError {
  constructor(path, err) {
    super('CONNECT', `cannot connect to dlockd at ${path}: ${strerror(err)}${CONNECT_HINTS[err?.code] ?? ''}`,
      { cause: err });
    this.name = 'ConnectError';
    this.path = path;
    this.errno = err?.code;
  }
}

/** LOST: a held lock is gone; `reason` is expired, forced, backend or closed. */
class LockLostError extends DlockError {
  constructor(lockName, reason) {
    super('LOST', `lock ${lockName} lost: ${reason}`);
    this.name = 'LockLostError';
    this.lockName = lockName;
    this.reason = reason;
  }
}

const BY_CODE = {
  NAME: (c, t) => new BadRequestError(c, t),
  ARGS: (c, t) => new BadRequestError(c, t),
  UNKNOWN: (c, t) => new BadRequestError(c, t),
  TOOLONG: (c, t) => new BadRequestError(c, t),
  KIND: (c, t) => new KindError(t),
  NOTHELD: (c, t) => new NotHeldError(t),
  LIMIT: (c, t) => new LimitError(t),
  DENIED: (c, t) => new DeniedError(t),
  BACKEND: (c, t) => new BackendError(t),
};

/** The error for an `ERR <code> <text>` reply. */
function errorFromReply(code, text) {
  const make = BY_CODE[code];
  return make ? make(code, text) : new DlockError(code, text);
}

/** The rejection of a cancelled wait: a DOMException named AbortError, as fetch() gives. */
function abortError(what, signal) {
  return new DOMException(`${what} was aborted`, { name: 'AbortError', cause: signal?.reason });
}

module.exports = {
  DlockError, BadRequestError, KindError, NotHeldError, LimitError, DeniedError, BackendError,
  ClosedError, ProtocolError, ConnectError, LockLostError, errorFromReply, abortError,
};
