// An invalid lock name: ERR NAME, or the client's own check (1 to 255 bytes of 0x21 to 0x7E).
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** An invalid lock name: ERR NAME, or the client's own check (1 to 255 bytes of 0x21 to 0x7E). */
public class NameException extends DlockException {
    private static final long serialVersionUID = 1L;

    public NameException(String message) {
        super("NAME", message);
    }
}
