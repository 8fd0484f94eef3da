// The base of every error the dlockd Java client throws.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/**
 * An error from dlockd (an {@code ERR <CODE> <text>} reply) or from the client itself.
 * Unchecked, so that it passes through {@link java.util.concurrent.locks.Lock} and
 * {@link java.util.concurrent.CompletableFuture}. Each {@code ERR} code has its subclass;
 * {@link #code()} is that code, or {@code null} for the client's own errors.
 */
public class DlockException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final String code;

    public DlockException(String code, String message) {
        super(message);
        this.code = code;
    }

    public DlockException(String code, String message, Throwable cause) {
        super(message, cause);
        this.code = code;
    }

    /** The daemon's error code ({@code NAME}, {@code ARGS}, …) or {@code null}. */
    public String code() {
        return code;
    }

    /** The exception for an {@code ERR <CODE> <text>} reply line. */
    static DlockException fromReply(String line) {
        String rest = line.length() > 4 ? line.substring(4) : "";
        int sp = rest.indexOf(' ');
        String code = sp < 0 ? rest : rest.substring(0, sp);
        String text = sp < 0 ? code : rest.substring(sp + 1);
        switch (code) {
            case "NAME": return new NameException(text);
            case "ARGS": return new ArgsException(text);
            case "KIND": return new KindException(text);
            case "NOTHELD": return new NotHeldException(text);
            case "LIMIT": return new LimitException(text);
            case "DENIED": return new DeniedException(text);
            case "BACKEND": return new BackendException(text);
            case "CANCELLED": return new CancelledException(text);
            default: return new ProtocolException(code, line);
        }
    }
}
