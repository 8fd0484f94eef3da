// The client could not connect to dlockd's socket.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.nio.file.Path;

/**
 * The client could not connect. The message names the socket and hints, as the C and
 * Python clients do: {@code cannot connect to dlockd at <path>: <error> (is dlockd running?)}.
 */
public class DlockConnectException extends DlockException {
    private static final long serialVersionUID = 1L;
    private final transient Path path;

    public DlockConnectException(Path path, String error, Throwable cause) {
        super(null, "cannot connect to dlockd at " + path + ": " + error + hint(error), cause);
        this.path = path;
    }

    /** The socket path the client tried. */
    public Path path() {
        return path;
    }

    private static String hint(String error) {
        String e = error == null ? "" : error.toLowerCase(java.util.Locale.ROOT);
        if (e.contains("no such file") || e.contains("connection refused"))
            return " (is dlockd running?)";
        if (e.contains("permission denied"))
            return " (add yourself to the dlockd group, or check socket_mode)";
        return "";
    }
}
