// dlockd-client: the Node.js client of dlockd, the per-host lock-manager daemon (CommonJS entry).
// SPDX-License-Identifier: MIT
'use strict';

// The client is CommonJS and index.js, the ES module entry, re-exports these:
// one implementation, so a program that both imports and require()s the
// package has one set of classes (instanceof holds), and require() needs no
// require(esm), which Node 20 before 20.19 has not.

const { connect, Client } = require('./lib/client.cjs');
const { LockHandle, PermitsHandle } = require('./lib/handles.cjs');
const { Leadership, Observation } = require('./lib/election.cjs');
const { MultiLockHandle, MNAMES_MAX } = require('./lib/multi.cjs');
const {
  DlockError, BadRequestError, KindError, NotHeldError, LimitError, DeniedError,
  BackendError, ClosedError, ConnectError, LockLostError, ProtocolError,
} = require('./lib/errors.cjs');
const { DEFAULT_SOCKET, NAME_MAX, NUM_MAX, PERMITS_MAX, checkName } = require('./lib/proto.cjs');

module.exports = {
  connect, Client, LockHandle, PermitsHandle, Leadership, Observation, MultiLockHandle, MNAMES_MAX,
  DlockError, BadRequestError, KindError, NotHeldError, LimitError, DeniedError, BackendError,
  ClosedError, ConnectError, LockLostError, ProtocolError, DEFAULT_SOCKET, NAME_MAX, NUM_MAX,
  PERMITS_MAX, checkName,
};
