// What DlockLock and DlockPermits share: the name, the client, and the loss signal.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/** A grant this client holds, until fully released or lost. */
abstract class Handle {
    final DlockClient client;
    final String name;
    private final CompletableFuture<LockLostException> lost = new CompletableFuture<>();
    /** Set once: released fully, or lost. Guarded by this. */
    boolean over;
    /** The loss, once lost. Guarded by this. */
    LockLostException loss;

    Handle(DlockClient client, String name) {
        this.client = client;
        this.name = name;
    }

    /** The lock's (or semaphore's) name. */
    public String name() {
        return name;
    }

    /**
     * A future completed with the loss when dlockd can no longer vouch for this grant
     * (reason {@code expired}, {@code forced}, {@code backend} or {@code closed}); never
     * completed if the grant is released first. Dependent stages run on the client's
     * callback threads, not on its reader.
     */
    public CompletableFuture<LockLostException> lost() {
        return lost.copy();
    }

    /** Calls {@code callback} on a callback thread when this grant is lost (see {@link #lost()}). */
    public void onLost(Consumer<LockLostException> callback) {
        lost.thenAccept(callback);
    }

    /** Whether this grant was lost. */
    public synchronized boolean isLost() {
        return loss != null;
    }

    /** Throws the loss if lost, or NotHeldException if released; caller holds this. */
    void checkLive() {
        if (loss != null)
            throw new LockLostException(name, loss.reason());
        if (over)
            throw new NotHeldException(name + ": this handle was released");
    }

    /** dlockd said the connection lost it (or the connection ended): signal it. */
    void markLost(String reason) {
        LockLostException e;
        synchronized (this) {
            if (over)
                return;
            over = true;
            e = loss = new LockLostException(name, reason);
        }
        ended();
        client.callbacks().execute(() -> lost.complete(e));
    }

    /** Marks it released (no more holds); false if it was over already. */
    boolean markReleased() {
        synchronized (this) {
            if (over)
                return false;
            over = true;
        }
        client.unregister(this);
        ended();
        return true;
    }

    /** What happens once the grant is over: pass the local gate on. */
    abstract void ended();
}
