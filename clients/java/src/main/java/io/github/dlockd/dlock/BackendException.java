// ERR BACKEND: Redis could not be reached or failed.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** ERR BACKEND: Redis could not be reached or failed. */
public class BackendException extends DlockException {
    private static final long serialVersionUID = 1L;

    public BackendException(String message) {
        super("BACKEND", message);
    }
}
