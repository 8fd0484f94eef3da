// ERR CANCELLED: a wait was withdrawn by CANCEL. Blocking calls report it as InterruptedException and futures as CancellationException; this is seen only when the daemon cancels on its own.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** ERR CANCELLED: a wait was withdrawn by CANCEL. Blocking calls report it as InterruptedException and futures as CancellationException; this is seen only when the daemon cancels on its own. */
public class CancelledException extends DlockException {
    private static final long serialVersionUID = 1L;

    public CancelledException(String message) {
        super("CANCELLED", message);
    }
}
