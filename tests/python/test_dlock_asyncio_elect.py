#!/usr/bin/env python3
"""Tests of leader election in the asyncio dlock client against a real dlockd and redis-server.

Run: DLOCKD_BIN=$PWD/build/dlockd python3 tests/python/test_dlock_asyncio_elect.py -v
"""
# SPDX-License-Identifier: MIT

import asyncio
import contextlib
import os
import sys
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_dlock  # noqa: E402  (its redis-server + dlockd fixture, and sys.path)
from test_dlock import _env, EVENT_TIMEOUT  # noqa: E402

import dlock  # noqa: E402
import dlock_asyncio  # noqa: E402
from dlock_asyncio import Leader  # noqa: E402

GUARD = EVENT_TIMEOUT * 2       # hang guard of a whole step


def setUpModule():
    test_dlock.setUpModule()


def tearDownModule():
    test_dlock.tearDownModule()


class Reader:
    """Reads an observation in a task; until(n) waits for n leaders."""

    def __init__(self, changes):
        self.changes = changes
        self.items = []
        self.error = None
        self._more = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self):
        try:
            async for leader in self.changes:
                self.items.append(leader)
                self._more.set()
        except dlock.DlockError as e:
            self.error = e
            self._more.set()

    async def until(self, n):
        async with asyncio.timeout(GUARD):
            while len(self.items) < n and self.error is None:
                self._more.clear()
                await self._more.wait()
        if len(self.items) < n:
            raise self.error


class ElectTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.sock = _env["sock"]
        self.name = "pya-%s-%s" % (self._testMethodName, uuid.uuid4().hex[:8])

    async def client(self):
        c = await dlock_asyncio.connect(self.sock)
        self.addAsyncCleanup(c.close)
        return c

    async def await_waiters(self, watcher, n):
        """Bounded wait until dlockd counts at least n waiting requests."""
        async with asyncio.timeout(GUARD):
            while (await watcher.info())["waiters"] < n:
                await asyncio.sleep(0.01)   # poll interval

    async def test_campaign_and_hand_over_on_resign(self):
        a, b, watch = await self.client(), await self.client(), await self.client()
        self.assertIsNone(await watch.leader(self.name))
        before = (await watch.info())["waiters"]
        async with a.elect(self.name, "host-a:1") as la:
            self.assertIsInstance(la.fence, int)
            self.assertEqual(await watch.leader(self.name), Leader(la.fence, "host-a:1"))
            waiting = asyncio.create_task(self._elect(b, "host-b:2"))
            await self.await_waiters(watch, before + 1)
        self.assertFalse(la.lost.is_set())          # resigned on exit, not lost
        async with asyncio.timeout(GUARD):
            lb = await waiting
        self.assertGreater(lb.fence, la.fence)
        self.assertEqual(await watch.leader(self.name), (lb.fence, "host-b:2"))
        self.assertFalse(await la.resign())         # already resigned
        self.assertTrue(await b.resign(self.name))
        self.assertFalse(await lb.resign())         # the client resigned it
        self.assertFalse(await b.resign(self.name))
        self.assertIsNone(await watch.leader(self.name))

    async def _elect(self, c, value, **kw):
        return await c.elect(self.name, value, **kw)

    async def test_leader_closed_next_takes_over(self):
        a, b, watch = await self.client(), await self.client(), await self.client()
        la = await a.elect(self.name, "a")
        before = (await watch.info())["waiters"]
        waiting = asyncio.create_task(self._elect(b, "b"))
        await self.await_waiters(watch, before + 1)
        await a.close()
        self.assertEqual(la.reason, "closed")
        async with asyncio.timeout(GUARD):
            lb = await waiting
        self.assertGreater(lb.fence, la.fence)
        self.assertEqual(await watch.leader(self.name), Leader(lb.fence, "b"))
        self.assertTrue(await lb.resign())

    async def test_loss_cancels_the_block(self):
        c, watch = await self.client(), await self.client()
        async with asyncio.timeout(GUARD):
            with self.assertRaises(dlock.LockLost) as cm:
                async with c.elect(self.name, "v", lease_ms=200) as l:
                    await asyncio.Event().wait()    # until the loss cancels us
        self.assertEqual(cm.exception.reason, "expired")
        self.assertEqual(l.reason, "expired")
        self.assertEqual(asyncio.current_task().cancelling(), 0)
        self.assertIsNone(await watch.leader(self.name))
        async with c.elect(self.name, "v") as l2:   # the name's turn is free again
            self.assertGreater(l2.fence, l.fence)

    async def test_observe_in_fence_order(self):
        a, b, oc = await self.client(), await self.client(), await self.client()
        r1 = Reader(oc.observe(self.name))
        r2 = Reader(oc.observe(self.name))      # one client, one name, twice
        await r1.until(1)
        await r2.until(1)
        la = await a.elect(self.name, "a")
        await r1.until(2)
        await la.resign()
        await r1.until(3)
        lb = await b.elect(self.name, "b")
        await r1.until(4)
        await b.close()
        await r1.until(5)
        want = [None, Leader(la.fence, "a"), None, Leader(lb.fence, "b"), None]
        self.assertEqual(r1.items, want)
        await r2.until(5)
        self.assertEqual(r2.items, want)
        r1.task.cancel()
        await asyncio.gather(r1.task, return_exceptions=True)
        la2 = await a.elect(self.name, "a2")    # the second goes on alone
        await r2.until(6)
        self.assertEqual(r2.items[5], (la2.fence, "a2"))
        self.assertEqual(len(r1.items), 5)
        await la2.resign()
        self.assertTrue(await oc.ping())        # no desync

    async def test_observe_loop_end_and_close(self):
        a, c = await self.client(), await self.client()
        la = await a.elect(self.name, "a")
        async with contextlib.aclosing(c.observe(self.name)) as changes:
            async for leader in changes:
                self.assertEqual(leader, Leader(la.fence, "a"))
                break
        self.assertTrue(await c.ping())
        r = Reader(c.observe(self.name))
        await r.until(1)
        self.assertEqual(r.items, [(la.fence, "a")])
        await c.close()
        async with asyncio.timeout(GUARD):
            await r.task
        self.assertIsInstance(r.error, dlock.ConnectionClosed)
        await la.resign()

    async def test_cancel_waiting_campaign(self):
        a, b, watch = await self.client(), await self.client(), await self.client()
        la = await a.elect(self.name, "a")
        before = (await watch.info())["waiters"]
        task = asyncio.create_task(self._elect(b, "b"))
        await self.await_waiters(watch, before + 1)
        task.cancel()
        async with asyncio.timeout(GUARD):
            with self.assertRaises(asyncio.CancelledError):
                await task
        self.assertTrue(await b.ping())
        self.assertTrue(await la.resign())
        self.assertIsNone(await watch.leader(self.name))   # b was no candidate any more
        async with b.elect(self.name, "b") as lb:
            self.assertGreater(lb.fence, la.fence)

    async def test_observe_while_campaigning_on_one_client(self):
        # OBSERVE is answered while this client's own campaign waits
        # (tagged requests); the campaign's win is then observed.
        a, b, watch = await self.client(), await self.client(), await self.client()
        la = await a.elect(self.name, "a")
        before = (await watch.info())["waiters"]
        campaign = asyncio.create_task(self._elect(b, "b"))
        await self.await_waiters(watch, before + 1)
        r = Reader(b.observe(self.name))
        await r.until(1)
        self.assertEqual(r.items, [(la.fence, "a")])
        self.assertFalse(campaign.done())
        self.assertTrue(await la.resign())
        async with asyncio.timeout(GUARD):
            lb = await campaign
        await r.until(2)
        self.assertEqual(r.items[-1], (lb.fence, "b"))
        r.task.cancel()
        await asyncio.gather(r.task, return_exceptions=True)
        self.assertTrue(await lb.resign())

    async def test_second_task_campaigns_after_the_first(self):
        c = await self.client()
        l1 = await c.elect(self.name, "one")
        second = asyncio.create_task(self._elect(c, "two"))
        self.assertTrue(await c.ping())
        self.assertFalse(second.done())
        await l1.resign()
        async with asyncio.timeout(GUARD):
            l2 = await second
        self.assertGreater(l2.fence, l1.fence)
        self.assertEqual(await c.leader(self.name), (l2.fence, "two"))
        await l2.resign()

    async def test_bad_values_not_sent(self):
        c = await self.client()
        before = (await c.info())["requests"]
        for v in ["", "a b", "v" * 256, "caf\u00e9", "nl\n", 42, None]:
            with self.assertRaises(dlock.BadRequest) as cm:
                await c.elect(self.name, v)
            self.assertEqual(cm.exception.code, "ARGS")
        with self.assertRaises(dlock.BadRequest):
            await c.elect("a b", "v")
        with self.assertRaises(dlock.BadRequest):
            await c.leader("x" * 300)
        with self.assertRaises(dlock.BadRequest):
            c.observe("")
        with self.assertRaises(dlock.BadRequest):
            await c.resign("")
        with self.assertRaises(dlock.BadRequest):
            await c.elect(self.name, "v", lease_ms=-1)
        self.assertEqual((await c.info())["requests"], before + 1)     # this INFO only
        l = await c.elect(self.name, "v" * 255)
        self.assertEqual(await c.leader(self.name), (l.fence, "v" * 255))
        other = await self.client()
        with self.assertRaises(dlock.KindError):
            await other.lock(self.name)
        self.assertTrue(await l.resign())
        self.assertTrue(await c.ping())


if __name__ == "__main__":
    unittest.main()
