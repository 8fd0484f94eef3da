// Multi-name lock tests of the Java client against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class MultiLockTest extends DaemonTest {
    List<String> names;

    @Override
    String prefix() {
        return "jm-";
    }

    @BeforeEach
    void freshNames() {
        names = List.of(name + "-a", name + "-b", name + "-c");
    }


    @Test
    void grantShowsInStatusAndCloseReleasesAll() throws Exception {
        try (DlockClient c = DlockClient.connect(sock); DlockClient other = DlockClient.connect(sock)) {
            long[] first;
            try (DlockMultiLock m = c.multiLock(names)) {
                first = m.fences();
                assertEquals(names, m.names());
                for (int i = 0; i < names.size(); i++) {
                    LockStatus s = c.status(names.get(i));
                    assertEquals(new LockStatus.Mine(1, ((LockStatus.Mine) s).ttlMs(), first[i]), s);
                    assertInstanceOf(LockStatus.Taken.class, other.status(names.get(i)));
                    assertEquals(first[i], m.fence(names.get(i)));
                }
            }
            for (String n : names)
                assertEquals(new LockStatus.Free(), other.status(n));
            try (DlockMultiLock m = c.tryMultiLock(names, Duration.ZERO, Duration.ofSeconds(5)).orElseThrow()) {
                for (int i = 0; i < names.size(); i++)
                    assertTrue(m.fences()[i] > first[i]);
                assertArrayEquals(new int[] {0, 0, 0}, m.unlock());
                assertThrows(NotHeldException.class, m::unlock);
            }
        }
    }

    @Test
    void allOrNothing() throws Exception {
        try (DlockClient holder = DlockClient.connect(sock); DlockClient c = DlockClient.connect(sock);
             DlockClient checker = DlockClient.connect(sock)) {
            DlockLock l = holder.lock(names.get(1));
            assertTrue(c.tryMultiLock(names, Duration.ofMillis(50), null).isEmpty());
            CompletableFuture<DlockMultiLock> f = c.multiLockAsync(names, null);
            DlockClientTest.awaitBusy(checker, 1);
            assertEquals(new LockStatus.Free(), checker.status(names.get(0)));
            assertEquals(new LockStatus.Free(), checker.status(names.get(2)));
            assertFalse(f.isDone());
            l.close();
            try (DlockMultiLock m = within(f)) {
                for (String n : names)
                    assertInstanceOf(LockStatus.Taken.class, checker.status(n));
                assertTrue(m.fence(names.get(1)) > l.fence());
            }
        }
    }

    @Test
    void oppositeOrdersDoNotDeadlock() throws Exception {
        try (DlockClient c1 = DlockClient.connect(sock); DlockClient c2 = DlockClient.connect(sock)) {
            List<String> ab = names.subList(0, 2);
            List<String> ba = new ArrayList<>(ab);
            Collections.reverse(ba);
            AtomicInteger inside = new AtomicInteger();
            AtomicInteger overlaps = new AtomicInteger();
            List<CompletableFuture<Void>> runs = new ArrayList<>();
            for (Object[] who : new Object[][] {{c1, ab}, {c2, ba}, {c1, ba}, {c2, ab}}) {
                DlockClient c = (DlockClient) who[0];
                @SuppressWarnings("unchecked")
                List<String> set = (List<String>) who[1];
                runs.add(CompletableFuture.runAsync(() -> {
                    for (int i = 0; i < 100; i++) {
                        try (DlockMultiLock m = c.multiLock(set)) {
                            if (inside.incrementAndGet() > 1)
                                overlaps.incrementAndGet();
                            inside.decrementAndGet();
                        } catch (InterruptedException e) {
                            throw new RuntimeException(e);
                        }
                    }
                }));
            }
            within(CompletableFuture.allOf(runs.toArray(new CompletableFuture<?>[0])));
            assertEquals(0, overlaps.get());
        }
    }

    @Test
    void interruptAndCancelLeaveNothingHeld() throws Exception {
        try (DlockClient holder = DlockClient.connect(sock); DlockClient c = DlockClient.connect(sock)) {
            DlockLock held = holder.lock(names.get(2));
            CompletableFuture<Throwable> outcome = new CompletableFuture<>();
            Thread waiter = new Thread(() -> {
                try {
                    c.multiLock(names).close();
                    outcome.complete(null);
                } catch (Throwable e) {
                    outcome.complete(e);
                }
            });
            waiter.start();
            DlockClientTest.awaitBusy(holder, 1);
            waiter.interrupt();
            assertInstanceOf(InterruptedException.class, within(outcome));
            CompletableFuture<DlockMultiLock> f = c.multiLockAsync(names, null);
            DlockClientTest.awaitBusy(holder, 1);
            assertTrue(f.cancel(true));
            assertThrows(CancellationException.class, f::join);
            held.close();
            for (String n : names)
                assertEquals(new LockStatus.Free(), c.status(n));
            try (DlockMultiLock m = holder.tryMultiLock(names, Duration.ZERO, null).orElseThrow()) {
                assertEquals(3, m.fences().length);
            }
        }
    }

    @Test
    void cancelRacingTheGrantLeavesNothingHeld() throws Exception {
        try (DlockClient holder = DlockClient.connect(sock); DlockClient c = DlockClient.connect(sock)) {
            for (int i = 0; i < 20; i++) {
                DlockLock held = holder.lock(names.get(2));
                CompletableFuture<Throwable> outcome = new CompletableFuture<>();
                Thread waiter = new Thread(() -> {
                    try {
                        c.multiLock(names).close();
                        outcome.complete(null);
                    } catch (Throwable e) {
                        outcome.complete(e);
                    }
                });
                waiter.start();
                DlockClientTest.awaitBusy(holder, 1);
                held.close(); // the release and the interrupt race: either outcome, nothing left held
                waiter.interrupt();
                Throwable e = within(outcome);
                if (e != null)
                    assertInstanceOf(InterruptedException.class, e);
                for (String n : names)
                    assertFalse(c.status(n) instanceof LockStatus.Mine, "c still holds " + n);
                try (DlockMultiLock m = holder.tryMultiLock(names, Duration.ofSeconds(HANG_GUARD_S), null)
                        .orElseThrow()) {
                    assertEquals(3, m.fences().length);
                }
            }
        }
    }

    @Test
    void aLostNameIsReportedAndTheRestReleased() throws Exception {
        try (DlockClient c = DlockClient.connect(sock); DlockClient admin = DlockClient.connect(sock)) {
            DlockMultiLock m = c.multiLock(names);
            assertTrue(admin.forceUnlock(names.get(1)));
            LockLostException e = within(m.lost());
            assertEquals(names.get(1), e.name());
            assertEquals("forced", e.reason());
            assertInstanceOf(LockStatus.Mine.class, c.status(names.get(0)));
            assertThrows(LockLostException.class, m::unlock);
            for (String n : names)
                assertEquals(new LockStatus.Free(), admin.status(n));
        }
    }

    @Test
    void reentryOfTheCallersOwnLock() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            DlockLock l = c.lock(names.get(0));
            DlockMultiLock m = c.multiLock(names.subList(0, 2), null, l);
            assertEquals(l.fence(), m.fences()[0]);
            assertEquals(2, ((LockStatus.Mine) c.status(names.get(0))).holds());
            l.close(); // the set still holds the name: another local task waits
            assertTrue(c.tryLock(names.get(0), Duration.ZERO).isEmpty());
            assertArrayEquals(new int[] {0, 0}, m.unlock());
            try (DlockLock again = c.tryLock(names.get(0), Duration.ZERO).orElseThrow()) {
                assertEquals(1, again.holds());
            }
        }
    }

    @Test
    void badSetsFailLocally() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            List<String> many = new ArrayList<>();
            for (int i = 0; i <= DlockClient.MULTI_NAMES_MAX; i++)
                many.add(names.get(0) + "-" + i);
            assertThrows(ArgsException.class, () -> c.multiLock(List.of()));
            assertThrows(ArgsException.class, () -> c.multiLock(many));
            assertThrows(ArgsException.class, () -> c.multiLock(List.of(names.get(0), names.get(1), names.get(0))));
            assertThrows(NameException.class, () -> c.tryMultiLock(List.of(names.get(0), "x".repeat(300)),
                    Duration.ZERO, null));
            c.ping();
            try (DlockMultiLock m = c.multiLock(many.subList(0, DlockClient.MULTI_NAMES_MAX))) {
                assertEquals(DlockClient.MULTI_NAMES_MAX, m.fences().length);
            }
        }
    }
}
