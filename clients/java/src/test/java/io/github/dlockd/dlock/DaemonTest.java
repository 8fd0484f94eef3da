// Test base: a class's own redis-server and dlockd, started once for its tests, and a fresh name for each.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.nio.file.Path;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;

/** The daemons of one test class (sock: its dlockd's socket) and, for each test, a lock name
 *  no other test uses: prefix() then a UUID. */
abstract class DaemonTest {
    /** How long a step may take before the test calls it a hang. */
    static final long HANG_GUARD_S = 10;
    static Daemons daemons;
    static Path sock;
    String name;

    /** The test class's names start with this. */
    abstract String prefix();

    @BeforeAll
    static void start() throws Exception {
        daemons = new Daemons();
        daemons.startDlockd();
        sock = daemons.socket(1);
    }

    @AfterAll
    static void stop() throws Exception {
        if (daemons != null)
            daemons.close();
        daemons = null;
    }

    @BeforeEach
    void freshName() {
        name = prefix() + UUID.randomUUID();
    }

    static <T> T within(CompletableFuture<T> f) throws Exception {
        return f.get(HANG_GUARD_S, TimeUnit.SECONDS);
    }
}
