// Count-down latches against real dlockd daemons sharing one redis-server.
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
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class LatchTest extends DaemonTest {
    @Override
    String prefix() {
        return "jlatch-";
    }

    /**
     * Ten waits on two daemons (blocking ones on threads and futures) all go on after the
     * third count-down, none before; the latch is then gone and open.
     */
    @Test
    void manyWaitersReleasedByTheLastCountDown() throws Exception {
        daemons.startDlockd();
        Path s2 = daemons.socket(2);
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(s2);
             DlockClient counter = DlockClient.connect(sock)) {
            assertTrue(counter.latchSet(name, 3));
            assertFalse(a.latchSet(name, 5));
            assertEquals(3, b.latchCount(name));
            assertEquals(3, b.tryAwait(name, Duration.ZERO));
            long t0 = System.nanoTime();
            assertEquals(3, a.tryAwait(name, Duration.ofMillis(100)));
            assertTrue(System.nanoTime() - t0 >= 90_000_000L, "tryAwait gave up early");

            int baseA = waiters(counter), baseB = waiters(b);
            List<CompletableFuture<?>> waits = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                DlockClient c = i % 2 == 0 ? a : b;
                CompletableFuture<Void> blocking = new CompletableFuture<>();
                Thread t = new Thread(() -> {
                    try {
                        c.await(name);
                        blocking.complete(null);
                    } catch (Throwable e) {
                        blocking.completeExceptionally(e);
                    }
                });
                t.start();
                waits.add(blocking);
                waits.add((i % 2 == 0 ? b : a).awaitAsync(name));
            }
            DlockClientTest.awaitBusy(counter, baseA + 5, baseA + 5);
            DlockClientTest.awaitBusy(b, baseB + 5, baseB + 5);
            assertEquals(2, counter.countDown(name));
            assertEquals(1, counter.countDown(name));
            assertEquals(1, b.tryAwait(name, Duration.ZERO));
            for (CompletableFuture<?> w : waits)
                assertFalse(w.isDone(), "a wait went on at count 1");
            assertEquals(0, counter.countDown(name));
            for (CompletableFuture<?> w : waits)
                within(w);
            assertEquals(0, a.latchCount(name));
            assertEquals(0, a.countDown(name));       // a latch that is gone stays so
            b.await(name);                            // and is open
            assertEquals(0, a.tryAwait(name, Duration.ZERO));
            assertEquals(0L, within(b.tryAwaitAsync(name, Duration.ofSeconds(1))));
        }
    }

    /** An interrupted await and a cancelled future leave no waiter; the client goes on. */
    @Test
    void interruptAndCancelWithdrawTheWait() throws Exception {
        try (DlockClient c = DlockClient.connect(sock); DlockClient checker = DlockClient.connect(sock)) {
            assertTrue(c.latchSet(name, 1));
            int base = waiters(checker);
            CompletableFuture<Throwable> outcome = new CompletableFuture<>();
            Thread waiter = new Thread(() -> {
                try {
                    c.await(name);
                    outcome.complete(null);
                } catch (Throwable e) {
                    outcome.complete(e);
                }
            });
            waiter.start();
            DlockClientTest.awaitBusy(checker, base + 1);
            waiter.interrupt();
            assertInstanceOf(InterruptedException.class, within(outcome));
            DlockClientTest.awaitBusy(checker, base, base);

            CompletableFuture<Long> f = c.tryAwaitAsync(name, Duration.ofMinutes(1));
            DlockClientTest.awaitBusy(checker, base + 1);
            assertTrue(f.cancel(true));
            assertTrue(f.isCancelled());
            assertThrows(CancellationException.class, f::join);
            CompletableFuture<Void> g = c.awaitAsync(name);
            DlockClientTest.awaitBusy(checker, base + 1);
            assertTrue(g.cancel(true));
            assertThrows(CancellationException.class, g::join);
            DlockClientTest.awaitBusy(checker, base, base);
            assertEquals(0, c.countDown(name));
        }
    }

    /** A latch is not a lock, nor a lock a latch; bad input is refused before it is sent. */
    @Test
    void kindAndBadInput() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            assertTrue(c.latchSet(name, 2));
            assertThrows(KindException.class, () -> c.tryLock(name, Duration.ZERO));
            try (DlockLock l = c.lock(name + "-lock")) {
                assertThrows(KindException.class, () -> c.latchSet(name + "-lock", 1));
                assertThrows(KindException.class, () -> c.countDown(name + "-lock"));
                assertThrows(KindException.class, () -> c.tryAwait(name + "-lock", Duration.ZERO));
            }
            assertThrows(ArgsException.class, () -> c.latchSet(name, 0));
            assertThrows(ArgsException.class, () -> c.latchSet(name, 2147483648L));
            assertThrows(ArgsException.class, () -> c.tryAwait(name, Duration.ofMillis(-1)));
            assertThrows(ArgsException.class, () -> c.tryAwait(name, null));
            assertThrows(NameException.class, () -> c.await("a b"));
            assertThrows(NameException.class, () -> c.awaitAsync(""));
            assertThrows(NameException.class, () -> c.countDown("x".repeat(256)));
            c.ping();
            assertEquals(1, c.countDown(name));
            assertEquals(0, c.countDown(name));
        }
    }

    private static int waiters(DlockClient c) {
        return Integer.parseInt(c.info().get("waiters"));
    }
}
