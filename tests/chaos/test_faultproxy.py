#!/usr/bin/env python3
"""Tests of faultproxy.py: LinkFaults.plan() (pure), then every fault over a
local echo server. Run: python3 tests/chaos/test_faultproxy.py"""
# SPDX-License-Identifier: MIT

import os
import random
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from faultproxy import DOWN, UP, FaultProxy, LinkFaults, port_patterns, rewrite  # noqa: E402,E501

QUIET_S = 0.3          # "nothing arrives": waited this long


class PlanTest(unittest.TestCase):
    def setUp(self):
        self.f = LinkFaults()
        self.rnd = random.Random(1)

    def test_healthy_passes_at_once(self):
        self.assertTrue(self.f.healthy())
        self.assertEqual(self.f.plan(UP, 10.0, 0.0, self.rnd), 10.0)

    def test_order_kept(self):
        self.assertEqual(self.f.plan(UP, 10.0, 12.0, self.rnd), 12.0)

    def test_drop_one_way(self):
        self.f.dropped = {UP}
        self.assertIsNone(self.f.plan(UP, 1.0, 0.0, self.rnd))
        self.assertEqual(self.f.plan(DOWN, 1.0, 0.0, self.rnd), 1.0)
        self.assertFalse(self.f.healthy())

    def test_blackhole(self):
        self.f.dropped = {UP, DOWN}
        self.assertIsNone(self.f.plan(UP, 1.0, 0.0, self.rnd))
        self.assertIsNone(self.f.plan(DOWN, 1.0, 0.0, self.rnd))

    def test_latency_and_jitter_bounds(self):
        self.f.delay_ms, self.f.jitter_ms = 100, 50
        for _ in range(200):
            due = self.f.plan(DOWN, 5.0, 0.0, self.rnd)
            self.assertGreaterEqual(due, 5.1)
            self.assertLessEqual(due, 5.15)

    def test_latency_never_reorders(self):
        self.f.delay_ms, self.f.jitter_ms = 10, 100
        last = 0.0
        for i in range(200):
            due = self.f.plan(UP, i * 0.001, last, self.rnd)
            self.assertGreaterEqual(due, last)
            last = due


class RewriteTest(unittest.TestCase):
    def test_ports_in_resp_contexts_only(self):
        pats = port_patterns({41234: 52345})
        data = (b"*2\r\n$9\r\n127.0.0.1\r\n$5\r\n41234\r\n"     # get-master-addr
                b":41234\r\n"                                          # CLUSTER SLOTS
                b"-MOVED 12 127.0.0.1:41234\r\n"                        # MOVED
                b"$40\r\nmymaster 127.0.0.1 41234 127.0.0.1 41234\r\n"  # +switch-master
                b":1795841234000\r\n")                                  # a fence: untouched
        out = rewrite(data, pats)
        self.assertEqual(out.count(b"52345"), 5)
        self.assertNotIn(b"41234\r\n", out.replace(b"1795841234000", b""))
        self.assertIn(b":1795841234000\r\n", out)
        self.assertEqual(len(out), len(data))

    def test_lengths_must_agree(self):
        with self.assertRaises(ValueError):
            port_patterns({6379: 41234})


class Echo(object):
    def __init__(self):
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(16)
        self.port = self.ls.getsockname()[1]
        self.got = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        while True:
            try:
                d = c.recv(4096)
            except OSError:
                return
            if not d:
                c.close()
                return
            self.got.append(d)
            try:
                c.sendall(d)
            except OSError:
                return


class ProxyTest(unittest.TestCase):
    def setUp(self):
        self.echo = Echo()
        self.px = FaultProxy(seed=7)
        self.ln = self.px.link(("127.0.0.1", self.echo.port))

    def tearDown(self):
        self.px.close()
        self.echo.ls.close()

    def conn(self):
        s = socket.create_connection(("127.0.0.1", self.ln.port), timeout=2.0)
        return s

    def roundtrip(self, s, data=b"ping"):
        s.sendall(data)
        return s.recv(4096)

    def quiet(self, s):
        s.settimeout(QUIET_S)
        with self.assertRaises(socket.timeout):
            s.recv(4096)
        s.settimeout(2.0)

    def test_pass_through(self):
        with self.conn() as s:
            self.assertEqual(self.roundtrip(s), b"ping")

    def test_mangler_per_connection(self):
        """Each connection's chunks from the node go through its own
        mangler, which may hold bytes back; bytes to the node do not."""
        class Upper(object):
            def __init__(self):
                self.held = b""

            def __call__(self, data):       # passes whole lines, upper-cased
                self.held += data
                line, nl, self.held = self.held.rpartition(b"\n")
                return (line + nl).upper()
        ln = self.px.link(("127.0.0.1", self.echo.port), mangle=Upper)
        with socket.create_connection(("127.0.0.1", ln.port), timeout=2.0) as s:
            s.sendall(b"ab")
            self.quiet(s)
            s.sendall(b"c\n")
            self.assertEqual(s.recv(4096), b"ABC\n")
        self.assertEqual(b"".join(self.echo.got[-2:]), b"abc\n")

    def test_blackhole_then_heal(self):
        with self.conn() as s:
            self.assertEqual(self.roundtrip(s), b"ping")
            self.ln.blackhole()
            s.sendall(b"lost")
            self.quiet(s)
            self.assertNotIn(b"lost", self.echo.got)
            self.ln.heal()
            self.assertEqual(self.roundtrip(s, b"back"), b"back")
        self.assertEqual(self.px.counts, {"blackhole": 1})

    def test_blackhole_swallows_fin_until_heal(self):
        s = self.conn()
        self.assertEqual(self.roundtrip(s), b"ping")
        self.ln.blackhole()
        s.close()
        time.sleep(0.1)
        self.assertEqual(self.ln.connections(), 1)     # no FIN passed on
        self.ln.heal()
        self.assertEqual(self.ln.connections(), 0)

    def test_drop_up_only(self):
        with self.conn() as s:
            self.ln.drop(UP)
            s.sendall(b"x1")
            self.quiet(s)
            self.assertNotIn(b"x1", self.echo.got)

    def test_drop_down_only(self):
        with self.conn() as s:
            self.ln.drop(DOWN)
            s.sendall(b"x2")
            self.quiet(s)
            deadline = time.monotonic() + 2.0
            while b"x2" not in self.echo.got and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertIn(b"x2", self.echo.got)      # it reached the node

    def test_latency(self):
        with self.conn() as s:
            self.ln.latency(150, 0)
            t = time.monotonic()
            self.assertEqual(self.roundtrip(s), b"ping")
            self.assertGreaterEqual(time.monotonic() - t, 0.29)    # 150 ms each way

    def test_reset(self):
        with self.conn() as s:
            self.assertEqual(self.roundtrip(s), b"ping")
            self.ln.reset()
            with self.assertRaises(ConnectionResetError):
                s.sendall(b"a")
                s.recv(4096)
                s.sendall(b"b")
                s.recv(4096)

    def test_refuse_then_heal(self):
        self.ln.refuse()
        with self.assertRaises(ConnectionRefusedError):
            self.conn()
        self.ln.heal()
        with self.conn() as s:
            self.assertEqual(self.roundtrip(s), b"ping")


if __name__ == "__main__":
    unittest.main(verbosity=1)
