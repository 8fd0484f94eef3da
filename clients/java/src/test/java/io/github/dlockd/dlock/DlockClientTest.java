// Tests of the Java client against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class DlockClientTest extends DaemonTest {
    @Override
    String prefix() {
        return "jt-";
    }


    @Test
    void grantGivesRisingFences() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            long first;
            try (DlockLock l = c.lock(name)) {
                first = l.fence();
                assertTrue(first > 0);
                assertEquals(1, l.holds());
                LockStatus s = c.status(name);
                assertInstanceOf(LockStatus.Mine.class, s);
                assertEquals(first, ((LockStatus.Mine) s).fence());
            }
            assertEquals(new LockStatus.Free(), c.status(name));
            try (DlockLock l = c.lock(name, Duration.ofSeconds(30))) {
                assertTrue(l.fence() > first, l.fence() + " > " + first);
            }
            c.ping();
        }
    }

    @Test
    void tryLockTimesOut() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            try (DlockLock l = a.lock(name)) {
                assertEquals(Optional.empty(), b.tryLock(name, Duration.ofMillis(100)));
                assertEquals(Optional.empty(), b.tryLock(name, Duration.ZERO));
                // the same client: its other handle keeps it out locally
                assertEquals(Optional.empty(), a.tryLock(name, Duration.ofMillis(50)));
                assertInstanceOf(LockStatus.Taken.class, b.status(name));
            }
            Optional<DlockLock> l = b.tryLock(name, Duration.ofMillis(100));
            assertTrue(l.isPresent());
            l.get().close();
        }
    }

    @Test
    void reentryKeepsTheFence() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            DlockLock l = c.lock(name);
            assertEquals(2, l.relock());
            assertEquals(2, l.holds());
            assertEquals(2, ((LockStatus.Mine) c.status(name)).holds());
            assertEquals(((LockStatus.Mine) c.status(name)).fence(), l.fence());
            assertEquals(1, l.unlock());
            assertEquals(0, l.unlock());
            assertEquals(new LockStatus.Free(), c.status(name));
            assertThrows(NotHeldException.class, l::unlock);
            l.close(); // nothing left: no error
        }
    }

    @Test
    void leaseExpiryIsReportedLost() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            DlockLock l = c.lock(name, Duration.ofMillis(150));
            CompletableFuture<String> cb = new CompletableFuture<>();
            l.onLost(e -> cb.complete(e.reason()));
            LockLostException e = within(l.lost());
            assertEquals("expired", e.reason());
            assertEquals(name, e.name());
            assertEquals("expired", within(cb));
            assertTrue(l.isLost());
            assertThrows(LockLostException.class, l::unlock);
            l.close();
            // the name is free for this client's next task
            c.lock(name).close();
        }
    }

    @Test
    void subMillisecondLeaseRoundsUpAndExpires() throws Exception {
        // A lease under 1 ms is 1 ms on the wire, never 0 (watchdog: no expiry).
        try (DlockClient c = DlockClient.connect(sock)) {
            DlockLock l = c.lock(name, Duration.ofNanos(999_999));
            assertEquals("expired", within(l.lost()).reason());
            l.close();
            assertEquals(new LockStatus.Free(), c.status(name));
        }
        assertEquals(1, DlockClient.millis(Duration.ofNanos(1), "lease"));
        assertEquals(1, DlockClient.millis(Duration.ofNanos(999_999), "lease"));
        assertEquals(2, DlockClient.millis(Duration.ofNanos(1_000_001), "lease"));
        assertEquals(0, DlockClient.millis(Duration.ZERO, "lease"));
    }

    @Test
    void renewExtendsTheLease() throws Exception {
        try (DlockClient c = DlockClient.connect(sock); DlockLock l = c.lock(name, Duration.ofMillis(5000))) {
            assertEquals(Duration.ofMillis(20000), l.renew(Duration.ofMillis(20000)));
            assertTrue(((LockStatus.Mine) c.status(name)).ttlMs() > 5000);
        }
    }

    @Test
    void forceUnlockIsReportedLost() throws Exception {
        try (DlockClient c = DlockClient.connect(sock); DlockClient admin = DlockClient.connect(sock)) {
            DlockLock l = c.lock(name);
            assertTrue(admin.forceUnlock(name));
            assertEquals("forced", within(l.lost()).reason());
            assertFalse(admin.forceUnlock(name));
            assertThrows(LockLostException.class, l::unlock);
        }
    }

    @Test
    void hundredThreadsFiveNamesNeverOverlap() throws Exception {
        int tasks = 100, names = 5, rounds = 5;
        AtomicInteger[] inside = new AtomicInteger[names];
        AtomicLong[] lastFence = new AtomicLong[names];
        for (int i = 0; i < names; i++) {
            inside[i] = new AtomicInteger();
            lastFence[i] = new AtomicLong();
        }
        AtomicInteger overlaps = new AtomicInteger(), nonRising = new AtomicInteger(), grants = new AtomicInteger();
        try (DlockClient c = DlockClient.connect(sock)) {
            List<CompletableFuture<Void>> done = new ArrayList<>();
            for (int t = 0; t < tasks; t++) {
                int task = t;
                CompletableFuture<Void> f = new CompletableFuture<>();
                done.add(f);
                Thread th = new Thread(() -> {
                    try {
                        for (int r = 0; r < rounds; r++) {
                            int n = (task + r) % names;
                            try (DlockLock l = c.lock(name + "-" + n)) {
                                if (inside[n].incrementAndGet() != 1)
                                    overlaps.incrementAndGet();
                                if (l.fence() <= lastFence[n].getAndSet(l.fence()))
                                    nonRising.incrementAndGet();
                                grants.incrementAndGet();
                                Thread.yield();
                                inside[n].decrementAndGet();
                            }
                        }
                        f.complete(null);
                    } catch (Throwable e) {
                        f.completeExceptionally(e);
                    }
                });
                th.start();
            }
            CompletableFuture.allOf(done.toArray(CompletableFuture<?>[]::new)).get(60, TimeUnit.SECONDS);
        }
        assertEquals(tasks * rounds, grants.get());
        assertEquals(0, overlaps.get());
        assertEquals(0, nonRising.get());
    }

    @Test
    void interruptWithdrawsTheWaitAndHoldsNothing() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            DlockLock held = a.lock(name);
            CompletableFuture<Throwable> outcome = new CompletableFuture<>();
            Thread waiter = new Thread(() -> {
                try {
                    b.lock(name).close();
                    outcome.complete(null);
                } catch (Throwable e) {
                    outcome.complete(e);
                }
            });
            waiter.start();
            awaitBusy(a, 1);
            waiter.interrupt();
            assertInstanceOf(InterruptedException.class, within(outcome));
            held.close();
            // b holds nothing, and its connection is in step
            assertEquals(new LockStatus.Free(), b.status(name));
            b.lock(name).close();
        }
    }

    @Test
    void futureCancelWithdrawsTheWait() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            DlockLock held = a.lock(name);
            CompletableFuture<DlockLock> f = b.lockAsync(name, null);
            awaitBusy(a, 1);
            assertTrue(f.cancel(true));
            assertThrows(CancellationException.class, f::join);
            // a second wait queued locally behind a cancelled one, cancelled too
            assertInstanceOf(LockStatus.Taken.class, b.status(name));
            held.close();
            assertEquals(new LockStatus.Free(), b.status(name));
            try (DlockLock l = within(b.lockAsync(name, null))) {
                assertEquals(1, l.holds());
            }
        }
    }

    @Test
    void cancelRacingTheGrantLeavesNothingHeld() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            for (int i = 0; i < 30; i++) {
                DlockLock held = a.lock(name);
                CompletableFuture<Throwable> outcome = new CompletableFuture<>();
                Thread waiter = new Thread(() -> {
                    try {
                        b.lock(name).close();
                        outcome.complete(null);
                    } catch (Throwable e) {
                        outcome.complete(e);
                    }
                });
                waiter.start();
                awaitBusy(a, 1);
                // the release and the interrupt race: either outcome, nothing left held by b
                held.close();
                waiter.interrupt();
                Throwable e = within(outcome);
                if (e != null)
                    assertInstanceOf(InterruptedException.class, e);
                assertFalse(b.status(name) instanceof LockStatus.Mine, "b still holds " + name);
                try (DlockLock l = a.tryLock(name, Duration.ofSeconds(HANG_GUARD_S)).orElseThrow()) {
                    assertEquals(1, l.holds());
                }
            }
        }
    }

    /**
     * Twenty waits on one client for names another client holds: each is granted right
     * after its own release, in the order of the releases, not the order they were asked
     * (every request is tagged: no wait holds back another).
     */
    @Test
    void manyWaitsOnOneClientGrantedInReleaseOrder() throws Exception {
        int n = 20;
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            List<DlockLock> held = new ArrayList<>();
            List<CompletableFuture<DlockLock>> waits = new ArrayList<>();
            for (int i = 0; i < n; i++)
                held.add(a.lock(name + i));
            for (int i = 0; i < n; i++)
                waits.add(b.lockAsync(name + i, null));
            awaitBusy(a, n);
            for (int i = n - 1; i >= 0; i--) { // the last asked first
                held.get(i).close();
                DlockLock l = within(waits.get(i));
                assertEquals(1, l.holds());
                for (int j = 0; j < i; j++)
                    assertFalse(waits.get(j).isDone(), "wait " + j + " granted before its release");
            }
            for (CompletableFuture<DlockLock> w : waits)
                w.join().close();
        }
    }

    /** One wait of many cancelled: it holds nothing, the others go on undisturbed. */
    @Test
    void cancelOneOfManyWaits() throws Exception {
        int n = 10;
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            List<DlockLock> held = new ArrayList<>();
            List<CompletableFuture<DlockLock>> waits = new ArrayList<>();
            for (int i = 0; i < n; i++)
                held.add(a.lock(name + i));
            for (int i = 0; i < n; i++)
                waits.add(b.lockAsync(name + i, null));
            awaitBusy(a, n);
            assertTrue(waits.get(3).cancel(true));
            assertThrows(CancellationException.class, () -> waits.get(3).join());
            awaitBusy(a, 0, n - 1);
            for (int i = 0; i < n; i++) {
                held.get(i).close();
                if (i == 3) {
                    assertFalse(b.status(name + i) instanceof LockStatus.Mine);
                    continue;
                }
                within(waits.get(i)).close();
            }
        }
    }

    /** A release is not held back behind another task's wait on the same client. */
    @Test
    void unlockNotBehindAWait() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            DlockLock other = a.lock(name + "x");
            DlockLock mine = b.lock(name + "y");
            CompletableFuture<DlockLock> w = b.lockAsync(name + "x", null);
            awaitBusy(a, 1);
            assertEquals(0, mine.unlock()); // answered while b's other task waits
            assertEquals(new LockStatus.Free(), a.status(name + "y"));
            assertFalse(w.isDone());
            other.close();
            within(w).close();
        }
    }

    /** Waits until dlockd reports {@code n} waiters (INFO waiters), with a hang guard. */
    static void awaitBusy(DlockClient c, int n) throws InterruptedException {
        awaitBusy(c, n, Integer.MAX_VALUE);
    }

    /** Waits until dlockd's INFO waiters is between {@code lo} and {@code hi}. */
    static void awaitBusy(DlockClient c, int lo, int hi) throws InterruptedException {
        long deadline = System.currentTimeMillis() + HANG_GUARD_S * 1000;
        int w;
        while ((w = Integer.parseInt(c.info().get("waiters"))) < lo || w > hi) {
            if (System.currentTimeMillis() > deadline)
                throw new AssertionError("no waiter showed up");
            Thread.sleep(5); // polling the daemon's own count, with a deadline
        }
    }

    @Test
    void daemonKilledDuringAWait() throws Exception {
        Process d = daemons.startDlockd();
        Path s2 = daemons.socket(2);
        try (DlockClient a = DlockClient.connect(s2); DlockClient b = DlockClient.connect(s2)) {
            DlockLock held = a.lock(name);
            CompletableFuture<DlockLock> waiting = b.lockAsync(name, null);
            awaitBusy(a, 1);
            d.destroyForcibly();
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> waiting.get(HANG_GUARD_S, TimeUnit.SECONDS));
            assertInstanceOf(ConnectionClosedException.class, e.getCause());
            assertEquals("closed", within(held.lost()).reason());
            assertThrows(ConnectionClosedException.class, a::ping);
            assertThrows(ConnectionClosedException.class, () -> b.lock(name));
            assertTrue(a.isClosed());
        } finally {
            d.waitFor();
        }
    }

    @Test
    void closeReportsHandlesLost() throws Exception {
        DlockClient c = DlockClient.connect(sock);
        DlockLock l = c.lock(name);
        DlockLock done = c.lock(name + "-2");
        done.close();
        c.close();
        assertEquals("closed", within(l.lost()).reason());
        assertFalse(done.isLost());
        try (DlockClient other = DlockClient.connect(sock)) {
            assertEquals(new LockStatus.Free(), other.status(name));
        }
    }

    @Test
    void missingSocketNamesThePath() {
        Path nope = daemons.dir.resolve("nope.sock");
        DlockConnectException e = assertThrows(DlockConnectException.class, () -> DlockClient.connect(nope));
        assertTrue(e.getMessage().startsWith("cannot connect to dlockd at " + nope + ": "), e.getMessage());
        assertTrue(e.getMessage().endsWith(" (is dlockd running?)"), e.getMessage());
    }

    @Test
    void readWriteLock() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            DlockLock r1 = a.readLock(name, null);
            DlockLock r2 = a.readLock(name, null); // local readers share
            try (DlockLock r3 = b.readLock(name, null)) {
                assertEquals(2, ((LockStatus.Read) a.status(name)).mine());
                assertEquals(Optional.empty(), b.tryWriteLock(name, Duration.ofMillis(50), null));
            }
            r1.close();
            r2.close();
            try (DlockLock w = b.writeLock(name, null)) {
                assertTrue(w.fence() > 0);
                assertEquals(Optional.empty(), a.tryReadLock(name, Duration.ZERO, null));
                assertInstanceOf(LockStatus.Write.class, b.status(name));
                assertThrows(KindException.class, () -> a.lock(name));
            }
        }
    }

    @Test
    void semaphore() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            assertTrue(a.semInit(name, 3));
            assertFalse(b.semInit(name, 5));
            DlockPermits p = a.acquire(name, 2, null);
            assertEquals(2, p.held());
            DlockPermits q = a.acquire(name, 1, null);
            assertEquals(3, q.held());
            assertEquals(Optional.empty(), b.tryAcquire(name, 1, Duration.ofMillis(50), null));
            assertEquals(new LockStatus.Sem(0, 3), a.status(name));
            assertEquals(2, p.release(1));
            p.close();
            q.close();
            assertEquals(new LockStatus.Sem(3, 0), a.status(name));
            assertThrows(ArgsException.class, () -> a.acquire(name, 0, null));
        }
    }

    @Test
    void fairLock() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock)) {
            try (DlockLock l = a.fairLock(name, null)) {
                assertTrue(l.fence() > 0);
                assertEquals(2, l.relock());
                assertEquals(Optional.empty(), b.tryFairLock(name, Duration.ofMillis(50), null));
            }
            b.fairLock(name, null).close();
        }
    }

    @Test
    void badNamesFailLocallyWithoutDesync() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            assertThrows(NameException.class, () -> c.lock(""));
            assertThrows(NameException.class, () -> c.lock("x".repeat(300)));
            assertThrows(NameException.class, () -> c.lock("a b"));
            assertThrows(NameException.class, () -> c.status("caf\u00e9"));
            assertThrows(ArgsException.class, () -> c.lock(name, Duration.ofMillis(-1)));
            assertThrows(ArgsException.class, () -> c.tryLock(name, Duration.ofDays(365)));
            c.ping();
            try (DlockLock l = c.lock("x".repeat(255))) {
                assertEquals(1, l.holds());
            }
            try (DlockLock l = c.lock(name)) {
                assertEquals(1, ((LockStatus.Mine) c.status(name)).holds());
            }
        }
    }

    @Test
    void badNameErrorsShowTheName() {
        NameException e = assertThrows(NameException.class, () -> DlockClient.checkName("a b"));
        assertEquals("bad lock name \"a b\": only printable ASCII without spaces is allowed (byte 2 is 0x20)",
                e.getMessage());
        e = assertThrows(NameException.class, () -> DlockClient.checkName("caf\u00e9"));
        assertEquals("bad lock name \"caf\u00e9\": only printable ASCII without spaces is allowed (byte 4 is 0xC3)",
                e.getMessage());
        e = assertThrows(NameException.class, () -> DlockClient.checkName("tab\there"));
        assertEquals("bad lock name \"tab\\there\": only printable ASCII without spaces is allowed (byte 4 is 0x09)",
                e.getMessage());
        e = assertThrows(NameException.class, () -> DlockClient.checkName(""));
        assertEquals("bad lock name \"\": must be 1 to 255 bytes", e.getMessage());
        e = assertThrows(NameException.class, () -> DlockClient.checkName("x".repeat(300)));
        assertEquals("bad lock name \"" + "x".repeat(40) + "\"... (300 bytes): must be 1 to 255 bytes",
                e.getMessage());
        e = assertThrows(NameException.class, () -> DlockClient.checkName(null));
        assertEquals("lock name must be a string, not null", e.getMessage());
    }

    @Test
    void serverErrorsAreTyped() throws Exception {
        try (DlockClient c = DlockClient.connect(sock); DlockClient d = DlockClient.connect(sock)) {
            try (DlockLock l = c.lock(name)) {
                assertThrows(KindException.class, () -> d.readLock(name, null));
                d.ping(); // in step after an error
            }
        }
    }

    @Test
    void lockAdapterOwnedByTheConnection() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            Lock lock = c.asLock(name);
            lock.lock();
            assertFalse(lock.tryLock());
            CompletableFuture<Void> other = CompletableFuture.runAsync(lock::unlock);
            within(other);
            assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
            lock.unlock();
            assertThrows(IllegalMonitorStateException.class, lock::unlock);
            assertThrows(UnsupportedOperationException.class, lock::newCondition);
        }
    }

    @Test
    void defaultSocketFromEnvironment() {
        // DLOCK_SOCKET is the process's; without it the default path is used
        String env = System.getenv("DLOCK_SOCKET");
        Path expect = env == null || env.isEmpty() ? DlockClient.DEFAULT_SOCKET : Path.of(env);
        try (DlockClient c = DlockClient.connect()) {
            assertEquals(expect, c.socket());
        } catch (DlockConnectException e) {
            assertTrue(e.getMessage().contains(expect.toString()), e.getMessage());
        }
    }
}
