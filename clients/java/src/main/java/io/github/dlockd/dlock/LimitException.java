// ERR LIMIT: a limit of the daemon (max_clients, max_locks_per_client, max_waiters, permits) was reached.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** ERR LIMIT: a limit of the daemon (max_clients, max_locks_per_client, max_waiters, permits) was reached. */
public class LimitException extends DlockException {
    private static final long serialVersionUID = 1L;

    public LimitException(String message) {
        super("LIMIT", message);
    }
}
