// Test fixture: a private redis-server and dlockd daemons on sockets in a temp dir.
// SPDX-License-Identifier: MIT
package io.github.dlockd.dlock;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/** Starts redis-server and dlockd (DLOCKD_BIN, else {@link #DEFAULT_BIN}) and stops them. */
final class Daemons implements AutoCloseable {
    static final long START_TIMEOUT_MS = 15000;
    static final int CONF_LEASE_MS = 600;
    /** The checkout's dlockd (make) as seen from clients/java, where Maven runs the tests. */
    static final String DEFAULT_BIN = "../../build/dlockd";

    final Path dir;
    private final Path redisSock;
    private final List<Process> procs = new java.util.concurrent.CopyOnWriteArrayList<>();
    private int count;

    Daemons() throws IOException, InterruptedException {
        dir = Files.createTempDirectory("dlock-java-");
        redisSock = dir.resolve("redis.sock");
        Runtime.getRuntime().addShutdownHook(new Thread(() -> procs.forEach(Process::destroyForcibly)));
        spawn("redis.log", "redis-server", "--port", "0", "--unixsocket", redisSock.toString(),
                "--save", "", "--appendonly", "no", "--dir", dir.toString());
    }

    /** Starts one more dlockd on the shared redis; returns its process (its socket is {@link #socket}). */
    Process startDlockd() throws IOException, InterruptedException {
        int n = ++count;
        Path sock = socket(n);
        Path conf = dir.resolve("dlockd" + n + ".conf");
        Files.writeString(conf, "[server]\nsocket = " + sock + "\nadmin_uids = 0\n[redis]\nurl = unix://"
                + redisSock + "\n[lock]\nlease_ms = " + CONF_LEASE_MS + "\n");
        Files.setPosixFilePermissions(conf, PosixFilePermissions.fromString("rw-------"));
        String bin = System.getenv("DLOCKD_BIN");
        if (bin == null || bin.isEmpty())
            bin = DEFAULT_BIN;
        if (!new File(bin).canExecute())
            throw new IllegalStateException("dlockd binary " + bin + " not found; set DLOCKD_BIN");
        bin = Path.of(bin).toAbsolutePath().toString();   // it runs in dir, not here
        Process p = spawn("dlockd" + n + ".log", bin, "-c", conf.toString());
        long deadline = System.currentTimeMillis() + START_TIMEOUT_MS;
        String last = "";
        while (System.currentTimeMillis() < deadline) {
            for (Process q : procs)
                if (!q.isAlive())
                    throw new IllegalStateException("a daemon exited: " + q.exitValue() + "\n" + logs());
            try (DlockClient c = DlockClient.connect(sock)) {
                if ("up".equals(c.info().get("redis")))
                    return p;
                last = "redis not up";
            } catch (DlockException e) {
                last = e.getMessage();
            }
            Thread.sleep(20); // polling for start-up, with a deadline
        }
        throw new IllegalStateException("dlockd did not come up: " + last + "\n" + logs());
    }

    Path socket(int n) {
        return dir.resolve("d" + n + ".sock");
    }

    private Process spawn(String log, String... argv) throws IOException {
        Process p = new ProcessBuilder(argv).directory(dir.toFile()).redirectErrorStream(true)
                .redirectOutput(dir.resolve(log).toFile()).redirectInput(ProcessBuilder.Redirect.PIPE).start();
        procs.add(p);
        return p;
    }

    String logs() {
        StringBuilder sb = new StringBuilder();
        try (Stream<Path> s = Files.list(dir)) {
            for (Path f : (Iterable<Path>) s.filter(f -> f.toString().endsWith(".log"))::iterator)
                sb.append("--- ").append(f.getFileName()).append(" ---\n").append(Files.readString(f));
        } catch (IOException e) {
            sb.append(e);
        }
        return sb.toString();
    }

    @Override
    public void close() throws IOException, InterruptedException {
        for (int i = procs.size() - 1; i >= 0; i--) {
            Process p = procs.get(i);
            p.destroy();
            if (!p.waitFor(5, java.util.concurrent.TimeUnit.SECONDS)) {
                p.destroyForcibly();
                p.waitFor();
            }
        }
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        }
    }
}
