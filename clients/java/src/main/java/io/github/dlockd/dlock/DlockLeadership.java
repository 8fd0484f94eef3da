// Leadership of an election won by DlockClient.elect: fence, value, resign, renew, loss.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.time.Duration;

/**
 * Leadership of an election this client won. {@link #close()} resigns, so
 * try-with-resources always hands over:
 * <pre>{@code
 * try (DlockLeadership lead = client.elect("scheduler", "10.0.0.5:8080")) {
 *     lead.onLost(e -> worker.cancel(true));
 *     runScheduler(lead.fence());
 * }
 * }</pre>
 * It lasts until {@link #resign()}, until its lease runs out without {@link #renew}, or
 * until the connection ends; {@link #lost()} and {@link #onLost} tell a loss
 * ({@code expired}, {@code forced}, {@code backend} or {@code closed}).
 */
public final class DlockLeadership extends Handle implements AutoCloseable {
    private final String value;
    private final long fence;
    private boolean resigning;

    DlockLeadership(DlockClient client, String name, String value, long fence) {
        super(client, name);
        this.value = value;
        this.fence = fence;
    }

    /** The fence of this leadership: it rises from leader to leader of the name. */
    public long fence() {
        return fence;
    }

    /** The value this leader campaigned with (what observers are told). */
    public String value() {
        return value;
    }

    /** Whether this leadership still holds (neither resigned nor lost). */
    public synchronized boolean isLeading() {
        return !over && !resigning;
    }

    /**
     * Gives leadership up ({@code RESIGN}): the next candidate takes over at once. Returns
     * true if dlockd said this client led, false if it did not any more (resigned before,
     * or lost: see {@link #lost()}). Throws {@link ConnectionClosedException} when the
     * connection is gone (and the leadership with it).
     */
    public boolean resign() {
        synchronized (this) {
            if (over || resigning) {
                if (loss != null && loss.reason().equals("closed"))
                    throw new ConnectionClosedException("connection to dlockd closed");
                return false;
            }
            resigning = true;
        }
        return client.call("RESIGN " + name, reply -> {
            markReleased();
            return reply.equals("OK 1");
        });
    }

    /**
     * Renews the lease of a leadership won with one: it now ends {@code lease} from now
     * ({@code null}: its own lease). Returns the new TTL.
     */
    public Duration renew(Duration lease) {
        synchronized (this) {
            checkLive();
        }
        String line = "RENEW " + name + (lease == null ? "" : " " + DlockClient.millis(lease, "lease"));
        return client.call(line, reply -> Duration.ofMillis(Long.parseLong(reply.split(" ")[1])));
    }

    /** Resigns; nothing if resigned or lost already, or if the connection is gone. */
    @Override
    public void close() {
        try {
            resign();
        } catch (ConnectionClosedException e) {
            // gone with the connection
        }
    }

    @Override
    void ended() {
        client.leaveElectGate(name);
    }

    @Override
    public String toString() {
        return "DlockLeadership[" + name + " fence=" + fence + " value=" + value + "]";
    }
}
