// dlockd-client: the Node.js client of dlockd, the per-host lock-manager daemon.
// SPDX-License-Identifier: MIT

export { connect, Client } from './lib/client.js';
export { LockHandle, PermitsHandle } from './lib/handles.js';
export { Leadership, Observation } from './lib/election.js';
export { MultiLockHandle, MNAMES_MAX } from './lib/multi.js';
export {
  DlockError, BadRequestError, KindError, NotHeldError, LimitError, DeniedError,
  BackendError, ClosedError, ConnectError, LockLostError, ProtocolError,
} from './lib/errors.js';
export { DEFAULT_SOCKET, NAME_MAX, NUM_MAX, PERMITS_MAX, checkName } from './lib/proto.js';
