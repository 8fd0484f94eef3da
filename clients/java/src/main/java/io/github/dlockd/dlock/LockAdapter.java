// A name as a java.util.concurrent.locks.Lock (watchdog mode, owned by the connection).
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * {@link DlockClient#asLock}: the owner is the client's connection, not a thread, so any
 * thread may unlock; not reentrant; no conditions.
 */
final class LockAdapter implements Lock {
    private final DlockClient client;
    private final String name;
    private volatile DlockLock held;

    LockAdapter(DlockClient client, String name) {
        this.client = client;
        this.name = name;
    }

    @Override
    public void lock() {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    lockInterruptibly();
                    return;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted)
                Thread.currentThread().interrupt();
        }
    }

    @Override
    public void lockInterruptibly() throws InterruptedException {
        held = client.lock(name);
    }

    @Override
    public boolean tryLock() {
        try {
            return got(client.tryLock(name, Duration.ZERO));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        return got(client.tryLock(name, Duration.ofNanos(Math.max(0, unit.toNanos(time)))));
    }

    private boolean got(Optional<DlockLock> l) {
        l.ifPresent(h -> held = h);
        return l.isPresent();
    }

    /** Releases the lock, whichever thread took it; IllegalMonitorStateException if not locked. */
    @Override
    public void unlock() {
        DlockLock h;
        synchronized (this) {
            h = held;
            held = null;
        }
        if (h == null)
            throw new IllegalMonitorStateException(name + " is not locked through this Lock");
        h.close();
    }

    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("dlock: no conditions");
    }

    @Override
    public String toString() {
        return "dlock.Lock[" + name + (held != null ? " locked]" : "]");
    }
}
