// The loss of a held lock: what a handle's loss signal carries.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/**
 * dlockd can no longer vouch for a lock this client held. {@link #reason()} is
 * {@code expired} (the lease ran out), {@code forced} (someone ran FORCEUNLOCK),
 * {@code backend} (Redis was unreachable too long) or {@code closed} (the connection
 * ended: dlockd died or the client was closed). It is what
 * {@link DlockLock#lost()} completes with, and what a lost handle's calls throw.
 */
public class LockLostException extends NotHeldException {
    private static final long serialVersionUID = 1L;
    private final String name;
    private final String reason;

    public LockLostException(String name, String reason) {
        super("lock " + name + " lost: " + reason);
        this.name = name;
        this.reason = reason;
    }

    /** The lock's name. */
    public String name() {
        return name;
    }

    /** {@code expired}, {@code forced}, {@code backend} or {@code closed}. */
    public String reason() {
        return reason;
    }
}
