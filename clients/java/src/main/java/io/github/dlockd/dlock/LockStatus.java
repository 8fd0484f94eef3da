// STATUS, parsed: one record per answer the daemon gives.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/**
 * What {@link DlockClient#status} tells about a name, as the daemon's {@code STATUS}
 * reply does. Match on the record:
 * <pre>{@code
 * if (client.status("orders") instanceof LockStatus.Mine m) System.out.println(m.fence());
 * }</pre>
 * Each record's {@code toString()} gives the reply's words after {@code OK}, e.g. {@code MINE 1 29800 17}.
 */
public sealed interface LockStatus {
    /** Nobody holds it. */
    record Free() implements LockStatus {
        @Override public String toString() { return "FREE"; }
    }

    /** This connection holds it. */
    record Mine(int holds, long ttlMs, long fence) implements LockStatus {
        @Override public String toString() { return "MINE " + holds + " " + ttlMs + " " + fence; }
    }

    /** Someone else holds it. */
    record Taken(long ttlMs) implements LockStatus {
        @Override public String toString() { return "TAKEN " + ttlMs; }
    }

    /** A read/write lock held for reading: the owners reading, and this connection's read holds. */
    record Read(int readers, int mine, long ttlMs) implements LockStatus {
        @Override public String toString() { return "READ " + readers + " " + mine + " " + ttlMs; }
    }

    /** A read/write lock held for writing: this connection's write holds (0 if another's). */
    record Write(int mine, long ttlMs) implements LockStatus {
        @Override public String toString() { return "WRITE 1 " + mine + " " + ttlMs; }
    }

    /** A semaphore: the permits available, and those this connection holds. */
    record Sem(int available, int mine) implements LockStatus {
        @Override public String toString() { return "SEM " + available + " " + mine; }
    }

    /** Parses the words of an {@code OK …} STATUS reply (the first being {@code OK}). */
    static LockStatus parse(String reply) {
        String[] w = reply.split(" ");
        try {
            switch (w[1]) {
                case "FREE": return new Free();
                case "MINE": return new Mine(Integer.parseInt(w[2]), Long.parseLong(w[3]), Long.parseLong(w[4]));
                case "TAKEN": return new Taken(Long.parseLong(w[2]));
                case "READ": return new Read(Integer.parseInt(w[2]), Integer.parseInt(w[3]), Long.parseLong(w[4]));
                case "WRITE": return new Write(Integer.parseInt(w[3]), Long.parseLong(w[4]));
                case "SEM": return new Sem(Integer.parseInt(w[2]), Integer.parseInt(w[3]));
                default: break;
            }
        } catch (RuntimeException e) {
            // falls through to the error below
        }
        throw new ProtocolException(null, "unexpected STATUS reply: " + reply);
    }
}
