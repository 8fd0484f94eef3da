// Local exclusion: per-name FIFO gates, so two tasks of one client never hold one name at once.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * dlockd's owner is the connection, and a lock it holds is reentrant for it; so the client
 * keeps its own tasks apart. Plain, fair and write locks pass a name's gate one at a
 * time; read locks share it. Waiters are served first come, first served (a reader behind
 * a waiting writer waits).
 */
final class Gates {
    /** A place in a gate's queue: completes true when it passes, false when withdrawn. */
    static final class Waiter extends CompletableFuture<Boolean> {
        final String name;
        final boolean shared;

        Waiter(String name, boolean shared) {
            this.name = name;
            this.shared = shared;
        }
    }

    private static final class Gate {
        int readers;
        boolean writer;
        final ArrayDeque<Waiter> queue = new ArrayDeque<>();
    }

    private final Map<String, Gate> gates = new HashMap<>();

    /** Joins the name's queue; the waiter is already complete when the gate was free. */
    Waiter enter(String name, boolean shared) {
        Waiter w = new Waiter(name, shared);
        boolean now;
        synchronized (this) {
            Gate g = gates.computeIfAbsent(name, n -> new Gate());
            now = g.queue.isEmpty() && !g.writer && (shared || g.readers == 0);
            if (now)
                take(g, w);
            else
                g.queue.add(w);
        }
        if (now)
            w.complete(true);
        return w;
    }

    /** Leaves the queue: true if it was still waiting (it completes false). */
    boolean withdraw(Waiter w) {
        List<Waiter> next;
        synchronized (this) {
            Gate g = gates.get(w.name);
            if (g == null || !g.queue.remove(w))
                return false;
            next = admit(w.name, g);
        }
        w.complete(false);
        next.forEach(n -> n.complete(true));
        return true;
    }

    /** Passes the gate on after a holder that went through it with {@code shared}. */
    void leave(String name, boolean shared) {
        List<Waiter> next;
        synchronized (this) {
            Gate g = gates.get(name);
            if (g == null)
                return;
            if (shared)
                g.readers--;
            else
                g.writer = false;
            next = admit(name, g);
        }
        next.forEach(n -> n.complete(true));
    }

    private static void take(Gate g, Waiter w) {
        if (w.shared)
            g.readers++;
        else
            g.writer = true;
    }

    private List<Waiter> admit(String name, Gate g) {
        List<Waiter> in = new ArrayList<>();
        while (!g.queue.isEmpty() && !g.writer) {
            Waiter w = g.queue.peek();
            if (!w.shared && g.readers > 0)
                break;
            g.queue.poll();
            take(g, w);
            in.add(w);
        }
        if (g.queue.isEmpty() && !g.writer && g.readers == 0)
            gates.remove(name);
        return in;
    }
}
