// The Java client's conformance adapter (tests/conformance/README.md), through the public API only.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock.conformance;

import io.github.dlockd.dlock.ArgsException;
import io.github.dlockd.dlock.BackendException;
import io.github.dlockd.dlock.CancelledException;
import io.github.dlockd.dlock.ConnectionClosedException;
import io.github.dlockd.dlock.DeniedException;
import io.github.dlockd.dlock.DlockClient;
import io.github.dlockd.dlock.DlockConnectException;
import io.github.dlockd.dlock.DlockLeadership;
import io.github.dlockd.dlock.DlockLock;
import io.github.dlockd.dlock.DlockMultiLock;
import io.github.dlockd.dlock.DlockPermits;
import io.github.dlockd.dlock.KindException;
import io.github.dlockd.dlock.LeaderChange;
import io.github.dlockd.dlock.LimitException;
import io.github.dlockd.dlock.Listing;
import io.github.dlockd.dlock.NameException;
import io.github.dlockd.dlock.NotHeldException;
import io.github.dlockd.dlock.Observation;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Reads the runner's commands on stdin, runs each on its own thread through the client's
 * public API, answers on stdout. {@code cancel <rid>} interrupts that command's thread.
 * Run: {@code java -cp build/dlock.jar:build/dlock-tests.jar io.github.dlockd.dlock.conformance.Adapter}
 * ({@code make clients-java}; the adapter is in the test jar, not the library).
 */
public final class Adapter {
    /** A hang guard for what is already on its way. */
    private static final long GUARD_S = 60;
    private final PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private final Map<String, DlockClient> clients = new ConcurrentHashMap<>();
    private final Map<String, Object> handles = new ConcurrentHashMap<>();
    private final Map<String, Thread> running = new ConcurrentHashMap<>();
    private final Map<String, Observation> observations = new ConcurrentHashMap<>();
    /** What runs once a command's answer is written, by the command's id. */
    private final Map<String, Runnable> after = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        new Adapter().run();
        System.exit(0);
    }

    private void run() throws Exception {
        emit("* ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<Thread> threads = new ArrayList<>();
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split(" ");
            if (w.length < 2)
                continue;
            String rid = w[0];
            if (w[1].equals("cancel") && w.length == 3) {
                Thread t = running.get(w[2]);
                if (t != null)
                    t.interrupt();
                emit(rid + " ok");
                continue;
            }
            Thread t = new Thread(() -> {
                try {
                    emit(rid + " " + perform(w));
                } catch (Throwable e) {
                    emit(rid + " err " + kind(e) + " " + text(e));
                } finally {
                    running.remove(rid);
                    Runnable then = after.remove(rid);
                    if (then != null)
                        then.run();
                }
            }, "cmd-" + rid);
            running.put(rid, t);
            threads.add(t);
            t.start();
        }
        clients.values().forEach(DlockClient::close);
        for (Thread t : threads)
            t.join(5000);
        out.flush();
    }

    private synchronized void emit(String line) {
        out.print(line + "\n");
        out.flush();
    }

    private String perform(String[] w) throws Exception {
        switch (w[1]) {
            case "connect":
                clients.put(w[2], w[3].equals("-") ? DlockClient.connect() : DlockClient.connect(Path.of(w[3])));
                return "ok";
            case "close":
                client(w[2]).close();
                return "ok";
            case "lock":
                return granted(w[3], client(w[2]).lock(name(w[4]), ms(w[5])));
            case "trylock": {
                Optional<DlockLock> l = client(w[2]).tryLock(w[4], ms(w[5]), ms(w[6]));
                return l.isPresent() ? granted(w[3], l.get()) : "timeout";
            }
            case "rlock":
                return granted(w[3], client(w[2]).readLock(name(w[4]), ms(w[5])));
            case "wlock":
                return granted(w[3], client(w[2]).writeLock(name(w[4]), ms(w[5])));
            case "fairlock":
                return granted(w[3], client(w[2]).fairLock(name(w[4]), ms(w[5])));
            case "reenter": {
                DlockLock l = lock(w[2]);
                int holds = l.relock();
                return "ok " + l.fence() + " " + holds;
            }
            case "unlock":
                return "ok " + lock(w[2]).unlock();
            case "renew": {
                long lease = Long.parseLong(w[3]);
                Duration d = lease == 0 ? null : Duration.ofMillis(lease);
                if (handle(w[2]) instanceof DlockLeadership)
                    return "ok " + ((DlockLeadership) handle(w[2])).renew(d).toMillis();
                return "ok " + lock(w[2]).renew(d).toMillis();
            }
            case "seminit":
                return client(w[2]).semInit(w[3], Integer.parseInt(w[4])) ? "ok 1" : "ok 0";
            case "acquire": {
                DlockPermits p = client(w[2]).acquire(w[4], Integer.parseInt(w[5]), ms(w[6]));
                watch(w[3], p);
                return "ok " + p.held();
            }
            case "release":
                return "ok " + ((DlockPermits) handle(w[2])).release(Integer.parseInt(w[3]));
            case "latchset":
                return client(w[2]).latchSet(w[3], Long.parseLong(w[4])) ? "ok 1" : "ok 0";
            case "countdown":
                return "ok " + client(w[2]).countDown(w[3]);
            case "latchcount":
                return "ok " + client(w[2]).latchCount(w[3]);
            case "await":
                client(w[2]).await(w[3]);
                return "ok";
            case "tryawait": {
                long left = client(w[2]).tryAwait(w[3], ms(w[4]));
                return left == 0 ? "ok" : "timeout " + left;
            }
            case "status":
                return "ok " + client(w[2]).status(w[3]);
            case "ping":
                client(w[2]).ping();
                return "ok";
            case "list": {
                Listing l = w[4].equals("-") ? client(w[2]).list(w[3])
                        : client(w[2]).list(w[3], Integer.parseInt(w[4]));
                StringBuilder sb = new StringBuilder("ok " + l.entries().size() + (l.more() ? " 1" : " 0"));
                for (Listing.Entry e : l.entries())
                    sb.append(' ').append(e.name()).append(' ').append(e.kind()).append(' ')
                            .append(e.fence().isPresent() ? Long.toUnsignedString(e.fence().getAsLong()) : "-")
                            .append(' ').append(e.holders().total());
                return sb.toString();
            }
            case "elect": {
                DlockLeadership l = client(w[2]).elect(w[4], w[5], ms(w[6]));
                handles.put(w[3], l);
                String hid = w[3];
                l.onLost(e -> emit("* lost " + hid + " " + e.reason()));
                return "ok " + l.fence();
            }
            case "resign": {
                Object h = handle(w[2]);
                if (!(h instanceof DlockLeadership))
                    throw new IllegalArgumentException(w[2] + " is not a leadership");
                return ((DlockLeadership) h).resign() ? "ok 1" : "ok 0";
            }
            case "leader":
                return "ok " + client(w[2]).leader(w[3]).map(Object::toString).orElse("NONE");
            case "observe":
                return observe(w[0], client(w[2]), w[3], w[4]);
            case "unobserve": {
                Observation o = observations.remove(w[2]);
                if (o == null)
                    throw new IllegalArgumentException("no observation " + w[2]);
                o.close(); // waits for a "* leader" line being written
                return "ok";
            }
            case "mlock":
            case "trymlock": {
                boolean tr = w[1].equals("trymlock");
                int first = tr ? 6 : 5;
                List<String> names = Arrays.asList(w).subList(first, w.length);
                // the runner's "holder locks again": this client's own locks are reentered
                DlockLock[] held = handles.values().stream().filter(h -> h instanceof DlockLock)
                        .toArray(DlockLock[]::new);
                Optional<DlockMultiLock> m = tr
                        ? client(w[2]).tryMultiLock(names, ms(w[4]), ms(w[5]), held)
                        : Optional.of(client(w[2]).multiLock(names, ms(w[4]), held));
                if (m.isEmpty())
                    return "timeout";
                String hid = w[3];
                handles.put(hid, m.get());
                m.get().onLost(e -> emit("* lost " + hid + " " + e.reason()));
                StringBuilder b = new StringBuilder("ok");
                for (long f : m.get().fences())
                    b.append(' ').append(f);
                return b.toString();
            }
            case "munlock": {
                Object h = handle(w[2]);
                if (!(h instanceof DlockMultiLock))
                    throw new IllegalArgumentException(w[2] + " is not a multi-lock");
                StringBuilder b = new StringBuilder("ok");
                for (int left : ((DlockMultiLock) h).unlock())
                    b.append(' ').append(left);
                return b.toString();
            }
            case "contend":
                return contend(client(w[2]), Integer.parseInt(w[3]), Integer.parseInt(w[4]),
                        Integer.parseInt(w[5]), w[6]);
            default:
                throw new IllegalArgumentException("unknown command " + w[1]);
        }
    }

    /**
     * The first change (the leader now) is the answer; later ones are written as
     * "* leader" lines, from the moment the answer is out.
     */
    private String observe(String rid, DlockClient c, String oid, String name) throws Exception {
        CompletableFuture<LeaderChange> first = new CompletableFuture<>();
        CountDownLatch answered = new CountDownLatch(1);
        Observation o = c.observe(name, change -> {
            if (first.complete(change))
                return;
            boolean interrupted = false;
            while (true) {
                try {
                    answered.await();
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (interrupted)
                Thread.currentThread().interrupt();
            emit("* leader " + oid + " " + change);
        });
        observations.put(oid, o);
        after.put(rid, answered::countDown);
        return "ok " + first.get(GUARD_S, TimeUnit.SECONDS);
    }

    private String granted(String hid, DlockLock l) {
        watch(hid, l);
        return "ok " + l.fence() + " " + l.holds();
    }

    private void watch(String hid, Object h) {
        handles.put(hid, h);
        if (h instanceof DlockLock)
            ((DlockLock) h).onLost(e -> emit("* lost " + hid + " " + e.reason()));
        else
            ((DlockPermits) h).onLost(e -> emit("* lost " + hid + " " + e.reason()));
    }

    private String contend(DlockClient c, int tasks, int names, int rounds, String prefix) throws Exception {
        AtomicInteger[] inside = new AtomicInteger[names];
        AtomicLong[] last = new AtomicLong[names];
        for (int i = 0; i < names; i++) {
            inside[i] = new AtomicInteger();
            last[i] = new AtomicLong();
        }
        AtomicInteger grants = new AtomicInteger(), overlaps = new AtomicInteger(), nonRising = new AtomicInteger();
        List<Throwable> errors = new ArrayList<>();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < tasks; t++) {
            int task = t;
            Thread th = new Thread(() -> {
                try {
                    for (int r = 0; r < rounds; r++) {
                        int n = (task + r) % names;
                        try (DlockLock l = c.lock(prefix + n)) {
                            if (inside[n].incrementAndGet() != 1)
                                overlaps.incrementAndGet();
                            if (l.fence() <= last[n].getAndSet(l.fence()))
                                nonRising.incrementAndGet();
                            grants.incrementAndGet();
                            Thread.yield();
                            inside[n].decrementAndGet();
                        }
                    }
                } catch (Throwable e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
            });
            ts.add(th);
            th.start();
        }
        try {
            for (Thread th : ts)
                th.join();
        } catch (InterruptedException e) {
            ts.forEach(Thread::interrupt);
            throw e;
        }
        if (!errors.isEmpty())
            throw (errors.get(0) instanceof Exception) ? (Exception) errors.get(0) : new RuntimeException(errors.get(0));
        return "ok " + grants + " " + overlaps + " " + nonRising;
    }

    private DlockClient client(String cid) {
        DlockClient c = clients.get(cid);
        if (c == null)
            throw new IllegalArgumentException("no client " + cid);
        return c;
    }

    private Object handle(String hid) {
        Object h = handles.get(hid);
        if (h == null)
            throw new IllegalArgumentException("no handle " + hid);
        return h;
    }

    private DlockLock lock(String hid) {
        return (DlockLock) handle(hid);
    }

    /** A time in ms: whole, or with a fraction (a lease below 1 ms), for the client to round. */
    private static Duration ms(String word) {
        if (word.indexOf('.') < 0)
            return Duration.ofMillis(Long.parseLong(word));
        return Duration.ofNanos(new BigDecimal(word).movePointRight(6).longValueExact());
    }

    /** A lock's name: {@code %<hex>} is its bytes in hex ({@code %} alone: empty). */
    private static String name(String word) {
        if (!word.startsWith("%"))
            return word;
        return new String(HexFormat.of().parseHex(word.substring(1)), StandardCharsets.ISO_8859_1);
    }

    private static String kind(Throwable e) {
        if (e instanceof NameException) return "name";
        if (e instanceof ArgsException || e instanceof NumberFormatException) return "args";
        if (e instanceof KindException) return "kind";
        if (e instanceof NotHeldException) return "notheld";
        if (e instanceof LimitException) return "limit";
        if (e instanceof DeniedException) return "denied";
        if (e instanceof BackendException) return "backend";
        if (e instanceof InterruptedException || e instanceof CancellationException
                || e instanceof CancelledException) return "cancelled";
        if (e instanceof ConnectionClosedException) return "closed";
        if (e instanceof DlockConnectException) return "connect";
        return "other";
    }

    private static String text(Throwable e) {
        String m = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        return m.replace('\n', ' ').replace('\r', ' ');
    }
}
