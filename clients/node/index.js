// dlockd-client as an ES module: index.cjs's exports, the one implementation that require() gets too.
// SPDX-License-Identifier: MIT

import api from './index.cjs';

export const {
  connect, Client, LockHandle, PermitsHandle, Leadership, Observation, MultiLockHandle, MNAMES_MAX,
  DlockError, BadRequestError, KindError, NotHeldError, LimitError, DeniedError, BackendError,
  ClosedError, ConnectError, LockLostError, ProtocolError, DEFAULT_SOCKET, NAME_MAX, NUM_MAX,
  PERMITS_MAX, checkName,
} = api;
