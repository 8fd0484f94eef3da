#!/usr/bin/python3
"""dlockd's Prometheus endpoint, scraped for real and parsed with prometheus_client.

Starts a private redis-server and dlockd (metrics on a TCP port and, in a
second daemon, on a Unix socket), makes requests whose counts are known,
scrapes GET /metrics and checks the parsed families. Debian's python3 with
python3-prometheus-client (make deps).

    DLOCKD_BIN=$PWD/build/dlockd /usr/bin/python3 tests/metrics/test_metrics.py
"""
# SPDX-License-Identifier: MIT

import ctypes
import http.client
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from prometheus_client.parser import text_string_to_metric_families

DLOCKD = os.environ.get("DLOCKD_BIN", os.path.abspath("build/dlockd"))
DLOCK = os.environ.get("DLOCK_BIN", os.path.abspath("build/dlock"))
WAIT_S = 10.0  # generous bound on anything awaited


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(what, fn, timeout=WAIT_S):
    end = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=WAIT_S)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT_S)
        self.sock.connect(self.path)


class Client(object):
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(WAIT_S)
        self.s.connect(path)
        self.f = self.s.makefile("r")

    def ask(self, line):
        self.s.sendall((line + "\n").encode())
        return self.f.readline().rstrip("\n")

    def close(self):
        self.f.close()
        self.s.close()


class MetricsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlockd-metrics-")
        self.procs = []
        self.adopted = []  # pids of hand-overs' new processes (our children: subreaper)
        self.files = []
        self.conns = []
        self.redis_sock = os.path.join(self.dir, "redis.sock")
        self.redis = self.spawn(["redis-server", "--port", "0", "--unixsocket", self.redis_sock,
                                 "--save", "", "--appendonly", "no"], "redis.log")
        wait_for("redis", lambda: os.path.exists(self.redis_sock))

    def tearDown(self):
        for pid in self.adopted:
            os.kill(pid, signal.SIGTERM)
            end = time.monotonic() + WAIT_S
            while os.waitpid(pid, os.WNOHANG) == (0, 0):
                if time.monotonic() > end:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.02)
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(WAIT_S)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for c in self.conns:
            c.close()
        for f in self.files:
            f.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def spawn(self, argv, log):
        f = open(os.path.join(self.dir, log), "w")
        self.files.append(f)
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=self.dir)
        self.procs.append(p)
        return p

    def dlockd(self, metrics, name="d"):
        conf = os.path.join(self.dir, name + ".conf")
        sock = os.path.join(self.dir, name + ".sock")
        with open(conf, "w") as f:
            f.write("[server]\nadmin_uids = 0\nmetrics = %s\n[redis]\nurl = unix://%s\n"
                    "command_timeout_ms = 1000\nconnect_timeout_ms = 500\n"
                    % (metrics, self.redis_sock))
        os.chmod(conf, 0o600)
        p = self.spawn([DLOCKD, "-c", conf, "-s", sock], name + ".log")
        c = wait_for("dlockd's socket", lambda: self.connect(p, sock, name))
        wait_for("redis=up", lambda: " redis=up " in c.ask("INFO"))
        c.close()
        return p, sock

    def connect(self, p, sock, name):
        """A connection once dlockd listens; the socket file appears at bind,
        a moment before listen. A daemon that exited fails at once."""
        if p.poll() is not None:
            raise AssertionError("dlockd %s exited with %s: %s" % (name, p.returncode, self.log(name)))
        try:
            return Client(sock)
        except (FileNotFoundError, ConnectionRefusedError):
            return None

    def log(self, name="d"):
        with open(os.path.join(self.dir, name + ".log")) as f:
            return f.read()

    def scrape(self, conn):
        if conn not in self.conns:
            self.conns.append(conn)
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        body = r.read().decode()
        self.assertEqual(r.status, 200, body)
        self.assertTrue(r.getheader("Content-Type").startswith("text/plain; version=0.0.4"))
        fams = {f.name: f for f in text_string_to_metric_families(body)}
        return fams, body

    @staticmethod
    def value(fams, family, sample=None, **labels):
        f = fams[family]
        for s in f.samples:
            if (sample is None or s.name == sample) and all(
                    s.labels.get(k) == v for k, v in labels.items()):
                return s.value
        return 0.0

    def test_tcp_scrape_parses_and_counts(self):
        port = free_port()
        _, sock = self.dlockd("127.0.0.1:%d" % port)
        a, b = Client(sock), Client(sock)
        self.assertTrue(a.ask("LOCK m").startswith("OK "))
        self.assertTrue(a.ask("LOCK m").startswith("OK "))         # a reentry
        self.assertTrue(b.ask("TRYLOCK m 50").startswith("TIMEOUT"))
        self.assertEqual(a.ask("UNLOCK m"), "OK 1")
        self.assertEqual(a.ask("UNLOCK m"), "OK 0")
        self.assertTrue(b.ask("UNLOCK m").startswith("ERR NOTHELD"))
        self.assertTrue(b.ask("NOPE").startswith("ERR UNKNOWN"))
        self.assertTrue(b.ask("LOCK w").startswith("OK "))        # held during the scrape

        fams, body = self.scrape(http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S))
        req = "dlockd_requests"
        self.assertEqual(self.value(fams, req, verb="lock", result="ok"), 3)
        self.assertEqual(self.value(fams, req, verb="trylock", result="timeout"), 1)
        self.assertEqual(self.value(fams, req, verb="unlock", result="ok"), 2)
        self.assertEqual(self.value(fams, req, verb="unlock", result="notheld"), 1)
        self.assertEqual(self.value(fams, req, verb="unknown", result="unknown"), 1)
        self.assertEqual(fams["dlockd_requests"].type, "counter")
        self.assertEqual(self.value(fams, "dlockd_grants"), 2)
        self.assertEqual(self.value(fams, "dlockd_reentries"), 1)
        self.assertEqual(self.value(fams, "dlockd_timeouts"), 1)
        self.assertEqual(self.value(fams, "dlockd_lost", reason="expired"), 0)
        self.assertEqual(self.value(fams, "dlockd_connections"), 2)
        self.assertEqual(self.value(fams, "dlockd_locks_held"), 1)
        self.assertEqual(self.value(fams, "dlockd_waiters"), 0)
        self.assertEqual(self.value(fams, "dlockd_backend_up"), 1)
        self.assertEqual(self.value(fams, "dlockd_redis_node_up", node=self.redis_sock,
                                    role="primary"), 1)
        for h in ("dlockd_wait_seconds", "dlockd_hold_seconds", "dlockd_redis_rtt_seconds"):
            self.assertEqual(fams[h].type, "histogram", h)
        self.assertEqual(self.value(fams, "dlockd_wait_seconds", "dlockd_wait_seconds_count"), 2)
        self.assertEqual(self.value(fams, "dlockd_wait_seconds", "dlockd_wait_seconds_bucket",
                                    le="+Inf"), 2)
        self.assertEqual(self.value(fams, "dlockd_hold_seconds", "dlockd_hold_seconds_count"), 1)
        self.assertGreater(self.value(fams, "dlockd_redis_rtt_seconds",
                                      "dlockd_redis_rtt_seconds_count", node=self.redis_sock), 0)
        # Buckets are cumulative and end in +Inf.
        buckets = [s.value for s in fams["dlockd_redis_rtt_seconds"].samples
                   if s.name.endswith("_bucket")]
        self.assertEqual(buckets, sorted(buckets))

        # Redis going away shows in the gauges; a second scrape on the same
        # connection (keep-alive) works.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
        self.redis.send_signal(signal.SIGKILL)
        self.redis.wait()

        def down():
            fams, _ = self.scrape(conn)
            return (self.value(fams, "dlockd_backend_up") == 0 and
                    self.value(fams, "dlockd_redis_node_up", node=self.redis_sock) == 0)
        wait_for("node_up 0 after Redis died", down)
        a.close()
        b.close()

    def test_election_gauges(self):
        port = free_port()
        _, sock = self.dlockd("127.0.0.1:%d" % port)
        leader, waiter, observer = Client(sock), Client(sock), Client(sock)
        self.assertTrue(leader.ask("ELECT e A:1").startswith("OK "))
        self.assertTrue(observer.ask("OBSERVE e").startswith("OK "))
        waiter.s.sendall(b"ELECT e B:1\n")               # waits behind the leader

        def scrape_when(pred, what):
            def once():
                fams, _ = self.scrape(http.client.HTTPConnection("127.0.0.1", port,
                                                                 timeout=WAIT_S))
                return fams if pred(fams) else None
            return wait_for(what, once)

        fams = scrape_when(lambda f: self.value(f, "dlockd_election_candidates") == 1,
                           "a candidate waiting")
        self.assertEqual(self.value(fams, "dlockd_observers"), 1)
        self.assertEqual(self.value(fams, "dlockd_observed_names"), 1)
        self.assertEqual(fams["dlockd_leader_events"].type, "counter")
        self.assertEqual(leader.ask("RESIGN e"), "OK 1")     # B leads: the observer is told
        fams = scrape_when(lambda f: self.value(f, "dlockd_leader_events") >= 1,
                           "a !LEADER event counted")
        self.assertEqual(self.value(fams, "dlockd_election_candidates"), 0)
        for c in (leader, waiter, observer):
            c.close()

    def test_handover_keeps_listener_and_counters(self):
        """SIGUSR2 (issue 39): the new process serves the same address,
        dlockd_upgrades_total says 1, and the counters go on from where
        they were (a reset would show as fewer grants and requests)."""
        PR_SET_CHILD_SUBREAPER = 36  # the new process is the old one's child
        self.assertEqual(ctypes.CDLL(None, use_errno=True).prctl(
            PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0)
        port = free_port()
        p, sock = self.dlockd("127.0.0.1:%d" % port)
        a, b = Client(sock), Client(sock)
        self.assertTrue(a.ask("LOCK hm").startswith("OK "))
        self.assertTrue(a.ask("LOCK hm2").startswith("OK "))
        self.assertTrue(b.ask("TRYLOCK hm 10").startswith("TIMEOUT"))
        before, _ = self.scrape(http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S))
        self.assertEqual(self.value(before, "dlockd_upgrades"), 0)
        self.assertEqual(self.value(before, "dlockd_grants"), 2)

        def handed_over():
            line = b.ask("INFO")  # read by whichever process serves
            return line if " upgrades=1 " in line else None
        p.send_signal(signal.SIGUSR2)
        info = wait_for("upgrades=1 in INFO", handed_over, timeout=3 * WAIT_S)
        pid = int(info.split(" pid=")[1].split()[0])
        self.assertNotEqual(pid, p.pid)
        self.adopted.append(pid)
        self.assertEqual(p.wait(WAIT_S), 0, "the old process's exit")

        after, body = self.scrape(http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S))
        self.assertEqual(self.value(after, "dlockd_upgrades"), 1)
        self.assertEqual(self.value(after, "dlockd_upgrade_failures"), 0)
        self.assertEqual(self.value(after, "dlockd_grants"), 2)
        req = "dlockd_requests"
        self.assertEqual(self.value(after, req, verb="lock", result="ok"), 2)
        self.assertEqual(self.value(after, req, verb="trylock", result="timeout"), 1)
        self.assertEqual(self.value(after, "dlockd_timeouts"), 1)
        self.assertEqual(self.value(after, "dlockd_locks_held"), 2)
        self.assertEqual(self.value(after, "dlockd_wait_seconds", "dlockd_wait_seconds_count"),
                         self.value(before, "dlockd_wait_seconds", "dlockd_wait_seconds_count"))
        self.assertGreater(self.value(after, "dlockd_upgrade_state_bytes"), 0)
        # INFO's upgrade_ms, in seconds as Prometheus counts time
        ms = int(info.split(" upgrade_ms=")[1].split()[0])
        self.assertAlmostEqual(self.value(after, "dlockd_upgrade_seconds"), ms / 1000.0, places=3)
        self.assertIn('dlockd_build_info{version="', body)
        self.assertEqual(sum(s.value for s in after["dlockd_build_info"].samples), 1)
        # And they go on counting.
        self.assertTrue(b.ask("LOCK hm3").startswith("OK "))
        fams, _ = self.scrape(http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S))
        self.assertEqual(self.value(fams, "dlockd_grants"), 3)
        a.close()
        b.close()
        # The new process stops as the old one would have.
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + WAIT_S
        while True:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got == pid:
                break
            self.assertLess(time.monotonic(), end, "pid %d did not stop" % pid)
            time.sleep(0.02)
        self.adopted.remove(pid)
        self.assertTrue(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status)

    def test_other_paths_and_methods(self):
        port = free_port()
        self.dlockd("127.0.0.1:%d" % port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
        self.conns.append(conn)
        conn.request("GET", "/nothing-here")
        r = conn.getresponse()
        r.read()
        self.assertEqual(r.status, 404)
        conn.request("GET", "/")  # the board (test_board.py renders it)
        r = conn.getresponse()
        r.read()
        self.assertEqual(r.status, 200)
        self.assertTrue(r.getheader("Content-Type", "").startswith("text/html"))
        conn.request("POST", "/metrics", body="x=1")
        r = conn.getresponse()
        r.read()
        self.assertEqual(r.status, 405)
        # Scrapers that connect and say nothing do not stop the daemon's
        # other work, nor other scrapes.
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
        fams, _ = self.scrape(http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S))
        self.assertIn("dlockd_grants", fams)
        for s in idle:
            s.close()

    def raw_get(self, port, path, host):
        """GET path on 127.0.0.1:port with this Host header (None: none), as
        a browser tricked by DNS rebinding would send it: the status."""
        s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        head = "GET %s HTTP/1.1\r\n" % path
        if host is not None:
            head += "Host: %s\r\n" % host
        s.sendall((head + "Connection: close\r\n\r\n").encode())
        got = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
        s.close()
        status = int(got.split(b" ", 2)[1])
        return status, got.split(b"\r\n\r\n", 1)[1].decode()

    def test_board_answers_its_own_names_only(self):
        """A page elsewhere that rebinds its name to 127.0.0.1 reaches the
        board through the browser with its own name as Host: 421
        (Misdirected Request: this server does not answer for that name;
        the client itself is not refused, with a right Host it is served).
        Loopback names and addresses, and the listen address, are the
        board's; /metrics names no lock and answers any Host (scrapers
        address it by whatever name)."""
        port = free_port()
        self.dlockd("127.0.0.1:%d" % port)
        for host in ("localhost", "localhost:%d" % port, "LocalHost:%d" % port, "127.0.0.1",
                     "127.0.0.1:%d" % port, "127.5.6.7:%d" % port, "[::1]", "[::1]:%d" % port):
            for path in ("/locks", "/"):
                status, body = self.raw_get(port, path, host)
                self.assertEqual(status, 200, "%s with Host %s: %s" % (path, host, body))
        for host in ("evil.example", "evil.example:%d" % port, "localhost.evil.example",
                     "127.0.0.1.evil.example:%d" % port, "10.1.2.3:%d" % port, "[::2]:%d" % port,
                     "localhost:x", "[::1", "localhost:%d:1" % port):
            for path in ("/locks", "/"):
                status, body = self.raw_get(port, path, host)
                self.assertEqual(status, 421, "%s with Host %s: %s" % (path, host, body))
                self.assertIn('"error":', body)
            status, _ = self.raw_get(port, "/metrics", host)
            self.assertEqual(status, 200, "/metrics with Host %s" % host)
        # board_remote: any IP address too (a name that is an address
        # cannot be rebound), and the listen address; other names still 421.
        port2 = free_port()
        conf = "127.0.0.1:%d\nboard_remote = yes" % port2
        self.dlockd(conf, name="r")
        for host in ("10.1.2.3:%d" % port2, "[2001:db8::1]:%d" % port2, "localhost"):
            status, body = self.raw_get(port2, "/locks", host)
            self.assertEqual(status, 200, "board_remote, Host %s: %s" % (host, body))
        status, _ = self.raw_get(port2, "/locks", "evil.example:%d" % port2)
        self.assertEqual(status, 421)

    def test_unix_socket(self):
        path = os.path.join(self.dir, "metrics.sock")
        p, sock = self.dlockd(path)
        fams, _ = self.scrape(UnixHTTPConnection(path))
        self.assertEqual(self.value(fams, "dlockd_backend_up"), 1)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(WAIT_S), 0)
        self.assertFalse(os.path.exists(path), "the metrics socket was left behind")

    def test_dlock_metrics(self):
        port = free_port()
        _, sock = self.dlockd("127.0.0.1:%d" % port)
        c = Client(sock)
        self.assertTrue(c.ask("LOCK cli").startswith("OK "))
        r = subprocess.run([DLOCK, "-S", sock, "--metrics"], capture_output=True, text=True,
                           timeout=WAIT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        fams = {f.name: f for f in text_string_to_metric_families(r.stdout)}
        self.assertEqual(self.value(fams, "dlockd_locks_held"), 1)
        c.close()
        # Over a Unix socket too, and a daemon without metrics says so.
        path = os.path.join(self.dir, "m.sock")
        _, sock2 = self.dlockd(path, name="u")
        r = subprocess.run([DLOCK, "-S", sock2, "--metrics"], capture_output=True, text=True,
                           timeout=WAIT_S)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("dlockd_grants_total 0", r.stdout)
        _, sock3 = self.dlockd("", name="off")
        r = subprocess.run([DLOCK, "-S", sock3, "--metrics"], capture_output=True, text=True,
                           timeout=WAIT_S)
        self.assertEqual(r.returncode, 1)
        self.assertIn("serves no metrics", r.stderr)

    def test_taken_port_is_an_error(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        conf = os.path.join(self.dir, "t.conf")
        with open(conf, "w") as f:
            f.write("[server]\nmetrics = 127.0.0.1:%d\n[redis]\nurl = unix://%s\n"
                    % (port, self.redis_sock))
        os.chmod(conf, 0o600)
        r = subprocess.run([DLOCKD, "-c", conf, "-s", os.path.join(self.dir, "t.sock")],
                           capture_output=True, text=True, timeout=WAIT_S)
        s.close()
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot serve metrics", r.stderr)
        self.assertIn("Address already in use", r.stderr)

    def test_bad_address_is_a_config_error(self):
        conf = os.path.join(self.dir, "b.conf")
        with open(conf, "w") as f:
            f.write("[server]\nmetrics = localhost\n")
        os.chmod(conf, 0o600)
        r = subprocess.run([DLOCKD, "-t", "-c", conf], capture_output=True, text=True,
                           timeout=WAIT_S)
        self.assertEqual(r.returncode, 1)
        self.assertIn(conf + ":2: metrics 'localhost'", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
