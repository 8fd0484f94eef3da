// An observation of an election: the leader now, then every change, to a callback; close() unobserves.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * What {@link DlockClient#observe} returns. Its callback gets the leader at the time of
 * {@code observe} first, then every change in the order dlockd told them (fences rise
 * strictly; a leader is told again only after a NONE), one at a time on the client's
 * callback threads. {@link #close()} stops it ({@code UNOBSERVE} once no other observation
 * of the name on this client is left); no callback starts after it returns.
 */
public final class Observation implements AutoCloseable {
    private final DlockClient client;
    private final String name;
    private final Consumer<LeaderChange> onChange;
    private final CompletableFuture<Void> done = new CompletableFuture<>();
    private final ArrayDeque<LeaderChange> queue = new ArrayDeque<>();
    private boolean draining;
    private Thread deliverer;
    private boolean ended;

    Observation(DlockClient client, String name, Consumer<LeaderChange> onChange) {
        this.client = client;
        this.name = name;
        this.onChange = onChange;
    }

    /** The observed name. */
    public String name() {
        return name;
    }

    /**
     * Completes when the observation ends: normally after {@link #close()}, exceptionally
     * with {@link ConnectionClosedException} when the connection ended.
     */
    public CompletableFuture<Void> done() {
        return done.copy();
    }

    /** Whether the observation ended (closed, or the connection ended). */
    public synchronized boolean isClosed() {
        return ended;
    }

    /** Queues a change for the callback; called on the reader thread, in wire order. */
    void push(LeaderChange change) {
        synchronized (this) {
            if (ended)
                return;
            queue.add(change);
            if (draining)
                return;
            draining = true;
        }
        client.callbacks().execute(this::drain);
    }

    private void drain() {
        while (true) {
            LeaderChange c;
            synchronized (this) {
                c = ended ? null : queue.poll();
                if (c == null) {
                    draining = false;
                    return;
                }
                deliverer = Thread.currentThread();
            }
            try {
                onChange.accept(c);
            } catch (RuntimeException e) {
                Thread t = Thread.currentThread();
                t.getUncaughtExceptionHandler().uncaughtException(t, e);
            } finally {
                synchronized (this) {
                    deliverer = null;
                    notifyAll();
                }
            }
        }
    }

    /**
     * Ends it locally: true the first time. A close ({@code why} null) waits for a callback
     * running on another thread, so that none runs after it.
     */
    boolean end(Throwable why) {
        boolean first;
        boolean interrupted = false;
        synchronized (this) {
            first = !ended;
            ended = true;
            queue.clear();
            while (why == null && deliverer != null && deliverer != Thread.currentThread()) {
                try {
                    wait();
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        }
        if (interrupted)
            Thread.currentThread().interrupt();
        if (first) {
            if (why == null)
                done.complete(null);
            else
                done.completeExceptionally(why);
        }
        return first;
    }

    /** Stops the observation; calling it again does nothing. It does not wait for dlockd. */
    @Override
    public void close() {
        if (end(null))
            client.unobserve(this);
    }

    @Override
    public String toString() {
        return "Observation[" + name + (isClosed() ? " closed" : "") + "]";
    }
}
