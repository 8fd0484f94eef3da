#!/usr/bin/env python3
"""A black-holed link between dlockd and Redis, found out by dlockd's own deadlines.

tests/chaos/faultproxy.py sits between each of two dlockd, A and B, and one
redis-server; A's link is black-holed (no FIN, no RST) while A holds a lock
and B waits for it.

The promises checked (PROTOCOL.md, README's Guarantees):
  - A says redis=down within command_timeout_ms + DETECT_SLACK_MS of the
    black hole (the watchdog's renewal, or the ROLE/INFO poll, overdue);
  - A's holder hears `!LOST <name> backend` before B is granted the lock,
    and no later than the lease after the fault (by then Redis may let B in);
  - B's grant carries a greater fence;
  - after the heal A is up again and grants, by itself, within RECOVER_S.

Bounds are generous (a busy 2-core machine); the measured figures are
printed. Run by `make integration` (make test):

    DLOCKD_BIN=$PWD/build/dlockd python3 tests/integration/test_blackhole.py

Standard library only.
"""
# SPDX-License-Identifier: MIT

import os
import select
import shutil
import socket
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "chaos"))

from faultproxy import FaultProxy  # noqa: E402
from redisproc import Spawner, free_ports  # noqa: E402

CMD_TIMEOUT_MS = 500
CONNECT_TIMEOUT_MS = 500
LEASE_MS = 3000
DETECT_SLACK_MS = 3000     # over command_timeout_ms: the renewal or poll that finds it out
RECOVER_S = 10.0           # heal -> redis=up and a grant on A
START_S = 10.0
NAME = "bh-held"


class Conn(object):
    """A line connection to a dlockd: replies in order, !events aside with
    their arrival time."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""
        self.events = []

    def send(self, line):
        self.s.sendall(line.encode() + b"\n")

    def reply(self, timeout):
        """The next reply (events set aside), or None after timeout s."""
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                line = line.decode()
                if line.startswith("!"):
                    self.events.append((time.monotonic(), line))
                else:
                    return line
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.s], [], [], max(0.0, left))
            if not r:
                return None
            d = self.s.recv(65536)
            if not d:
                raise OSError("dlockd closed the connection")
            self.buf += d

    def call(self, line, timeout=5.0):
        self.send(line)
        return self.reply(timeout)

    def close(self):
        self.s.close()


class BlackholeTest(unittest.TestCase):
    def setUp(self):
        self.dlockd = os.environ.get("DLOCKD_BIN") or os.path.join(
            os.path.dirname(os.path.dirname(HERE)), "build", "dlockd")
        self.tmp = tempfile.mkdtemp(prefix="dlock-blackhole-")
        self.spawn = Spawner(self.tmp)
        self.px = None
        self.conns = []
        port = free_ports(1)[0]
        self.redis = self.spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "no", "--dir", self.tmp],
                                "redis.log")
        self.px = FaultProxy(1)
        self.links = [self.px.link(("127.0.0.1", port)) for _ in range(2)]
        self.socks = [os.path.join(self.tmp, "d%d.sock" % i) for i in range(2)]
        self.daemons = [self.start_dlockd(i) for i in range(2)]

    def tearDown(self):
        for c in self.conns:
            c.close()
        for p in self.daemons:
            if p.poll() is None:
                p.terminate()
                try:
                    self.assertEqual(p.wait(10), 0, "dlockd exits 0 on SIGTERM")
                except Exception:
                    p.kill()
                    p.wait()
                    raise
        self.spawn.stop()
        if self.px is not None:
            self.px.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start_dlockd(self, i):
        conf = os.path.join(self.tmp, "d%d.conf" % i)
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n[redis]\nurl = redis://127.0.0.1:%d\n"
                    "command_timeout_ms = %d\nconnect_timeout_ms = %d\n[lock]\nlease_ms = %d\n"
                    % (self.socks[i], self.links[i].port, CMD_TIMEOUT_MS, CONNECT_TIMEOUT_MS,
                       LEASE_MS))
        p = self.spawn([self.dlockd, "-c", conf], "dlockd%d.log" % i)
        deadline = time.monotonic() + START_S
        while not self.redis_up(i):
            if time.monotonic() > deadline or p.poll() is not None:
                self.fail("dlockd %d did not come up (see %s)" % (i, self.tmp))
            time.sleep(0.02)
        return p

    def conn(self, i):
        c = Conn(self.socks[i])
        self.conns.append(c)
        return c

    def redis_up(self, i):
        try:
            c = Conn(self.socks[i])
        except OSError:
            return False
        try:
            r = c.call("INFO", 2.0) or ""
        finally:
            c.close()
        return " redis=up " in " %s " % r

    def test_blackholed_holder_is_told_before_another_daemon_gets_in(self):
        a, b = self.conn(0), self.conn(1)
        r = a.call("LOCK %s" % NAME)
        self.assertTrue(r and r.startswith("OK "), r)
        fa = int(r.split()[1])
        b.send("LOCK %s" % NAME)                    # waits for A's hold
        self.assertIsNone(b.reply(0.2))
        t0 = time.monotonic()
        self.links[0].blackhole()
        # A finds the silent link out by itself
        t_down = None
        while time.monotonic() - t0 < (CMD_TIMEOUT_MS + DETECT_SLACK_MS) / 1000.0 + 1:
            if not self.redis_up(0):
                t_down = time.monotonic()
                break
            time.sleep(0.02)
        self.assertIsNotNone(t_down, "A never said redis=down")
        down_ms = (t_down - t0) * 1000
        self.assertLessEqual(down_ms, CMD_TIMEOUT_MS + DETECT_SLACK_MS)
        # B is granted once A's lease ran out in Redis; A's holder was told first
        # (A's events read as they arrive, and before B's reply when both wait)
        rb, deadline = None, time.monotonic() + LEASE_MS / 1000.0 + 5
        while rb is None and time.monotonic() < deadline:
            select.select([a.s, b.s], [], [], 0.5)
            self.assertIsNone(a.reply(0), "A: a reply nobody asked for")
            rb = b.reply(0)
        t_b = time.monotonic()
        self.assertTrue(rb and rb.startswith("OK "), rb)
        fb = int(rb.split()[1])
        lost = [(t, l) for t, l in a.events if l.split()[:2] == ["!LOST", NAME]]
        self.assertTrue(lost, "A's holder heard nothing: %s" % a.events)
        t_lost, line = lost[0]
        self.assertEqual(line.split()[2], "backend", line)
        self.assertLess(t_lost, t_b, "!LOST after B's grant")
        self.assertLessEqual((t_lost - t0) * 1000, LEASE_MS)
        self.assertGreater(fb, fa)
        self.assertEqual(b.call("UNLOCK %s" % NAME), "OK 0")
        # the heal: A is up and grants again by itself
        t_heal = time.monotonic()
        self.links[0].heal()
        while not self.redis_up(0):
            self.assertLess(time.monotonic() - t_heal, RECOVER_S, "A not up after the heal")
            time.sleep(0.02)
        up_ms = (time.monotonic() - t_heal) * 1000
        a2 = self.conn(0)
        r = a2.call("LOCK %s" % NAME, RECOVER_S)
        self.assertTrue(r and r.startswith("OK "), r)
        self.assertGreater(int(r.split()[1]), fb)
        self.assertEqual(a2.call("UNLOCK %s" % NAME), "OK 0")
        sys.stderr.write("\n  black hole: redis=down after %.0f ms, !LOST %s after %.0f ms, "
                         "B granted after %.0f ms, A up %.0f ms after the heal\n"
                         % (down_ms, NAME, (t_lost - t0) * 1000, (t_b - t0) * 1000, up_ms))


if __name__ == "__main__":
    unittest.main(verbosity=2)
