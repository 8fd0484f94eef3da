// Permits of a semaphore this client acquired: release(n), close(), loss.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

/**
 * Permits this client took of a semaphore. Permits add up per connection:
 * {@link #held()} is the connection's total after this acquire; this handle releases
 * what it acquired ({@link #permits()}). {@link #close()} releases the rest.
 */
public final class DlockPermits extends Handle implements AutoCloseable {
    private int permits;
    private int held;

    DlockPermits(DlockClient client, String name, int permits, int held) {
        super(client, name);
        this.permits = permits;
        this.held = held;
    }

    /** The permits this handle still holds. */
    public synchronized int permits() {
        return over ? 0 : permits;
    }

    /** The permits the connection held of the semaphore at this handle's last call. */
    public synchronized int held() {
        return held;
    }

    /** Gives {@code n} of this handle's permits back; returns the connection's permits still held. */
    public int release(int n) {
        synchronized (this) {
            checkLive();
            if (n < 1 || n > permits)
                throw new ArgsException("this handle holds " + permits + " permits of " + name);
            permits -= n;
        }
        try {
            return client.call(Kind.SEM.release(name, n), reply -> {
                int still = Integer.parseInt(reply.split(" ")[1]);
                synchronized (this) {
                    held = still;
                    if (permits == 0)
                        markReleased();
                }
                return still;
            });
        } catch (DlockException e) {
            synchronized (this) {
                permits += n;
                if (loss != null)
                    throw new LockLostException(name, loss.reason());
            }
            throw e;
        }
    }

    /** Releases what is left; nothing if released or lost already. */
    @Override
    public void close() {
        int n;
        synchronized (this) {
            if (over || permits == 0)
                return;
            n = permits;
        }
        try {
            release(n);
        } catch (LockLostException | ConnectionClosedException e) {
            // gone with the connection or lost: nothing to give back
        }
    }

    @Override
    void ended() {
        // semaphores have no local gate
    }

    @Override
    public String toString() {
        return "DlockPermits[" + name + " permits=" + permits() + "]";
    }
}
