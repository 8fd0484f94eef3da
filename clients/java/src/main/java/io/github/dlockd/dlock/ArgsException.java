// A bad number or argument: ERR ARGS, or the client's own check.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** A bad number or argument: ERR ARGS, or the client's own check. */
public class ArgsException extends DlockException {
    private static final long serialVersionUID = 1L;

    public ArgsException(String message) {
        super("ARGS", message);
    }
}
