// Several plain locks granted together (MLOCK/TRYMLOCK): fences, unlock of the set (MUNLOCK), loss of any name.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * A set of plain locks this client holds, granted all at once by
 * {@link DlockClient#multiLock}: dlockd never gave it part of the set, and it held none of
 * the set while it waited, so two callers asking for the same names in different orders
 * cannot deadlock. {@link #close()} releases the whole set, so try-with-resources always
 * releases:
 * <pre>{@code
 * try (DlockMultiLock m = client.multiLock(List.of("acct-17", "acct-42"))) {
 *     m.onLost(e -> worker.cancel(true));
 *     transfer(m.fence("acct-17"), m.fence("acct-42"));
 * }
 * }</pre>
 * Each name is an ordinary plain lock hold of the connection. When one name is lost
 * ({@code expired}, {@code forced}, {@code backend} or {@code closed}) the set is no longer
 * all held: {@link #lost()} completes (once, with the first loss); the other names stay
 * held until {@link #unlock()} or {@link #close()}.
 */
public final class DlockMultiLock implements AutoCloseable {
    /** One name of the set: registered for its !LOST, holding its local gate slot. */
    static final class Part extends Handle {
        private final DlockMultiLock set;
        /** The caller's own lock of the name this part reentered, or null. */
        private final DlockLock pinned;
        /** Whether it passed the name's gate itself (not a reentry). */
        private final boolean gated;

        Part(DlockClient client, String name, DlockMultiLock set, DlockLock pinned, boolean gated) {
            super(client, name);
            this.set = set;
            this.pinned = pinned;
            this.gated = gated;
        }

        @Override
        void markLost(String reason) {
            super.markLost(reason);
            set.partLost(name, reason);
        }

        synchronized boolean live() {
            return !over;
        }

        @Override
        void ended() {
            if (pinned != null)
                pinned.unpin();
            else if (gated)
                client.leaveGate(Kind.PLAIN, name);
        }
    }

    private final DlockClient client;
    private final List<String> names;
    private final long[] fences;
    final List<Part> parts = new ArrayList<>();
    private final CompletableFuture<LockLostException> lost = new CompletableFuture<>();
    /** Guarded by this. */
    private LockLostException loss;
    private boolean released;

    DlockMultiLock(DlockClient client, List<String> names, long[] fences) {
        this.client = client;
        this.names = List.copyOf(names);
        this.fences = fences;
    }

    /** The set's names, in the order they were asked for. */
    public List<String> names() {
        return names;
    }

    /** The grant's fences, one per name in the order of {@link #names()}. */
    public long[] fences() {
        return fences.clone();
    }

    /** The fence of one name of the set; {@link IllegalArgumentException} if not in it. */
    public long fence(String name) {
        int i = names.indexOf(name);
        if (i < 0)
            throw new IllegalArgumentException(name + " is not in this set");
        return fences[i];
    }

    /**
     * A future completed with the first name's loss, when the set stops being all held;
     * never completed if the set is released first. Dependent stages run on the client's
     * callback threads.
     */
    public CompletableFuture<LockLostException> lost() {
        return lost.copy();
    }

    /** Calls {@code callback} on a callback thread when a name of the set is lost. */
    public void onLost(Consumer<LockLostException> callback) {
        lost.thenAccept(callback);
    }

    /** Whether a name of the set was lost. */
    public synchronized boolean isLost() {
        return loss != null;
    }

    private void partLost(String name, String reason) {
        LockLostException e;
        synchronized (this) {
            if (loss != null || released)
                return;
            e = loss = new LockLostException(name, reason);
        }
        client.callbacks().execute(() -> lost.complete(e));
    }

    /**
     * Releases the set ({@code MUNLOCK} of every name still held) and lets this client's next
     * local waiters for its names go. Returns the connection's holds of each name left (0,
     * or the holds of a lock the set reentered). Throws {@link LockLostException} if a name
     * had been lost (the others are released all the same), {@link NotHeldException} if the
     * set was released already.
     */
    public int[] unlock() {
        List<Part> todo = new ArrayList<>();
        synchronized (this) {
            if (released) {
                if (loss != null)
                    throw new LockLostException(loss.name(), loss.reason());
                throw new NotHeldException("the set " + String.join(",", names) + " was released");
            }
            released = true;
        }
        for (Part p : parts)
            if (p.live())
                todo.add(p);
        int[] left = new int[names.size()];
        RuntimeException err = null;
        while (!todo.isEmpty()) { // a name dlockd lost before telling: release the others
            List<Part> sent = todo;
            try {
                int[] got = client.call(DlockClient.multiLine("MUNLOCK", namesOf(sent)), reply -> {
                    String[] w = reply.split(" ");
                    int[] g = new int[w.length - 1];
                    for (int i = 1; i < w.length; i++)
                        g[i - 1] = Integer.parseInt(w[i]);
                    return g;
                });
                for (int i = 0; i < sent.size() && i < got.length; i++)
                    left[names.indexOf(sent.get(i).name)] = got[i];
                break;
            } catch (NotHeldException e) {
                if (err == null)
                    err = e;
                List<String> named = Arrays.asList(String.valueOf(e.getMessage()).split("[ :]"));
                todo = new ArrayList<>();
                for (Part p : sent)
                    if (!named.contains(p.name))
                        todo.add(p);
                if (todo.size() == sent.size())
                    break;
            } catch (DlockException e) {
                err = e;
                break;
            }
        }
        for (Part p : parts)
            p.markReleased();
        synchronized (this) {
            if (loss != null)
                throw new LockLostException(loss.name(), loss.reason());
        }
        if (err != null)
            throw err;
        return left;
    }

    private static List<String> namesOf(List<Part> ps) {
        List<String> n = new ArrayList<>();
        for (Part p : ps)
            n.add(p.name);
        return n;
    }

    /** Releases the set; nothing if released already or if the connection is gone. */
    @Override
    public void close() {
        try {
            unlock();
        } catch (ConnectionClosedException | NotHeldException e) {
            // lost (the rest was released), gone with the connection, or released before
        }
    }

    @Override
    public String toString() {
        return "DlockMultiLock[" + names + " fences=" + Arrays.toString(fences) + "]";
    }
}
