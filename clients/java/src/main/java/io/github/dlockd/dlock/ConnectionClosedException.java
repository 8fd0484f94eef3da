// The connection to dlockd closed (dlockd died, or the client was closed) while a call was pending, or the client is closed.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** The connection to dlockd closed (dlockd died, or the client was closed) while a call was pending, or the client is closed. */
public class ConnectionClosedException extends DlockException {
    private static final long serialVersionUID = 1L;

    public ConnectionClosedException(String message) {
        super(null, message);
    }
}
