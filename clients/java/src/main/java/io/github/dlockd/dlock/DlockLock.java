// A held lock (plain, fair, read or write): fence, holds, unlock, reentry, renew, loss.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.time.Duration;

/**
 * A lock this client holds. {@link #close()} releases every hold of it, so
 * try-with-resources always releases:
 * <pre>{@code
 * try (DlockLock l = client.lock("orders")) {
 *     store.write(data, l.fence());
 * }
 * }</pre>
 * The owner is the client's connection, not a thread: any thread may unlock it.
 * Watch {@link #lost()} or {@link #onLost} to learn when the lock is gone under you.
 */
public final class DlockLock extends Handle implements AutoCloseable {
    final Kind kind;
    private final long leaseMs;
    private final long fence;
    private int holds = 1;
    /** Multi-lock parts that reentered this lock and hold its gate slot with it. Guarded by this. */
    private int pins;
    private boolean gateLeft;

    DlockLock(DlockClient client, Kind kind, String name, long leaseMs, long fence) {
        super(client, name);
        this.kind = kind;
        this.leaseMs = leaseMs;
        this.fence = fence;
    }

    /** The fencing token of this grant: it rises strictly with every new grant of the name. */
    public long fence() {
        return fence;
    }

    /** The holds of this handle (1 after the grant, one more per {@link #relock()}); 0 once released. */
    public synchronized int holds() {
        return over ? 0 : holds;
    }

    /**
     * Takes the lock again through this handle (reentry): the same fence, one hold more.
     * Returns the holds. Never waits: it throws {@link NotHeldException} (a
     * {@link LockLostException} if lost) when the lock is no longer held.
     */
    public int relock() {
        synchronized (this) {
            checkLive();
        }
        return client.call(kind.line(name, 0, 0, leaseMs), reply -> {
            if (reply.startsWith("TIMEOUT"))
                throw new NotHeldException(name + " is no longer held");
            synchronized (this) {
                return ++holds;
            }
        });
    }

    /**
     * One hold less; the last releases the lock (and lets this client's next local waiter
     * for the name go). Returns the holds left. Throws {@link LockLostException} when lost.
     */
    public int unlock() {
        int left;
        synchronized (this) {
            checkLive();
            left = --holds;
        }
        try {
            client.call(kind.release(name, 0), reply -> {
                if (left == 0)
                    markReleased();
                return null;
            });
        } catch (DlockException e) {
            synchronized (this) {
                holds++;
                if (loss != null)
                    throw new LockLostException(name, loss.reason());
            }
            throw e;
        }
        return left;
    }

    /**
     * Renews the lease: with a lease, resets it to {@code lease} (null: its own lease);
     * a watchdog lock is renewed as the watchdog would. Returns the new TTL.
     */
    public Duration renew(Duration lease) {
        synchronized (this) {
            checkLive();
        }
        String line = "RENEW " + name + (lease == null ? "" : " " + DlockClient.millis(lease, "lease"));
        return client.call(line, reply -> Duration.ofMillis(Long.parseLong(reply.split(" ")[1])));
    }

    /** Releases every hold; nothing if released or lost already (the loss is in {@link #lost()}). */
    @Override
    public void close() {
        while (true) {
            synchronized (this) {
                if (over || holds <= 0)
                    return;
            }
            try {
                unlock();
            } catch (LockLostException | ConnectionClosedException e) {
                return;
            }
        }
    }

    /** A multi-lock reenters this lock: the gate slot stays until both let go. */
    synchronized boolean pin() {
        if (over)
            return false;
        pins++;
        return true;
    }

    void unpin() {
        boolean leave;
        synchronized (this) {
            pins--;
            leave = over && pins == 0 && !gateLeft;
            gateLeft |= leave;
        }
        if (leave)
            client.leaveGate(kind, name);
    }

    @Override
    void ended() {
        boolean leave;
        synchronized (this) {
            leave = pins == 0 && !gateLeft;
            gateLeft |= leave;
        }
        if (leave)
            client.leaveGate(kind, name);
    }

    @Override
    public String toString() {
        return "DlockLock[" + kind.take + " " + name + " fence=" + fence + " holds=" + holds() + "]";
    }
}
