// make bench's Java row: threads sharing one DlockClient, each locking and unlocking a name of its own.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock.bench;

import io.github.dlockd.dlock.DlockClient;
import io.github.dlockd.dlock.DlockLock;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@code --threads} threads (50) share ONE client, that is one connection to dlockd, each
 * looping {@code lock(name)} and {@code unlock()} on a name of its own (no contention).
 * After {@code --warmup} seconds (1) pairs are counted for {@code --seconds} (8); one line
 * goes to stdout as tests/bench/dlock_bench.c's throughput prints it: {@code
 * pairs_per_sec=… pairs=… seconds=… threads=… client_cpu_pct=… all_pairs=…} ({@code
 * all_pairs} counts the warm-up's too). Exit 1 with the reason on stderr when a call fails.
 * Run: {@code java -cp build/dlock.jar:build/dlock-tests.jar io.github.dlockd.dlock.bench.Bench
 * --socket DLOCKD_SOCK} ({@code make clients-java}; the benchmark is in the test jar).
 */
public final class Bench {
    private Bench() {
    }

    public static void main(String[] args) throws Exception {
        String socket = null;
        int threads = 50;
        double seconds = 8, warmup = 1;
        for (int i = 0; i < args.length; i += 2) {
            if (i + 1 >= args.length)
                usage(args[i] + " needs a value");
            String v = args[i + 1];
            switch (args[i]) {
                case "--socket" -> socket = v;
                case "--threads" -> threads = Integer.parseInt(v);
                case "--seconds" -> seconds = Double.parseDouble(v);
                case "--warmup" -> warmup = Double.parseDouble(v);
                default -> usage("unknown option " + args[i]);
            }
        }
        if (socket == null)
            usage("--socket DLOCKD_SOCK is required");

        long start = System.nanoTime();
        long t0 = start + (long) (warmup * 1e9), t1 = t0 + (long) (seconds * 1e9);
        AtomicLong pairs = new AtomicLong(), all = new AtomicLong();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> ts = new ArrayList<>();
        try (DlockClient client = DlockClient.connect(Path.of(socket))) {
            for (int i = 0; i < threads; i++) {
                String name = "javabench-" + ProcessHandle.current().pid() + "-" + i;
                Thread t = new Thread(() -> {
                    try {
                        while (failure.get() == null) {
                            DlockLock l = client.lock(name);
                            l.unlock();
                            long now = System.nanoTime();
                            all.incrementAndGet();
                            if (now >= t1)
                                return;
                            if (now >= t0)
                                pairs.incrementAndGet();
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }, "bench-" + i);
                ts.add(t);
                t.start();
            }
            for (Thread t : ts)
                t.join();
        }
        if (failure.get() != null) {
            System.err.println("Bench: " + failure.get());
            System.exit(1);
        }
        double elapsed = (t1 - t0) / 1e9;
        double wall = (System.nanoTime() - start) / 1e9;
        // this process's CPU: the JVM's own threads (JIT, GC) included
        double cpu = ProcessHandle.current().info().totalCpuDuration().map(d -> d.toNanos() / 1e9).orElse(-1.0);
        System.out.printf("pairs_per_sec=%.0f pairs=%d seconds=%.3f threads=%d client_cpu_pct=%.1f all_pairs=%d%n",
                pairs.get() / elapsed, pairs.get(), elapsed, threads, cpu < 0 ? -1 : 100 * cpu / wall, all.get());
    }

    private static void usage(String why) {
        System.err.println("Bench: " + why);
        System.err.println("usage: java -cp dlock.jar:dlock-tests.jar io.github.dlockd.dlock.bench.Bench"
                + " --socket DLOCKD_SOCK [--threads 50] [--seconds 8] [--warmup 1]");
        System.exit(2);
    }
}
