// ERR NOTHELD: this connection does not hold the lock (or fewer permits).
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** ERR NOTHELD: this connection does not hold that lock, or holds fewer permits of it. */
public class NotHeldException extends DlockException {
    private static final long serialVersionUID = 1L;

    public NotHeldException(String message) {
        super("NOTHELD", message);
    }
}
