// A pending grant as a CompletableFuture whose cancel() withdraws the wait.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.function.Supplier;

/**
 * The future a waiting call returns. {@link #cancel} withdraws the stage the call is in
 * (its place in a local gate, its request queued here, or its wait in dlockd, by
 * {@code CANCEL}); {@link #settled} completes once nothing of it is left on the wire or
 * held. Results are delivered on the client's callback executor, never on the reader.
 */
final class Op<T> extends CompletableFuture<T> {
    final CompletableFuture<Void> settled = new CompletableFuture<>();
    private final Executor executor;
    private Supplier<CompletableFuture<Void>> stage;
    private boolean cancelled;

    Op(Executor executor) {
        this.executor = executor;
    }

    /**
     * The current stage's withdrawal: it returns what completes when the withdrawal is
     * done, or null when too late (the stage's own continuation then settles).
     */
    void stage(Supplier<CompletableFuture<Void>> withdraw) {
        boolean now;
        synchronized (this) {
            stage = withdraw;
            now = cancelled;
        }
        if (now)
            withdraw(withdraw);
    }

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
        if (!super.cancel(mayInterruptIfRunning))
            return false;
        Supplier<CompletableFuture<Void>> s;
        synchronized (this) {
            cancelled = true;
            s = stage;
        }
        withdraw(s);
        // As a cancelled blocking call does, return once nothing of it is left: a
        // grant that raced the CANCEL is released first, so that this client's next
        // request (sent at once, tagged, not queued behind the release) finds the name
        // free. Its answers come on the reader thread, which must not wait for them.
        if (!Thread.currentThread().getName().equals(Conn.READER_THREAD))
            settled.join();
        return true;
    }

    private void withdraw(Supplier<CompletableFuture<Void>> s) {
        CompletableFuture<Void> f = s == null ? null : s.get();
        if (f != null)
            f.whenComplete((v, e) -> settle());
    }

    void settle() {
        settled.complete(null);
    }

    /** Completes on the executor; {@code ifLate} runs there when the op was cancelled first. */
    void finish(T value, Runnable ifLate) {
        executor.execute(() -> {
            try {
                if (!complete(value) && ifLate != null)
                    ifLate.run();
            } finally {
                settle();
            }
        });
    }

    void fail(Throwable e) {
        executor.execute(() -> {
            completeExceptionally(e);
            settle();
        });
    }
}
