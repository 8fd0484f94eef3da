// The kinds of holds the client takes, with their verbs and local-gate mode.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/** What a grant is: its verbs on the wire and how it passes the local gate. */
enum Kind {
    PLAIN("LOCK", "TRYLOCK", "UNLOCK", true, false),
    FAIR("FAIRLOCK", "TRYFAIRLOCK", "UNLOCK", true, false),
    READ("RLOCK", "TRYRLOCK", "RUNLOCK", true, true),
    WRITE("WLOCK", "TRYWLOCK", "WUNLOCK", true, false),
    SEM("ACQUIRE", "TRYACQUIRE", "RELEASE", false, false);

    final String take;
    final String tryTake;
    final String give;
    final boolean gated;
    final boolean shared;

    Kind(String take, String tryTake, String give, boolean gated, boolean shared) {
        this.take = take;
        this.tryTake = tryTake;
        this.give = give;
        this.gated = gated;
        this.shared = shared;
    }

    /** The request line: {@code waitMs < 0} waits as long as it takes. */
    String line(String name, int permits, long waitMs, long leaseMs) {
        String p = this == SEM ? " " + permits : "";
        return waitMs < 0 ? take + " " + name + p + " " + leaseMs
                : tryTake + " " + name + p + " " + waitMs + " " + leaseMs;
    }

    /** The line giving back one grant of this kind. */
    String release(String name, int permits) {
        return give + " " + name + (this == SEM ? " " + permits : "");
    }
}
