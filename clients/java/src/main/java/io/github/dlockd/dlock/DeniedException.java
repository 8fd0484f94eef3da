// ERR DENIED: not allowed for this peer (FORCEUNLOCK needs an admin uid).
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** ERR DENIED: not allowed for this peer (FORCEUNLOCK needs an admin uid). */
public class DeniedException extends DlockException {
    private static final long serialVersionUID = 1L;

    public DeniedException(String message) {
        super("DENIED", message);
    }
}
