// The wire: one Unix socket, FIFO requests, one reader thread, CANCEL of the wait in flight.
// SPDX-License-Identifier: MIT
package dlock;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Requests are written in FIFO order and replies matched FIFO. While a request that may
 * wait is in flight nothing is written behind it (dlockd would not read it anyway), so
 * that {@code CANCEL} can always be its very next line. Callbacks run on the reader
 * thread, in wire order, outside the lock; they must not block. One writer thread writes.
 */
final class Conn {
    /** One request line and what to do with its reply. */
    static final class Request {
        final String line;
        final boolean waits;
        /** The line releasing what this request grants ({@code OK …} reply), or null. */
        final Function<String, String> release;
        /** Called once with the reply line (OK or TIMEOUT) or the error; not when cancelled. */
        final BiConsumer<String, Throwable> onReply;
        /** Completed once the wire is done with the request (and any release of a cancelled grant). */
        final CompletableFuture<Void> settled = new CompletableFuture<>();
        boolean written;
        boolean cancelled;

        Request(String line, boolean waits, Function<String, String> release,
                BiConsumer<String, Throwable> onReply) {
            this.line = line;
            this.waits = waits;
            this.release = release;
            this.onReply = onReply;
        }
    }

    private final SocketChannel ch;
    private final Consumer<String> onEvent;
    private final Consumer<Throwable> onClose;
    private final Object lock = new Object();
    private final ArrayDeque<Request> inflight = new ArrayDeque<>();
    private final ArrayDeque<Request> pending = new ArrayDeque<>();
    private boolean blocked;
    private ConnectionClosedException closed;
    private final LinkedBlockingQueue<String> outbox = new LinkedBlockingQueue<>();
    private static final String STOP = new String("");  // compared by identity

    Conn(SocketChannel ch, Consumer<String> onEvent, Consumer<Throwable> onClose) {
        this.ch = ch;
        this.onEvent = onEvent;
        this.onClose = onClose;
        Thread t = new Thread(this::readLoop, "dlock-reader");
        t.setDaemon(true);
        t.start();
        Thread w = new Thread(this::writeLoop, "dlock-writer");
        w.setDaemon(true);
        w.start();
    }

    boolean isClosed() {
        synchronized (lock) {
            return closed != null;
        }
    }

    /** Queues a request; {@code onReply} is called later on the reader thread (or now, if closed). */
    Request send(String line, boolean waits, Function<String, String> release,
                 BiConsumer<String, Throwable> onReply) {
        Request r = new Request(line, waits, release, onReply);
        ConnectionClosedException err;
        synchronized (lock) {
            err = closed;
            if (err == null) {
                pending.add(r);
                flush();
                return r;
            }
        }
        r.onReply.accept(null, new ConnectionClosedException(err.getMessage()));
        r.settled.complete(null);
        return r;
    }

    /**
     * Withdraws a request: dropped if still queued here, {@code CANCEL} written if it is the
     * wait in flight, else abandoned (a grant is released when it comes). Returns false
     * when its reply was already handed to its callback; then nothing changes.
     */
    boolean cancel(Request r) {
        boolean dropped;
        synchronized (lock) {
            if (r.cancelled)
                return true;
            if (!r.written) {
                if (!pending.remove(r))
                    return false;
                dropped = true;
            } else {
                if (!inflight.contains(r))
                    return false;
                dropped = false;
                if (r.waits && inflight.peekLast() == r) {
                    Request c = new Request("CANCEL", false, null, (l, e) -> { });
                    inflight.add(c);
                    c.written = true;
                    write(c.line);
                }
            }
            r.cancelled = true;
        }
        if (dropped)
            r.settled.complete(null);
        return true;
    }

    /** Closes the connection: pending requests fail at once. */
    void close(String why) {
        fail(new ConnectionClosedException(why));
    }

    /** Writes what may go now; caller holds the lock. */
    private void flush() {
        while (!blocked && closed == null && !pending.isEmpty()) {
            Request r = pending.poll();
            r.written = true;
            inflight.add(r);
            if (r.waits)
                blocked = true;
            write(r.line);
        }
    }

    /** Hands a line to the writer thread; caller holds the lock, so lines keep their order. */
    private void write(String line) {
        outbox.add(line);
    }

    /**
     * Writes queued lines. The channel is written by this thread only, because a
     * SocketChannel closes when a thread doing I/O on it is interrupted, and the callers'
     * threads are interrupted to cancel their waits.
     */
    private void writeLoop() {
        StringBuilder sb = new StringBuilder();
        try {
            while (true) {
                String line = outbox.take();
                do {
                    if (line == STOP)
                        return;
                    sb.append(line).append('\n');
                } while ((line = outbox.poll()) != null);
                ByteBuffer b = ByteBuffer.wrap(sb.toString().getBytes(StandardCharsets.US_ASCII));
                sb.setLength(0);
                while (b.hasRemaining())
                    ch.write(b);
            }
        } catch (IOException | InterruptedException e) {
            // The reader sees the broken socket too, and fails what is pending.
            try {
                ch.close();
            } catch (IOException ignored) {
                // closing anyway
            }
        }
    }

    private void readLoop() {
        ByteBuffer buf = ByteBuffer.allocate(8192);
        StringBuilder line = new StringBuilder();
        String why = "dlockd closed the connection";
        try {
            while (ch.read(buf) >= 0) {
                buf.flip();
                while (buf.hasRemaining()) {
                    char c = (char) (buf.get() & 0xff);
                    if (c == '\n') {
                        take(line.toString());
                        line.setLength(0);
                    } else if (c != '\r') {
                        line.append(c);
                    }
                }
                buf.clear();
            }
        } catch (IOException e) {
            why = "connection to dlockd lost: " + e.getMessage();
        } catch (RuntimeException e) {
            why = "dlock client failed: " + e;
        }
        fail(new ConnectionClosedException(why));
    }

    /** A counted reply being read (LIST): its lines so far, and how many are still to come. */
    private final StringBuilder counted = new StringBuilder();
    private int countedLeft;

    /**
     * Hands a line to {@link #dispatch}, except that a counted reply ({@code OK LIST <n>
     * <more>} and exactly n {@code = …} lines, no event between) goes as one reply, its
     * lines joined by LF.
     */
    private void take(String line) {
        if (countedLeft > 0) {
            if (!line.startsWith("= "))
                throw new IllegalStateException("LIST entry expected: " + line);
            counted.append('\n').append(line);
            if (--countedLeft == 0) {
                String reply = counted.toString();
                counted.setLength(0);
                dispatch(reply);
            }
            return;
        }
        if (line.startsWith("OK LIST ")) {
            int n = Listing.count(line);
            if (n < 0)
                throw new IllegalStateException("bad LIST header: " + line);
            if (n > 0) {
                counted.append(line);
                countedLeft = n;
                return;
            }
        }
        dispatch(line);
    }

    private void dispatch(String line) {
        if (line.startsWith("!")) {
            onEvent.accept(line);
            return;
        }
        List<Runnable> after = new ArrayList<>();
        synchronized (lock) {
            Request r = inflight.poll();
            if (r == null)
                throw new IllegalStateException("reply with no request: " + line);
            if (r.cancelled) {
                Request rel = null;
                if (line.startsWith("OK") && r.release != null) {
                    // The grant raced the cancel: give it back, ahead of everything queued.
                    rel = new Request(r.release.apply(line), false, null, (l, e) -> { });
                    pending.addFirst(rel);
                    rel.settled.whenComplete((v, e) -> r.settled.complete(null));
                } else {
                    after.add(() -> r.settled.complete(null));
                }
            } else {
                Throwable err = line.startsWith("ERR") ? DlockException.fromReply(line)
                        : line.startsWith("OK") || line.startsWith("TIMEOUT") ? null
                        : new ProtocolException(null, "unexpected reply: " + line);
                after.add(() -> {
                    try {
                        r.onReply.accept(err == null ? line : null, err);
                    } finally {
                        r.settled.complete(null);
                    }
                });
            }
            if (r.waits)
                blocked = false;
            flush();
        }
        after.forEach(Runnable::run);
    }

    private void fail(ConnectionClosedException why) {
        List<Request> dead = new ArrayList<>();
        synchronized (lock) {
            if (closed != null)
                return;
            closed = why;
            dead.addAll(inflight);
            dead.addAll(pending);
            inflight.clear();
            pending.clear();
        }
        outbox.add(STOP);
        try {
            ch.close();
        } catch (IOException ignored) {
            // already gone
        }
        for (Request r : dead) {
            if (!r.cancelled)
                r.onReply.accept(null, new ConnectionClosedException(why.getMessage()));
            r.settled.complete(null);
        }
        onClose.accept(why);
    }
}
