// The wire: one Unix socket, every request tagged, one reader thread, CANCEL #tag.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Every request goes out at once with a tag of its own ({@code #<tag> LOCK x}), and dlockd
 * answers each when it is ready, its reply carrying the tag; so any number of threads wait
 * on one connection, each for its own answer. A wait is withdrawn with {@code CANCEL
 * #<tag>}. Callbacks run on the reader thread, outside the lock; they must not block. One
 * writer thread writes.
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
        String tag;
        boolean cancelled;

        Request(String line, boolean waits, Function<String, String> release,
                BiConsumer<String, Throwable> onReply) {
            this.line = line;
            this.waits = waits;
            this.release = release;
            this.onReply = onReply;
        }
    }

    /** The reader thread's name: callbacks never block it. */
    static final String READER_THREAD = "dlock-reader";

    private final SocketChannel ch;
    private final Consumer<String> onEvent;
    private final Consumer<Throwable> onClose;
    private final Object lock = new Object();
    /** Requests written and not answered yet, by tag. */
    private final Map<String, Request> inflight = new HashMap<>();
    private long nextTag;
    private ConnectionClosedException closed;
    private final LinkedBlockingQueue<String> outbox = new LinkedBlockingQueue<>();
    private static final String STOP = new String("");  // compared by identity

    Conn(SocketChannel ch, Consumer<String> onEvent, Consumer<Throwable> onClose) {
        this.ch = ch;
        this.onEvent = onEvent;
        this.onClose = onClose;
        Thread t = new Thread(this::readLoop, READER_THREAD);
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

    /** Sends a request; {@code onReply} is called later on the reader thread (or now, if closed). */
    Request send(String line, boolean waits, Function<String, String> release,
                 BiConsumer<String, Throwable> onReply) {
        Request r = new Request(line, waits, release, onReply);
        ConnectionClosedException err;
        synchronized (lock) {
            err = closed;
            if (err == null) {
                issue(r);
                return r;
            }
        }
        r.onReply.accept(null, new ConnectionClosedException(err.getMessage()));
        r.settled.complete(null);
        return r;
    }

    /** Tags r and hands it to the writer; caller holds the lock. A tag is a base-36 counter,
     * never one in flight (dlockd answers {@code ERR ARGS tag in use} to that). */
    private void issue(Request r) {
        r.tag = Long.toString(nextTag++, 36);
        inflight.put(r.tag, r);
        outbox.add("#" + r.tag + " " + r.line);
    }

    /**
     * Withdraws a request: {@code CANCEL #<tag>} if it may wait, else abandoned (its answer
     * comes; a grant is released when it comes). Returns false when its reply was already
     * handed to its callback; then nothing changes.
     */
    boolean cancel(Request r) {
        synchronized (lock) {
            if (r.cancelled)
                return true;
            if (r.tag == null || inflight.get(r.tag) != r)
                return false;
            r.cancelled = true;
            if (r.waits)
                issue(new Request("CANCEL #" + r.tag, false, null, (l, e) -> { }));
        }
        return true;
    }

    /** Closes the connection: pending requests fail at once. */
    void close(String why) {
        fail(new ConnectionClosedException(why));
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

    /** A counted reply being read (LIST): its tag, its lines so far, how many are to come. */
    private final StringBuilder counted = new StringBuilder();
    private String countedTag;
    private int countedLeft;

    /**
     * Hands a reply to {@link #dispatch} by its tag, an untagged line to the events,
     * except that a counted reply ({@code #t OK LIST <n> <more>} and exactly n {@code = …}
     * lines, dlockd writes them whole) goes as one reply, its lines joined by LF.
     */
    private void take(String line) {
        if (countedLeft > 0) {
            if (!line.startsWith("= "))
                throw new IllegalStateException("LIST entry expected: " + line);
            counted.append('\n').append(line);
            if (--countedLeft == 0) {
                String reply = counted.toString();
                counted.setLength(0);
                dispatch(countedTag, reply);
            }
            return;
        }
        if (line.startsWith("!")) {
            onEvent.accept(line);
            return;
        }
        int sp = line.indexOf(' ');
        if (!line.startsWith("#") || sp < 2)  // an untagged reply: a request it could not read
            throw new IllegalStateException("untagged reply: " + line);
        String tag = line.substring(1, sp);
        String reply = line.substring(sp + 1);
        if (reply.startsWith("OK LIST ")) {
            int n = Listing.count(reply);
            if (n < 0)
                throw new IllegalStateException("bad LIST header: " + reply);
            if (n > 0) {
                counted.append(reply);
                countedTag = tag;
                countedLeft = n;
                return;
            }
        }
        dispatch(tag, reply);
    }

    private void dispatch(String tag, String line) {
        List<Runnable> after = new ArrayList<>();
        synchronized (lock) {
            Request r = inflight.remove(tag);
            if (r == null)
                throw new IllegalStateException("reply to no request: #" + tag + " " + line);
            if (r.cancelled) {
                if (line.startsWith("OK") && r.release != null) {
                    // The grant raced the cancel: give it back.
                    Request rel = new Request(r.release.apply(line), false, null, (l, e) -> { });
                    issue(rel);
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
        }
        after.forEach(Runnable::run);
    }

    private void fail(ConnectionClosedException why) {
        List<Request> dead = new ArrayList<>();
        synchronized (lock) {
            if (closed != null)
                return;
            closed = why;
            dead.addAll(inflight.values());
            inflight.clear();
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
