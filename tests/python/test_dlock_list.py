#!/usr/bin/env python3
"""Tests of LIST in the Python clients (dlock, dlock_asyncio) against a real dlockd and redis-server.

Run: DLOCKD_BIN=$PWD/build/dlockd python3 tests/python/test_dlock_list.py -v
"""
# SPDX-License-Identifier: MIT

import asyncio
import os
import sys
import threading
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_dlock  # noqa: E402  (its redis-server + dlockd fixture, and sys.path)
from test_dlock import _env, EVENT_TIMEOUT  # noqa: E402

import dlock  # noqa: E402
import dlock_asyncio  # noqa: E402

GUARD = EVENT_TIMEOUT * 2       # hang guard of a whole step


def setUpModule():
    test_dlock.setUpModule()


def tearDownModule():
    test_dlock.tearDownModule()


BAD_LIMITS = (0, dlock.LIST_MAX + 1, -1, True, "5", 2.0)
BAD_PATTERNS = ("", "a b", "p" * 256, "caf\u00e9", None, b"x*")


class ParseTest(unittest.TestCase):
    """The entry lines of PROTOCOL.md's example, parsed without a server."""

    def test_entries(self):
        lines = ["= job1 lock 29998 1795809956350449 1,vm/20712/20726/1000/1/1843 "
                 "2,vm/20712/20730/1000/0/912,db2/5521/-/-/0/- -",
                 "= jobs sem 27120 - 2,vm/20712/20740/1000/2/5012,-/-/-/-/1/- 0 3",
                 "= boss elect -1 7 1,vm/1/2/3/1/4 0 -"]
        got = dlock._parse_listing("OK LIST 3 1", lines)
        self.assertTrue(got.more)
        job1, jobs, boss = got.entries
        self.assertEqual(job1, dlock.ListEntry(
            "job1", "lock", 29998, 1795809956350449, 1,
            [dlock.Who("vm", 20712, 20726, 1000, 1, 1843)], 2,
            [dlock.Who("vm", 20712, 20730, 1000, 0, 912),
             dlock.Who("db2", 5521, None, None, 0, None)], None))
        self.assertIsNone(jobs.fence)
        self.assertEqual(jobs.value, 3)
        self.assertEqual(jobs.holders[1], dlock.Who(None, None, None, None, 1, None))
        self.assertEqual((jobs.waiters_total, jobs.waiters), (0, []))
        self.assertEqual((boss.ttl_ms, boss.fence, boss.value), (-1, 7, "-"))

    def test_latch_value_is_its_count(self):
        e = dlock._parse_entry("= go latch -1 - 0 2,vm/1/2/3/-1/40,vm/1/5/3/-1/12 3")
        self.assertEqual((e.kind, e.fence, e.waiters_total, e.value), ("latch", None, 2, 3))

    def test_bad_lines(self):
        for line in ("= a lock 1 2 1 0", "- a lock 1 2 1 0 -", "= a lock x 2 1 0 -",
                     "= a lock 1 2 1,h/1/2 0 -", "= a lock 1 2 x 0 -"):
            with self.assertRaises(dlock.ProtocolError, msg=line):
                dlock._parse_entry(line)
        for header in ("OK LIST 1", "OK LIST x 0", "OK LIST 1 2", "OK 1 0", "OK LIST 1001 0"):
            with self.assertRaises(dlock.ProtocolError, msg=header):
                dlock._list_count(header)


class ListTest(unittest.TestCase):
    """Client.list of the blocking client."""

    setUp = test_dlock.DlockTest.setUp
    client = test_dlock.DlockTest.client

    def test_every_kind(self):
        c, other = self.client(), self.client()
        p = self.name
        fence, _ = c.lock(p + "-lock")
        c.rlock(p + "-read")
        c.seminit(p + "-sem", 3)
        c.acquire(p + "-sem", 2)
        leader = c.elect(p + "-elect", "host-a:1")
        got = other.list(p + "-*")
        self.assertFalse(got.more)
        by = {e.name: e for e in got.entries}
        self.assertEqual({n: e.kind for n, e in by.items()},
                         {p + "-lock": "lock", p + "-read": "read", p + "-sem": "sem",
                          p + "-elect": "elect"})
        lk = by[p + "-lock"]
        self.assertEqual(lk.fence, fence)
        self.assertIsNone(lk.value)
        self.assertEqual(lk.holders_total, 1)
        h = lk.holders[0]
        self.assertEqual((h.pid, h.uid, h.count), (os.getpid(), os.getuid(), 1))
        self.assertIsInstance(h.host, str)
        self.assertGreaterEqual(h.age_ms, 0)
        sem = by[p + "-sem"]
        self.assertIsNone(sem.fence)
        self.assertEqual(sem.value, 1)
        self.assertEqual(sem.holders[0].count, 2)
        self.assertEqual(by[p + "-elect"].value, "host-a:1")
        self.assertEqual(by[p + "-elect"].fence, leader.fence)
        for e in got.entries:
            self.assertGreaterEqual(e.holders_total, 1, e)
        self.assertTrue(other.ping())   # nothing left unread
        self.assertTrue(c.ping())

    def test_latch_listed_with_its_count(self):
        c = self.client()
        c.latch_set(self.name, 3)
        c.count_down(self.name)
        (e,) = c.list(self.name).entries
        self.assertEqual((e.kind, e.fence, e.value, e.holders_total), ("latch", None, 2, 0))
        c.count_down(self.name)
        c.count_down(self.name)
        self.assertEqual(c.list(self.name).entries, [])     # at 0 it is gone

    def test_limit_and_more(self):
        c = self.client()
        for i in range(3):
            c.lock("%s-%d" % (self.name, i))
        got = c.list(self.name + "-*", 2)
        self.assertEqual((len(got.entries), got.more), (2, True))
        got = c.list(self.name + "-*", limit=3)
        self.assertEqual((len(got.entries), got.more), (3, False))
        self.assertEqual(c.list(self.name + "-none*"), dlock.Listing([], False))
        self.assertEqual([e.name for e in c.list(self.name + "-1").entries], [self.name + "-1"])
        self.assertGreaterEqual(len(c.list().entries), 3)   # "*", the default limit

    def test_waiters(self):
        c, w = self.client(), self.client()
        c.lock(self.name)
        done = []
        t = threading.Thread(target=lambda: done.append(w.lock(self.name)))
        t.start()
        try:
            deadline = time.monotonic() + GUARD
            while True:
                e = c.list(self.name).entries[0]
                if e.waiters_total == 1:
                    break
                self.assertLess(time.monotonic(), deadline, "the waiter was never listed")
                time.sleep(0.005)   # poll interval, bounded by the deadline
            self.assertEqual(e.waiters[0].pid, os.getpid())
        finally:
            c.unlock(self.name)
            t.join(GUARD)
        self.assertEqual(len(done), 1)
        w.unlock(self.name)

    def test_event_before_the_reply(self):
        c = self.client()
        c.lock(self.name, lease_ms=100)
        deadline = time.monotonic() + GUARD
        while self.name not in c.lost:      # the !LOST comes before some reply
            self.assertLess(time.monotonic(), deadline, "no !LOST within the guard")
            c.list(self.name)
            if self.name not in c.lost:
                time.sleep(0.01)   # poll interval, bounded by the deadline
        self.assertEqual(c.lost[self.name], "expired")
        self.assertEqual(c.list(self.name).entries, [])
        self.assertTrue(c.ping())

    def test_bad_arguments_not_sent(self):
        c = self.client()
        for limit in BAD_LIMITS:
            with self.assertRaises(dlock.BadRequest, msg=repr(limit)) as cm:
                c.list("*", limit)
            self.assertIsNone(cm.exception.code)
        for pattern in BAD_PATTERNS:
            with self.assertRaises(dlock.BadRequest, msg=repr(pattern)) as cm:
                c.list(pattern)
            self.assertIsNone(cm.exception.code)
            self.assertNotIn("name", cm.exception.message)
        self.assertTrue(c.ping())
        self.assertEqual(len(c.list("p" * 255, 1000).entries), 0)


class AsyncListTest(unittest.IsolatedAsyncioTestCase):
    """Client.list of the asyncio client."""

    async def asyncSetUp(self):
        self.sock = _env["sock"]
        self.name = "pya-%s-%s" % (self._testMethodName, uuid.uuid4().hex[:8])

    async def client(self):
        c = await dlock_asyncio.connect(self.sock)
        self.addAsyncCleanup(c.close)
        return c

    async def test_every_kind(self):
        c, other = await self.client(), await self.client()
        p = self.name
        async with asyncio.timeout(GUARD):
            h = await c.lock(p + "-lock")
            await c.rlock(p + "-read")
            await c.seminit(p + "-sem", 3)
            await c.acquire(p + "-sem", 2)
            leader = await c.elect(p + "-elect", "host-b:2")
            got = await other.list(p + "-*")
        self.assertFalse(got.more)
        by = {e.name: e for e in got.entries}
        self.assertEqual({n: e.kind for n, e in by.items()},
                         {p + "-lock": "lock", p + "-read": "read", p + "-sem": "sem",
                          p + "-elect": "elect"})
        self.assertEqual(by[p + "-lock"].fence, h.fence)
        self.assertEqual(by[p + "-lock"].holders[0].pid, os.getpid())
        self.assertEqual(by[p + "-sem"].value, 1)
        self.assertEqual(by[p + "-elect"].value, "host-b:2")
        self.assertEqual(by[p + "-elect"].fence, leader.fence)

    async def test_shared_connection_keeps_replies_apart(self):
        c = await self.client()
        for i in range(5):
            await c.lock("%s-%d" % (self.name, i))
        async with asyncio.timeout(GUARD):
            got = await asyncio.gather(c.list(self.name + "-*"), c.ping(),
                                       c.list(self.name + "-*", 2), c.status(self.name + "-0"),
                                       c.list(self.name + "-none*"), c.info())
        self.assertEqual(len(got[0].entries), 5)
        self.assertTrue(got[1])
        self.assertEqual((len(got[2].entries), got[2].more), (2, True))
        self.assertEqual(got[3].state, "MINE")
        self.assertEqual(got[4], dlock.Listing([], False))
        self.assertIn("version", got[5])

    async def test_event_before_the_reply(self):
        c = await self.client()
        async with asyncio.timeout(GUARD):
            h = await c.lock(self.name, lease_ms=100)
            while not h.lost.is_set():      # the !LOST comes around some reply
                await c.list(self.name)
                if not h.lost.is_set():
                    await asyncio.sleep(0.01)   # poll interval, bounded by the guard
            got = await c.list(self.name)
        self.assertEqual(h.reason, "expired")
        self.assertEqual(got.entries, [])
        self.assertTrue(await c.ping())

    async def test_bad_arguments_not_sent(self):
        c = await self.client()
        for limit in BAD_LIMITS:
            with self.assertRaises(dlock.BadRequest, msg=repr(limit)):
                await c.list("*", limit)
        for pattern in BAD_PATTERNS:
            with self.assertRaises(dlock.BadRequest, msg=repr(pattern)):
                await c.list(pattern)
        self.assertTrue(await c.ping())


if __name__ == "__main__":
    unittest.main()
