// Tests of the Java client's leader election against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class ElectionTest extends DaemonTest {
    @Override
    String prefix() {
        return "je-";
    }


    /** Changes an observation reported, read with a hang guard. */
    static final class Changes {
        final LinkedBlockingQueue<LeaderChange> q = new LinkedBlockingQueue<>();
        final List<LeaderChange> told = new ArrayList<>();

        LeaderChange next() throws InterruptedException {
            LeaderChange c = q.poll(HANG_GUARD_S, TimeUnit.SECONDS);
            if (c == null)
                throw new AssertionError("no leader change");
            told.add(c);
            return c;
        }

        /** The next leader: dlockd may tell a NONE between two leaders (PROTOCOL.md). */
        LeaderChange nextLeader() throws InterruptedException {
            LeaderChange c;
            while ((c = next()).isNone()) {
                // skipped
            }
            return c;
        }

        /** The observers' promises: fences rise; one is told again only after a NONE. */
        void checkOrder() {
            long last = 0;
            LeaderChange prev = null;
            for (LeaderChange c : told) {
                if (c.isNone()) {
                    assertFalse(prev != null && prev.isNone(), "NONE twice in a row: " + told);
                } else {
                    long f = c.leader().orElseThrow().fence();
                    assertTrue(f > last || f == last && prev != null && prev.isNone(),
                            "fence " + f + " after " + last + ": " + told);
                    last = f;
                }
                prev = c;
            }
        }
    }

    static LeaderChange leads(String name, long fence, String value) {
        return new LeaderChange(name, Optional.of(new Leader(fence, value)));
    }

    static LeaderChange none(String name) {
        return new LeaderChange(name, Optional.empty());
    }

    @Test
    void campaignAndHandOverOnResign() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock);
             DlockClient checker = DlockClient.connect(sock)) {
            assertEquals(Optional.empty(), checker.leader(name));
            DlockLeadership la = a.elect(name, "a:1");
            assertTrue(la.fence() > 0);
            assertEquals("a:1", la.value());
            assertTrue(la.isLeading());
            assertEquals(Optional.of(new Leader(la.fence(), "a:1")), checker.leader(name));
            CompletableFuture<DlockLeadership> fb = b.electAsync(name, "b:2", null);
            DlockClientTest.awaitBusy(checker, 1);
            assertFalse(fb.isDone());
            assertTrue(la.resign());
            assertFalse(la.isLeading());
            try (DlockLeadership lb = within(fb)) {
                assertTrue(lb.fence() > la.fence(), lb.fence() + " > " + la.fence());
                assertEquals(Optional.of(new Leader(lb.fence(), "b:2")), checker.leader(name));
                assertFalse(la.resign());
                la.close(); // nothing left: no error
            }
            assertEquals(Optional.empty(), checker.leader(name));
            assertFalse(la.isLost());
        }
    }

    @Test
    void leaderClosedNextLeads() throws Exception {
        try (DlockClient b = DlockClient.connect(sock); DlockClient checker = DlockClient.connect(sock)) {
            DlockClient a = DlockClient.connect(sock);
            DlockLeadership la = a.elect(name, "a");
            CompletableFuture<DlockLeadership> fb = b.electAsync(name, "b", null);
            DlockClientTest.awaitBusy(checker, 1);
            a.close();
            assertEquals("closed", within(la.lost()).reason());
            assertThrows(ConnectionClosedException.class, la::resign);
            try (DlockLeadership lb = within(fb)) {
                assertTrue(lb.fence() > la.fence());
            }
        }
    }

    @Test
    void observerSeesEveryLeaderInFenceOrder() throws Exception {
        Changes seen = new Changes();
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock);
             DlockClient oc = DlockClient.connect(sock);
             Observation o = oc.observe(name, seen.q::add)) {
            assertEquals(name, o.name());
            assertEquals(none(name), seen.next());
            List<Long> fences = new ArrayList<>();
            for (int round = 0; round < 3; round++) {
                DlockLeadership la = a.elect(name, "a");
                assertEquals(leads(name, la.fence(), "a"), seen.nextLeader());
                CompletableFuture<DlockLeadership> fb = b.electAsync(name, "b", null);
                DlockClientTest.awaitBusy(oc, 1);
                la.close();
                DlockLeadership lb = within(fb);
                assertEquals(leads(name, lb.fence(), "b"), seen.nextLeader());
                lb.close();
                assertTrue(seen.next().isNone());
                fences.add(la.fence());
                fences.add(lb.fence());
            }
            for (int i = 1; i < fences.size(); i++)
                assertTrue(fences.get(i) > fences.get(i - 1), fences.toString());
            seen.checkOrder();
            o.close();
            assertTrue(o.isClosed());
            within(o.done());
            a.elect(name, "after").close();
            oc.ping(); // whatever dlockd sent oc is read by now
            assertEquals(null, seen.q.poll(), "a change after close");
        }
    }

    @Test
    void interruptWithdrawsTheCampaign() throws Exception {
        try (DlockClient a = DlockClient.connect(sock); DlockClient b = DlockClient.connect(sock);
             DlockClient checker = DlockClient.connect(sock)) {
            DlockLeadership la = a.elect(name, "a");
            CompletableFuture<Throwable> outcome = new CompletableFuture<>();
            Thread waiter = new Thread(() -> {
                try {
                    b.elect(name, "b").close();
                    outcome.complete(null);
                } catch (Throwable e) {
                    outcome.complete(e);
                }
            });
            waiter.start();
            DlockClientTest.awaitBusy(checker, 1);
            waiter.interrupt();
            assertInstanceOf(InterruptedException.class, within(outcome));
            b.ping(); // in step
            la.close();
            assertEquals(Optional.empty(), checker.leader(name), "the withdrawn candidate leads");
            // and the future form
            la = a.elect(name, "a");
            CompletableFuture<DlockLeadership> f = b.electAsync(name, "b", null);
            DlockClientTest.awaitBusy(checker, 1);
            assertTrue(f.cancel(true));
            assertThrows(CancellationException.class, f::join);
            la.close();
            b.ping();
            assertEquals(Optional.empty(), checker.leader(name));
            b.elect(name, "b").close();
        }
    }

    @Test
    void badValueAndKind() throws Exception {
        try (DlockClient c = DlockClient.connect(sock); DlockClient d = DlockClient.connect(sock)) {
            assertThrows(ArgsException.class, () -> c.elect(name, "a b"));
            assertThrows(ArgsException.class, () -> c.elect(name, ""));
            assertThrows(ArgsException.class, () -> c.elect(name, "v".repeat(256)));
            assertThrows(NameException.class, () -> c.elect("n".repeat(256), "v"));
            assertThrows(NameException.class, () -> c.leader("a b"));
            assertThrows(NameException.class, () -> c.observe("", ch -> { }));
            assertThrows(ArgsException.class, () -> c.elect(name, "v", Duration.ofMillis(-1)));
            c.ping();
            String v = "v".repeat(255);
            try (DlockLeadership l = c.elect(name, v)) {
                assertEquals(Optional.of(new Leader(l.fence(), v)), d.leader(name));
                assertThrows(KindException.class, () -> d.tryLock(name, Duration.ZERO));
            }
            try (DlockLock l = c.lock(name + "-lock")) {
                assertThrows(KindException.class, () -> d.elect(name + "-lock", "v"));
                d.ping();
            }
        }
    }
}
