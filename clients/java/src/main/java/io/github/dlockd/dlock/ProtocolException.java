// A reply the client did not expect (ERR UNKNOWN, ERR TOOLONG, a malformed line).
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** A reply the client did not expect: {@code ERR UNKNOWN}, {@code ERR TOOLONG}, or a malformed line. */
public class ProtocolException extends DlockException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String code, String message) {
        super(code, message);
    }
}
