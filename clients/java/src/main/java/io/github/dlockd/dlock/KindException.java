// ERR KIND: the name is another kind of lock (or a read hold asked to upgrade).
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** ERR KIND: the name is another kind of lock (or a read hold asked to upgrade). */
public class KindException extends DlockException {
    private static final long serialVersionUID = 1L;

    public KindException(String message) {
        super("KIND", message);
    }
}
