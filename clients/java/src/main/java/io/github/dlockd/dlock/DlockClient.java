// The dlockd client: one connection shared by many threads, every lock kind, blocking and async.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * A client of dlockd: one connection to its Unix socket, shared safely by any number of
 * threads. Requests are pipelined; one daemon thread reads the replies and events.
 *
 * <p><b>The owner is the connection.</b> dlockd counts holds per connection, so this
 * client keeps its own threads apart: a second {@code lock(name)} of a name this client
 * holds waits here until the first handle is fully unlocked (read locks are shared).
 * Any thread may unlock a handle.
 *
 * <p><b>Many waits on one connection.</b> Every request is tagged, so dlockd serves a
 * client's requests at once: any number of threads wait on one client, each for its own
 * name and its own answer, and an unlock never waits behind another thread's wait.
 *
 * <p><b>Cancellation.</b> Waiting calls throw {@link InterruptedException} when their
 * thread is interrupted; the wait is withdrawn (dlockd's {@code CANCEL}) and, if the grant
 * raced the interrupt, released before the call returns: nothing stays held. The
 * {@code …Async} variants return a {@link CompletableFuture} whose {@code cancel} does the
 * same (the release of a raced grant follows at once, ahead of this client's later
 * requests). {@code tryLock} returns {@link Optional#empty()} when its wait runs out.
 *
 * <p><b>Failure.</b> When dlockd closes the connection (or dies, or {@link #close()} is
 * called), every pending call fails at once with {@link ConnectionClosedException} and
 * every live handle is lost with reason {@code closed}.
 *
 * <p>Leases: {@code null} or zero means watchdog mode (dlockd renews the lock while the
 * connection lives). A lease is sent in whole milliseconds, a fraction rounded up: a lease
 * under 1 ms is 1 ms, never watchdog mode.
 */
public final class DlockClient implements AutoCloseable {
    /** The socket used when neither a path nor {@code $DLOCK_SOCKET} is given. */
    public static final Path DEFAULT_SOCKET = Path.of("/run/dlockd/dlockd.sock");
    static final long NUM_MAX = 2147483647L;
    /** A lock name's most bytes (dlockd's {@code PROTO_NAME_MAX}). */
    static final int NAME_MAX = 255;
    /** How many characters of a bad name its error shows. */
    static final int NAME_SHOWN = 40;

    private final Path path;
    private final Conn conn;
    private final Gates gates = new Gates();
    private final Map<String, List<Handle>> handles = new HashMap<>();
    /** Live observations per name: OBSERVE goes for each, UNOBSERVE when the last ends. */
    private final Map<String, Observed> observed = new HashMap<>();
    private final ThreadPoolExecutor callbacks = new ThreadPoolExecutor(0, Integer.MAX_VALUE,
            5, TimeUnit.SECONDS, new SynchronousQueue<>(), r -> {
                Thread t = new Thread(r, "dlock-callback");
                t.setDaemon(true);
                return t;
            });

    private DlockClient(Path path, SocketChannel ch) {
        this.path = path;
        this.conn = new Conn(ch, this::event, e -> closed());
    }

    /** Connects to {@code $DLOCK_SOCKET}, else {@link #DEFAULT_SOCKET}. */
    public static DlockClient connect() {
        String env = System.getenv("DLOCK_SOCKET");
        return connect(env == null || env.isEmpty() ? DEFAULT_SOCKET : Path.of(env));
    }

    /**
     * Connects to dlockd's socket at {@code socket}.
     *
     * @throws DlockConnectException naming the path, with a hint ("is dlockd running?")
     */
    public static DlockClient connect(Path socket) {
        SocketChannel ch = null;
        try {
            ch = SocketChannel.open(StandardProtocolFamily.UNIX);
            ch.connect(UnixDomainSocketAddress.of(socket));
            return new DlockClient(socket, ch);
        } catch (IOException e) {
            if (ch != null) {
                try {
                    ch.close();
                } catch (IOException ignored) {
                    // the error below says it
                }
            }
            throw new DlockConnectException(socket, e.getMessage(), e);
        }
    }

    /** The socket this client is connected to. */
    public Path socket() {
        return path;
    }

    // ---- plain locks

    /** Takes the lock in watchdog mode, waiting as long as it takes. */
    public DlockLock lock(String name) throws InterruptedException {
        return lock(name, null);
    }

    /** Takes the lock with a lease ({@code null} or zero: watchdog), waiting as long as it takes. */
    public DlockLock lock(String name, Duration lease) throws InterruptedException {
        return await(this.<DlockLock>take(Kind.PLAIN, name, 0, -1, millis(lease, "lease"))).orElseThrow();
    }

    /** Takes the lock, waiting at most {@code wait}; empty when the wait ran out. */
    public Optional<DlockLock> tryLock(String name, Duration wait) throws InterruptedException {
        return tryLock(name, wait, null);
    }

    /** As {@link #tryLock(String, Duration)}, with a lease. */
    public Optional<DlockLock> tryLock(String name, Duration wait, Duration lease) throws InterruptedException {
        return await(this.<DlockLock>take(Kind.PLAIN, name, 0, waitMillis(wait), millis(lease, "lease")));
    }

    /** {@link #lock(String, Duration)} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<DlockLock> lockAsync(String name, Duration lease) {
        return untimed(this.<DlockLock>take(Kind.PLAIN, name, 0, -1, millis(lease, "lease")));
    }

    /** {@link #tryLock(String, Duration, Duration)} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<Optional<DlockLock>> tryLockAsync(String name, Duration wait, Duration lease) {
        return this.<DlockLock>take(Kind.PLAIN, name, 0, waitMillis(wait), millis(lease, "lease"));
    }

    // ---- multi-name locks

    /** The most names one multi-lock may ask for (dlockd's {@code PROTO_MNAMES_MAX}). */
    public static final int MULTI_NAMES_MAX = 64;

    /**
     * Takes the plain locks of all {@code names} at once (watchdog mode), waiting as long as
     * it takes: dlockd grants the whole set or nothing, and nothing of it is held while it
     * waits. Names: 1 to {@link #MULTI_NAMES_MAX}, distinct ({@link ArgsException} else,
     * {@link NameException} for a bad name), checked before anything is sent. This client's
     * threads never hold one name at once: the call first waits locally, name by name in
     * sorted order, until no other handle of this client holds one of them.
     */
    public DlockMultiLock multiLock(List<String> names) throws InterruptedException {
        return multiLock(names, null);
    }

    /**
     * As {@link #multiLock(List)}, with a lease shared by every name ({@code null}: watchdog).
     * Locks in {@code held} that this client holds of names of the set are reentered (their
     * fence, one more hold, released by the set's unlock) instead of waited for.
     */
    public DlockMultiLock multiLock(List<String> names, Duration lease, DlockLock... held)
            throws InterruptedException {
        return await(takeMulti(names, -1, millis(lease, "lease"), held)).orElseThrow();
    }

    /** As {@link #multiLock(List, Duration, DlockLock...)}, waiting at most {@code wait}; empty when it ran out. */
    public Optional<DlockMultiLock> tryMultiLock(List<String> names, Duration wait, Duration lease, DlockLock... held)
            throws InterruptedException {
        return await(takeMulti(names, waitMillis(wait), millis(lease, "lease"), held));
    }

    /** {@link #multiLock(List, Duration, DlockLock...)} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<DlockMultiLock> multiLockAsync(List<String> names, Duration lease, DlockLock... held) {
        return untimed(takeMulti(names, -1, millis(lease, "lease"), held));
    }

    /** {@link #tryMultiLock} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<Optional<DlockMultiLock>> tryMultiLockAsync(List<String> names, Duration wait,
                                                                          Duration lease, DlockLock... held) {
        return takeMulti(names, waitMillis(wait), millis(lease, "lease"), held);
    }

    // ---- read/write locks

    /** A read (shared) hold, waiting as long as it takes. */
    public DlockLock readLock(String name, Duration lease) throws InterruptedException {
        return await(this.<DlockLock>take(Kind.READ, name, 0, -1, millis(lease, "lease"))).orElseThrow();
    }

    /** A write (exclusive) hold, waiting as long as it takes. */
    public DlockLock writeLock(String name, Duration lease) throws InterruptedException {
        return await(this.<DlockLock>take(Kind.WRITE, name, 0, -1, millis(lease, "lease"))).orElseThrow();
    }

    /** A read hold, waiting at most {@code wait}; empty when it ran out. */
    public Optional<DlockLock> tryReadLock(String name, Duration wait, Duration lease) throws InterruptedException {
        return await(this.<DlockLock>take(Kind.READ, name, 0, waitMillis(wait), millis(lease, "lease")));
    }

    /** A write hold, waiting at most {@code wait}; empty when it ran out. */
    public Optional<DlockLock> tryWriteLock(String name, Duration wait, Duration lease) throws InterruptedException {
        return await(this.<DlockLock>take(Kind.WRITE, name, 0, waitMillis(wait), millis(lease, "lease")));
    }

    /** {@link #readLock} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<DlockLock> readLockAsync(String name, Duration lease) {
        return untimed(this.<DlockLock>take(Kind.READ, name, 0, -1, millis(lease, "lease")));
    }

    /** {@link #writeLock} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<DlockLock> writeLockAsync(String name, Duration lease) {
        return untimed(this.<DlockLock>take(Kind.WRITE, name, 0, -1, millis(lease, "lease")));
    }

    // ---- fair locks

    /** A fair lock: waiters are served in the order they came, across every daemon. */
    public DlockLock fairLock(String name, Duration lease) throws InterruptedException {
        return await(this.<DlockLock>take(Kind.FAIR, name, 0, -1, millis(lease, "lease"))).orElseThrow();
    }

    /** A fair lock, waiting at most {@code wait}; empty when it ran out. */
    public Optional<DlockLock> tryFairLock(String name, Duration wait, Duration lease) throws InterruptedException {
        return await(this.<DlockLock>take(Kind.FAIR, name, 0, waitMillis(wait), millis(lease, "lease")));
    }

    /** {@link #fairLock} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<DlockLock> fairLockAsync(String name, Duration lease) {
        return untimed(this.<DlockLock>take(Kind.FAIR, name, 0, -1, millis(lease, "lease")));
    }

    // ---- semaphores

    /** Sets a semaphore's size unless it was set: true if set now, false if it had been. */
    public boolean semInit(String name, int permits) {
        checkName(name);
        checkNumber(permits, "permits");
        return call("SEMINIT " + name + " " + permits, reply -> reply.equals("OK 1"));
    }

    /** Takes {@code permits} (1 to 10000), waiting as long as it takes. */
    public DlockPermits acquire(String name, int permits, Duration lease) throws InterruptedException {
        checkPermits(permits);
        return await(this.<DlockPermits>take(Kind.SEM, name, permits, -1, millis(lease, "lease"))).orElseThrow();
    }

    /** Takes {@code permits}, waiting at most {@code wait}; empty when it ran out. */
    public Optional<DlockPermits> tryAcquire(String name, int permits, Duration wait, Duration lease)
            throws InterruptedException {
        checkPermits(permits);
        return await(this.<DlockPermits>take(Kind.SEM, name, permits, waitMillis(wait), millis(lease, "lease")));
    }

    /** {@link #acquire} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<DlockPermits> acquireAsync(String name, int permits, Duration lease) {
        checkPermits(permits);
        return untimed(this.<DlockPermits>take(Kind.SEM, name, permits, -1, millis(lease, "lease")));
    }

    /** {@link #tryAcquire} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<Optional<DlockPermits>> tryAcquireAsync(String name, int permits, Duration wait,
                                                                   Duration lease) {
        checkPermits(permits);
        return this.<DlockPermits>take(Kind.SEM, name, permits, waitMillis(wait), millis(lease, "lease"));
    }

    // ---- count-down latches

    /**
     * Sets the count of the count-down latch {@code name} to {@code count} (1 to
     * 2147483647) unless the latch exists: true if set now, false if it existed (its count
     * unchanged), as Redisson's {@code RCountDownLatch.trySetCount}. A latch has no holder:
     * nothing of it belongs to this client, and closing it changes no count.
     */
    public boolean latchSet(String name, long count) {
        checkName(name);
        if (count < 1 || count > NUM_MAX)
            throw new ArgsException("a latch's count is 1 to " + NUM_MAX + ", not " + count);
        return call("LATCHSET " + name + " " + count, reply -> latchCount(reply, "LATCHSET") == 1);
    }

    /**
     * Counts the latch down by one and returns the count left. At 0 the latch is deleted
     * and every waiter of it goes on, on every dlockd of the Redis and in Redisson. A latch
     * that does not exist answers 0, and nothing changes.
     */
    public long countDown(String name) {
        checkName(name);
        return call("COUNTDOWN " + name, reply -> latchCount(reply, "COUNTDOWN"));
    }

    /** The latch's count now: 0 when it does not exist. */
    public long latchCount(String name) {
        checkName(name);
        return call("LATCHCOUNT " + name, reply -> latchCount(reply, "LATCHCOUNT"));
    }

    /**
     * Waits until the latch's count is 0 (at once when it does not exist). An interrupt
     * withdraws the wait ({@code CANCEL}) and throws {@link InterruptedException}. Any
     * number of threads may wait at once on one client; their waits hold back none of its
     * other requests.
     */
    public void await(String name) throws InterruptedException {
        await(latchWait(name, -1));
    }

    /**
     * Waits at most {@code wait} ({@code Duration.ZERO}: one look) until the latch's count
     * is 0: returns 0 once it is, else the count when the wait ended.
     */
    public long tryAwait(String name, Duration wait) throws InterruptedException {
        return await(latchWait(name, waitMillis(wait)));
    }

    /** {@link #await(String)} as a future; {@code cancel} withdraws the wait. */
    public CompletableFuture<Void> awaitAsync(String name) {
        return cancellable(latchWait(name, -1), count -> null);
    }

    /** {@link #tryAwait} as a future (0, or the count when the wait ended); {@code cancel} withdraws the wait. */
    public CompletableFuture<Long> tryAwaitAsync(String name, Duration wait) {
        return cancellable(latchWait(name, waitMillis(wait)), count -> count);
    }

    // ---- leader election

    /** Campaigns with {@code value}, leading while the connection lives; see {@link #elect(String, String, Duration)}. */
    public DlockLeadership elect(String name, String value) throws InterruptedException {
        return elect(name, value, null);
    }

    /**
     * Campaigns for leadership of {@code name} and waits until this client leads
     * (candidates are served in the order they came, across daemons). {@code value} (1 to
     * 255 bytes of 0x21 to 0x7E, e.g. {@code 10.0.0.5:8080}) is what {@link #leader} and
     * observers are told. With a lease the leadership ends unless renewed
     * ({@link DlockLeadership#renew}); {@code null} or zero: it lasts while the connection
     * lives. An interrupt withdraws the campaign ({@code CANCEL}) and nothing stays held.
     * The campaign holds back none of this client's other requests. Two threads of one
     * client electing one name take turns, as with locks.
     */
    public DlockLeadership elect(String name, String value, Duration lease) throws InterruptedException {
        return await(campaign(name, value, millis(lease, "lease")));
    }

    /** {@link #elect(String, String, Duration)} as a future; {@code cancel} withdraws the campaign. */
    public CompletableFuture<DlockLeadership> electAsync(String name, String value, Duration lease) {
        return campaign(name, value, millis(lease, "lease"));
    }

    /** Who leads {@code name} now; empty when nobody does. */
    public Optional<Leader> leader(String name) {
        checkName(name);
        return call("LEADER " + name, reply -> Leader.parse(reply.split(" "), 1, reply));
    }

    /**
     * Observes the election {@code name}: {@code onChange} gets the leader now first, then
     * every change, in order, one at a time on the client's callback threads (it must not
     * wait for this client's replies for long: other observations' callbacks and loss
     * signals do not wait for it, but its own next changes do). Close the observation to
     * stop; it also ends when the connection does.
     */
    public Observation observe(String name, Consumer<LeaderChange> onChange) {
        checkName(name);
        Objects.requireNonNull(onChange, "onChange");
        Observation o = new Observation(this, name, onChange);
        CompletableFuture<Void> answered = new CompletableFuture<>();
        synchronized (observed) {
            if (conn.isClosed())
                throw new ConnectionClosedException("client closed");
            observed.computeIfAbsent(name, n -> new Observed()).count++;
            conn.send("OBSERVE " + name, false, null, (reply, err) -> {
                if (err == null) {
                    try {
                        Optional<Leader> now = Leader.parse(reply.split(" "), 1, reply);
                        synchronized (observed) {
                            Observed ob = observed.get(name);
                            if (ob != null && !o.isClosed())
                                ob.active.add(o);
                        }
                        o.push(new LeaderChange(name, now));
                    } catch (RuntimeException e) {
                        err = e;
                    }
                }
                if (err != null)
                    answered.completeExceptionally(err);
                else
                    answered.complete(null);
            });
        }
        try {
            join(answered);
        } catch (RuntimeException e) {
            o.close();
            throw e;
        }
        return o;
    }

    // ---- the rest

    /** What dlockd knows of the name, for this connection. */
    public LockStatus status(String name) {
        checkName(name);
        return call("STATUS " + name, LockStatus::parse);
    }

    /** {@link #list(String, int)} of every name ({@code *}) with dlockd's default limit. */
    public Listing list() {
        return list("*");
    }

    /** {@link #list(String, int)} with dlockd's default limit (100). */
    public Listing list(String pattern) {
        checkPattern(pattern);
        return call("LIST " + pattern, Listing::parse);
    }

    /**
     * dlockd's {@code LIST}: the locks of every kind whose names match {@code pattern}
     * (Redis's glob), across every dlockd sharing the Redis, at most {@code limit} (1 to
     * 1000) of them, only names this peer may read. A bad pattern or limit is an
     * {@link ArgsException}.
     */
    public Listing list(String pattern, int limit) {
        checkPattern(pattern);
        if (limit < 1 || limit > Listing.LIMIT_MAX)
            throw new ArgsException("limit is 1 to " + Listing.LIMIT_MAX + ", not " + limit);
        return call("LIST " + pattern + " " + limit, Listing::parse);
    }

    /** Checks that dlockd answers. */
    public void ping() {
        call("PING", reply -> null);
    }

    /** Removes the lock whoever holds it (admins only): true if one was removed. */
    public boolean forceUnlock(String name) {
        checkName(name);
        return call("FORCEUNLOCK " + name, reply -> reply.equals("OK 1"));
    }

    /** dlockd's INFO, as key/value pairs. */
    public Map<String, String> info() {
        return call("INFO", reply -> {
            Map<String, String> m = new LinkedHashMap<>();
            for (String w : reply.split(" ")) {
                int eq = w.indexOf('=');
                if (eq > 0)
                    m.put(w.substring(0, eq), w.substring(eq + 1));
            }
            return m;
        });
    }

    /**
     * The name as a {@link Lock} in watchdog mode. The owner is this client's connection,
     * not a thread: any thread may {@code unlock()} what another locked. It is not
     * reentrant: a second {@code lock()} waits for the {@code unlock()} (reenter through
     * {@link DlockLock#relock()} instead). {@code newCondition()} is not supported.
     */
    public Lock asLock(String name) {
        checkName(name);
        return new LockAdapter(this, name);
    }

    /** Whether the connection is closed. */
    public boolean isClosed() {
        return conn.isClosed();
    }

    /** Closes the connection: dlockd releases everything it held; live handles are lost ({@code closed}). */
    @Override
    public void close() {
        conn.close("client closed");
    }

    // ---- the machinery

    private Op<DlockLeadership> campaign(String name, String value, long leaseMs) {
        checkName(name);
        checkValue(value);
        Op<DlockLeadership> op = new Op<>(callbacks);
        Gates.Waiter w = gates.enter(electGate(name), false);
        op.stage(() -> gates.withdraw(w) ? CompletableFuture.completedFuture(null) : null);
        w.thenAccept(in -> {
            if (in)
                sendElect(op, name, value, leaseMs);
        });
        return op;
    }

    private void sendElect(Op<DlockLeadership> op, String name, String value, long leaseMs) {
        if (op.isDone()) {
            leaveElectGate(name);
            op.settle();
            return;
        }
        String line = "ELECT " + name + " " + value + (leaseMs > 0 ? " " + leaseMs : "");
        Conn.Request r = conn.send(line, true, reply -> "RESIGN " + name, (reply, err) -> {
            long fence = 0;
            if (err == null) {
                String[] w = reply.split(" ");
                try {
                    if (w.length != 2)
                        throw new NumberFormatException(reply);
                    fence = Long.parseLong(w[1]);
                } catch (NumberFormatException e) {
                    err = new ProtocolException(null, "unexpected ELECT reply: " + reply);
                }
            }
            if (err != null) {
                leaveElectGate(name);
                op.fail(err);
                return;
            }
            DlockLeadership l = new DlockLeadership(this, name, value, fence);
            register(l);
            op.finish(l, l::close);
        });
        op.stage(() -> conn.cancel(r) ? r.settled.thenRun(() -> leaveElectGate(name)) : null);
    }

    /** The local gate of an election: one campaign (or leadership) of a name per client. */
    private static String electGate(String name) {
        return "elect " + name;
    }

    void leaveElectGate(String name) {
        gates.leave(electGate(name), false);
    }

    /** Ends an observation's share of its name: UNOBSERVE when it was the last. */
    void unobserve(Observation o) {
        synchronized (observed) {
            Observed ob = observed.get(o.name());
            if (ob == null)
                return;
            ob.active.remove(o);
            if (--ob.count == 0) {
                observed.remove(o.name());
                conn.send("UNOBSERVE " + o.name(), false, null, (reply, err) -> { });
            }
        }
    }

    /** A name's observations on this client. */
    private static final class Observed {
        int count;
        final List<Observation> active = new ArrayList<>();
    }

    private <H extends Handle> Op<Optional<H>> take(Kind kind, String name, int permits, long waitMs, long leaseMs) {
        checkName(name);
        Op<Optional<H>> op = new Op<>(callbacks);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(waitMs, 0));
        if (!kind.gated) {
            send(op, kind, name, permits, waitMs, leaseMs);
            return op;
        }
        Gates.Waiter w = gates.enter(name, kind.shared);
        op.stage(() -> gates.withdraw(w) ? CompletableFuture.completedFuture(null) : null);
        if (waitMs >= 0 && !w.isDone())
            CompletableFuture.delayedExecutor(waitMs, TimeUnit.MILLISECONDS).execute(() -> gates.withdraw(w));
        w.thenAccept(in -> {
            if (!in) {
                op.finish(Optional.empty(), null);
                return;
            }
            long left = waitMs < 0 ? -1
                    : Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
            send(op, kind, name, permits, left, leaseMs);
        });
        return op;
    }

    @SuppressWarnings("unchecked")
    private <H extends Handle> void send(Op<Optional<H>> op, Kind kind, String name, int permits, long waitMs,
                                         long leaseMs) {
        Runnable leave = () -> leaveGate(kind, name);
        if (op.isDone()) {
            leave.run();
            op.settle();
            return;
        }
        Conn.Request r = conn.send(kind.line(name, permits, waitMs, leaseMs), waitMs != 0,
                reply -> kind.release(name, permits), (reply, err) -> {
                    if (err != null || reply.startsWith("TIMEOUT")) {
                        leave.run();
                        if (err != null)
                            op.fail(err);
                        else
                            op.finish(Optional.empty(), null);
                        return;
                    }
                    String[] w = reply.split(" ");
                    H h = (H) (kind == Kind.SEM
                            ? new DlockPermits(this, name, permits, Integer.parseInt(w[1]))
                            : new DlockLock(this, kind, name, leaseMs, Long.parseLong(w[1])));
                    register(h);
                    op.finish(Optional.of(h), () -> {
                        if (h instanceof DlockLock)
                            ((DlockLock) h).close();
                        else
                            ((DlockPermits) h).close();
                    });
                });
        op.stage(() -> conn.cancel(r) ? r.settled.thenRun(leave) : null);
    }

    /**
     * {@code AWAIT} ({@code waitMs < 0}) or {@code TRYAWAIT}: completes with 0 once the
     * latch is open ({@code OK 0}), else with the count its {@code TIMEOUT} told. A wait
     * holds nothing, so a cancel that raced the {@code OK} leaves nothing to give back.
     */
    private Op<Long> latchWait(String name, long waitMs) {
        checkName(name);
        Op<Long> op = new Op<>(callbacks);
        String verb = waitMs < 0 ? "AWAIT" : "TRYAWAIT";
        String line = verb + " " + name + (waitMs < 0 ? "" : " " + waitMs);
        Conn.Request r = conn.send(line, waitMs != 0, null, (reply, err) -> {
            if (err != null) {
                op.fail(err);
                return;
            }
            long n;
            try {
                n = latchCount(reply, verb);
                if (reply.startsWith("OK") ? n != 0 : waitMs < 0)
                    throw new NumberFormatException(reply);
            } catch (RuntimeException e) {
                op.fail(new ProtocolException(null, "unexpected " + verb + " reply: " + reply));
                return;
            }
            op.finish(n, null);
        });
        op.stage(() -> conn.cancel(r) ? r.settled : null);
        return op;
    }

    /** The count of a latch's {@code OK <n>} or {@code TIMEOUT <n>} reply. */
    private static long latchCount(String reply, String verb) {
        String[] w = reply.split(" ");
        try {
            if (w.length == 2 && (w[0].equals("OK") || w[0].equals("TIMEOUT"))) {
                long n = Long.parseLong(w[1]);
                if (n >= 0)
                    return n;
            }
        } catch (NumberFormatException e) {
            // the error below says it
        }
        throw new ProtocolException(null, "unexpected " + verb + " reply: " + reply);
    }

    /** A future of {@code op}'s value through {@code f}, whose {@code cancel} withdraws {@code op}. */
    private static <T, U> CompletableFuture<U> cancellable(Op<T> op, Function<T, U> f) {
        CompletableFuture<U> out = new CompletableFuture<>() {
            @Override
            public boolean cancel(boolean mayInterruptIfRunning) {
                // op's cancel completes out (below) before it returns: out is cancelled then.
                return op.cancel(mayInterruptIfRunning) && (super.cancel(mayInterruptIfRunning) || isCancelled());
            }
        };
        op.whenComplete((v, e) -> {
            if (e != null)
                out.completeExceptionally(e instanceof java.util.concurrent.CompletionException ? e.getCause() : e);
            else
                out.complete(f.apply(v));
        });
        return out;
    }

    /** MLOCK's rules for a set of names. */
    static void checkNames(List<String> names) {
        if (names == null || names.isEmpty() || names.size() > MULTI_NAMES_MAX)
            throw new ArgsException("a multi-lock takes 1 to " + MULTI_NAMES_MAX + " names, not "
                    + (names == null ? 0 : names.size()));
        Set<String> seen = new HashSet<>();
        for (String n : names) {
            checkName(n);
            if (!seen.add(n))
                throw new ArgsException("name " + n + " given twice");
        }
    }

    /** {@code <verb> <n> <name1> … <name_n>}. */
    static String multiLine(String verb, List<String> names) {
        return verb + " " + names.size() + " " + String.join(" ", names);
    }

    private Op<Optional<DlockMultiLock>> takeMulti(List<String> names, long waitMs, long leaseMs, DlockLock[] held) {
        checkNames(names);
        List<String> set = List.copyOf(names);
        Map<String, DlockLock> mine = new HashMap<>();
        for (DlockLock l : held == null ? new DlockLock[0] : held)
            if (l != null && l.client == this && l.kind == Kind.PLAIN && set.contains(l.name) && l.holds() > 0)
                mine.put(l.name, l);
        List<String> gated = new ArrayList<>();
        for (String n : set)
            if (!mine.containsKey(n))
                gated.add(n);
        Collections.sort(gated); // a fixed order: no two local tasks wait for each other's gates
        Op<Optional<DlockMultiLock>> op = new Op<>(callbacks);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(waitMs, 0));
        passGates(op, gated, 0, waitMs, deadline, () -> {
            long left = waitMs < 0 ? -1
                    : Math.max(0, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
            sendMulti(op, set, gated, mine, left, leaseMs);
        });
        return op;
    }

    /** Passes the local gates of {@code gated} one after the other, then runs {@code then}. */
    private void passGates(Op<Optional<DlockMultiLock>> op, List<String> gated, int i, long waitMs, long deadline,
                           Runnable then) {
        if (i == gated.size()) {
            then.run();
            return;
        }
        List<String> passed = gated.subList(0, i);
        Gates.Waiter w = gates.enter(gated.get(i), false);
        op.stage(() -> gates.withdraw(w) ? CompletableFuture.completedFuture(null) : null);
        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        if (waitMs >= 0 && !w.isDone())
            CompletableFuture.delayedExecutor(Math.max(left, 0), TimeUnit.MILLISECONDS)
                    .execute(() -> gates.withdraw(w));
        w.thenAccept(in -> {
            if (!in) {
                passed.forEach(n -> leaveGate(Kind.PLAIN, n));
                op.finish(Optional.empty(), null);
                return;
            }
            if (op.isDone()) {
                gated.subList(0, i + 1).forEach(n -> leaveGate(Kind.PLAIN, n));
                op.settle();
                return;
            }
            passGates(op, gated, i + 1, waitMs, deadline, then);
        });
    }

    private void sendMulti(Op<Optional<DlockMultiLock>> op, List<String> names, List<String> gated,
                           Map<String, DlockLock> mine, long waitMs, long leaseMs) {
        Runnable leave = () -> gated.forEach(n -> leaveGate(Kind.PLAIN, n));
        if (op.isDone()) {
            leave.run();
            op.settle();
            return;
        }
        String line = waitMs < 0 ? multiLine("MLOCK", names) + " " + leaseMs
                : multiLine("TRYMLOCK", names) + " " + waitMs + " " + leaseMs;
        Conn.Request r = conn.send(line, waitMs != 0, reply -> multiLine("MUNLOCK", names), (reply, err) -> {
            if (err != null || reply.startsWith("TIMEOUT")) {
                leave.run();
                if (err != null)
                    op.fail(err);
                else
                    op.finish(Optional.empty(), null);
                return;
            }
            String[] w = reply.split(" ");
            long[] fences = new long[names.size()];
            try {
                if (w.length != names.size() + 1)
                    throw new NumberFormatException(reply);
                for (int i = 0; i < fences.length; i++)
                    fences[i] = Long.parseLong(w[i + 1]);
            } catch (NumberFormatException e) {
                leave.run();
                op.fail(new ProtocolException(null, "unexpected multi-lock reply: " + reply));
                return;
            }
            DlockMultiLock m = new DlockMultiLock(this, names, fences);
            for (String n : names) {
                DlockLock l = mine.get(n);
                if (l != null && !l.pin())
                    l = null; // lost meanwhile: the gate is free, nothing to share
                DlockMultiLock.Part p = new DlockMultiLock.Part(this, n, m, l, !mine.containsKey(n));
                m.parts.add(p);
                register(p);
            }
            op.finish(Optional.of(m), m::close);
        });
        op.stage(() -> conn.cancel(r) ? r.settled.thenRun(leave) : null);
    }

    /** A blocking, non-waiting request: waits for its reply without giving in to interrupts. */
    <T> T call(String line, Function<String, T> onOk) {
        CompletableFuture<T> f = new CompletableFuture<>();
        conn.send(line, false, null, (reply, err) -> {
            if (err != null) {
                f.completeExceptionally(err);
                return;
            }
            try {
                f.complete(onOk.apply(reply));
            } catch (RuntimeException e) {
                f.completeExceptionally(e);
            }
        });
        return join(f);
    }

    /** Waits for a waiting call; on interrupt withdraws it and waits until nothing is held. */
    static <T> T await(Op<T> op) throws InterruptedException {
        try {
            return op.get();
        } catch (InterruptedException e) {
            if (!op.cancel(true)) {
                Thread.currentThread().interrupt();
                return join(op);
            }
            join(op.settled);
            throw e;
        } catch (ExecutionException e) {
            throw unwrap(e);
        }
    }

    private static <T> T join(CompletableFuture<T> f) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    throw unwrap(e);
                }
            }
        } finally {
            if (interrupted)
                Thread.currentThread().interrupt();
        }
    }

    private static RuntimeException unwrap(ExecutionException e) {
        Throwable c = e.getCause();
        if (c instanceof RuntimeException)
            return (RuntimeException) c;
        if (c instanceof Error)
            throw (Error) c;
        return new DlockException(null, String.valueOf(c), c);
    }

    private static <T> CompletableFuture<T> untimed(Op<Optional<T>> op) {
        // A future whose cancel reaches the op; the value is always present (no wait limit).
        CompletableFuture<T> f = new CompletableFuture<>() {
            @Override
            public boolean cancel(boolean mayInterruptIfRunning) {
                return op.cancel(mayInterruptIfRunning) && super.cancel(mayInterruptIfRunning);
            }
        };
        op.whenComplete((v, e) -> {
            if (e != null)
                f.completeExceptionally(e instanceof java.util.concurrent.CompletionException ? e.getCause() : e);
            else
                f.complete(v.orElseThrow());
        });
        return f;
    }

    Executor callbacks() {
        return callbacks;
    }

    void leaveGate(Kind kind, String name) {
        if (kind.gated)
            gates.leave(name, kind.shared);
    }

    private void register(Handle h) {
        synchronized (handles) {
            handles.computeIfAbsent(h.name, n -> new ArrayList<>()).add(h);
        }
        if (conn.isClosed())
            h.markLost("closed");
    }

    void unregister(Handle h) {
        synchronized (handles) {
            List<Handle> l = handles.get(h.name);
            if (l != null && l.remove(h) && l.isEmpty())
                handles.remove(h.name);
        }
    }

    private void event(String line) {
        String[] w = line.split(" ");
        if (w.length >= 3 && w[0].equals("!LEADER")) {
            List<Observation> to;
            synchronized (observed) {
                Observed ob = observed.get(w[1]);
                to = ob == null ? List.of() : new ArrayList<>(ob.active);
            }
            if (!to.isEmpty()) {
                LeaderChange c = new LeaderChange(w[1], Leader.parse(w, 2, line));
                to.forEach(o -> o.push(c));
            }
            return;
        }
        if (w.length >= 3 && w[0].equals("!LOST")) {
            List<Handle> l;
            synchronized (handles) {
                l = handles.remove(w[1]);
            }
            if (l != null)
                l.forEach(h -> h.markLost(w[2]));
        }
    }

    private void closed() {
        List<Handle> all = new ArrayList<>();
        synchronized (handles) {
            handles.values().forEach(all::addAll);
            handles.clear();
        }
        all.forEach(h -> h.markLost("closed"));
        List<Observation> obs = new ArrayList<>();
        synchronized (observed) {
            observed.values().forEach(ob -> obs.addAll(ob.active));
            observed.clear();
        }
        obs.forEach(o -> o.end(new ConnectionClosedException("connection to dlockd closed")));
    }

    // ---- local checks, the daemon's rules

    /** Names are 1 to 255 bytes of 0x21 to 0x7E. */
    static void checkName(String name) {
        if (name == null)
            throw new NameException("lock name must be a string, not null");
        byte[] b = name.getBytes(StandardCharsets.UTF_8);
        if (b.length < 1 || b.length > NAME_MAX)
            throw new NameException("bad lock name " + shown(name, b.length) + ": must be 1 to " + NAME_MAX + " bytes");
        for (int i = 0; i < b.length; i++)
            if (b[i] < 0x21 || b[i] > 0x7e)        // a signed byte: UTF-8's lead bytes are negative
                throw new NameException("bad lock name " + shown(name, b.length)
                        + ": only printable ASCII without spaces is allowed"
                        + String.format(" (byte %d is 0x%02X)", i + 1, b[i] & 0xff));
    }

    /** How a bad name is shown in its error, as the other clients show it: quoted, escaped,
     *  the first {@link #NAME_SHOWN} characters of a longer one and its length in bytes. */
    static String shown(String name, int bytes) {
        if (name.length() <= NAME_SHOWN)
            return quote(name);
        return quote(name.substring(0, NAME_SHOWN)) + "... (" + bytes + " bytes)";
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20 || c == 0x7f)
                        sb.append(String.format("\\u%04x", (int) c));
                    else
                        sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    /** LIST patterns are 1 to 255 bytes of 0x21 to 0x7E, as names are (else ERR ARGS). */
    static void checkPattern(String pattern) {
        try {
            checkName(pattern);
        } catch (NameException e) {
            throw new ArgsException("a pattern is 1 to 255 bytes of 0x21 to 0x7E");
        }
    }

    /** Leader values are 1 to 255 bytes of 0x21 to 0x7E, as names are (else ERR ARGS). */
    static void checkValue(String value) {
        try {
            checkName(value);
        } catch (NameException e) {
            throw new ArgsException("a leader value is 1 to 255 bytes of 0x21 to 0x7E");
        }
    }

    static void checkNumber(long n, String what) {
        if (n < 0 || n > NUM_MAX)
            throw new ArgsException(what + " is 0 to " + NUM_MAX + ", not " + n);
    }

    static void checkPermits(int permits) {
        if (permits < 1 || permits > 10000)
            throw new ArgsException("permits are 1 to 10000, not " + permits);
    }

    /** A duration as wire milliseconds; null is 0. */
    static long millis(Duration d, String what) {
        if (d == null)
            return 0;
        if (d.isNegative())
            throw new ArgsException(what + " is negative: " + d);
        long ms;
        try {
            ms = d.toMillis();
            // toMillis truncates: a positive fraction of a millisecond rounds up, so that a
            // lease under 1 ms is 1 ms, not 0 (= watchdog, a lock that never expires).
            if (d.getNano() % 1_000_000 != 0)
                ms++;
        } catch (ArithmeticException e) {
            ms = Long.MAX_VALUE;
        }
        checkNumber(ms, what + " in ms");
        return ms;
    }

    private static long waitMillis(Duration wait) {
        if (wait == null)
            throw new ArgsException("a try needs a wait (Duration.ZERO: one try)");
        return millis(wait, "wait");
    }
}
