// Tests of the Java client's list() against a real dlockd and redis-server.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class ListTest extends DaemonTest {
    @Override
    String prefix() {
        return "jl-";
    }

    @Test
    void listsAHeldLockWithFenceAndHolder() throws Exception {
        try (DlockClient c = DlockClient.connect(sock); DlockClient other = DlockClient.connect(sock);
             DlockLock l = c.lock(name)) {
            Listing got = other.list(name);
            assertFalse(got.more());
            assertEquals(1, got.entries().size());
            Listing.Entry e = got.entries().get(0);
            assertEquals(name, e.name());
            assertEquals("lock", e.kind());
            assertEquals(l.fence(), e.fence().getAsLong());
            assertNull(e.value());
            assertEquals(1, e.holders().total());
            assertEquals(0, e.waiters().total());
            Listing.Party h = e.holders().list().get(0);
            assertEquals(ProcessHandle.current().pid(), h.pid());
            assertEquals(1, h.count());
            assertNotNull(h.host());
            assertTrue(h.dlockdPid() > 0 && h.ageMs() >= 0, h.toString());

            String sem = name + "-sem";
            c.semInit(sem, 3);
            try (DlockPermits p = c.acquire(sem, 2, null)) {
                Listing.Entry s = c.list(sem).entries().get(0);
                assertEquals("sem", s.kind());
                assertTrue(s.fence().isEmpty());
                assertEquals("1", s.value());
                assertEquals(2, s.holders().list().get(0).count());
            }
        }
    }

    @Test
    void patternLimitAndMore() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            for (int i = 0; i < 3; i++)
                c.lock(name + "-" + i);
            c.lock(name + "x"); // not matched by name-*
            Listing all = c.list(name + "-*");
            assertFalse(all.more());
            assertEquals(List.of(name + "-0", name + "-1", name + "-2"),
                    all.entries().stream().map(Listing.Entry::name).toList());
            Listing two = c.list(name + "-*", 2);
            assertTrue(two.more());
            assertEquals(2, two.entries().size());
            Listing three = c.list(name + "-*", 3);
            assertFalse(three.more());
            assertEquals(3, three.entries().size());
            Listing none = c.list(name + "-nothing*");
            assertFalse(none.more());
            assertTrue(none.entries().isEmpty());
            // in step after counted replies
            assertTrue(c.status(name + "-0") instanceof LockStatus.Mine);
        }
    }

    @Test
    void badLimitOrPatternIsArgs() throws Exception {
        try (DlockClient c = DlockClient.connect(sock)) {
            assertThrows(ArgsException.class, () -> c.list("*", 0));
            assertThrows(ArgsException.class, () -> c.list("*", 1001));
            assertThrows(ArgsException.class, () -> c.list("a".repeat(300)));
            assertThrows(ArgsException.class, () -> c.list("a b"));
            // dlockd's own check gives the same type, and the connection stays in step
            assertThrows(ArgsException.class, () -> c.call("LIST * 1001", r -> r));
            c.ping();
        }
    }
}
