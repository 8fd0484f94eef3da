#!/usr/bin/env python3
"""Tests of multi-name locks in the asyncio dlock client against a real dlockd and redis-server.

Run: DLOCKD_BIN=$PWD/build/dlockd python3 tests/python/test_dlock_asyncio_mlock.py -v
"""
# SPDX-License-Identifier: MIT

import asyncio
import os
import shutil
import sys
import tempfile
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_dlock  # noqa: E402  (its redis-server + dlockd fixture, and sys.path)
from test_dlock import _env, EVENT_TIMEOUT  # noqa: E402

import dlock  # noqa: E402
import dlock_asyncio  # noqa: E402
from dlock_asyncio import MNAMES_MAX  # noqa: E402

GUARD = EVENT_TIMEOUT * 2       # hang guard of a whole step
LOOP_GUARD = 60.0               # hang guard of the opposite-order loops


def setUpModule():
    test_dlock.setUpModule()


def tearDownModule():
    test_dlock.tearDownModule()


class MlockTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.sock = _env["sock"]
        self.tag = "pya-%s-%s" % (self._testMethodName, uuid.uuid4().hex[:8])

    def names(self, *suffixes):
        return ["%s-%s" % (self.tag, s) for s in suffixes]

    async def client(self):
        c = await dlock_asyncio.connect(self.sock)
        self.addAsyncCleanup(c.close)
        return c

    async def await_waiters(self, watcher, n):
        """Bounded wait until dlockd counts n waiters (a set waits once
        per name), or none when n is 0."""
        async with asyncio.timeout(GUARD):
            while not ((await watcher.info())["waiters"] >= n if n else
                       (await watcher.info())["waiters"] == 0):
                await asyncio.sleep(0.01)   # poll interval

    async def test_grant_fences_in_order_and_release(self):
        c = await self.client()
        names = self.names("c", "a", "b")
        async with asyncio.timeout(GUARD):
            async with c.mlock(names) as m:
                self.assertEqual(m.names, names)
                self.assertEqual(len(m.fences), 3)
                for name, fence in zip(names, m.fences):
                    st = await c.status(name)
                    self.assertEqual((st.state, st.holds, st.fence), ("MINE", 1, fence))
                    self.assertEqual(m.fence_of(name), fence)
        self.assertFalse(m.lost.is_set())
        for name in names:
            self.assertEqual((await c.status(name)).state, "FREE")
        m2 = await c.mlock(names, lease_ms=30000)
        self.assertTrue(all(f2 > f1 for f1, f2 in zip(m.fences, m2.fences)))
        self.assertEqual(await m2.unlock(), [0, 0, 0])
        with self.assertRaises(dlock.NotHeld):
            await m2.unlock()

    async def test_all_or_nothing_visible_via_status(self):
        holder, c, watch = await self.client(), await self.client(), await self.client()
        x, y, z = self.names("x", "y", "z")
        hy = await holder.lock(y)
        before = (await watch.info())["waiters"]
        task = asyncio.ensure_future(c.mlock([x, y, z]))
        await self.await_waiters(watch, before + 1)
        for name in (x, z):
            self.assertEqual((await watch.status(name)).state, "FREE")
        self.assertFalse(task.done())
        await hy.unlock()
        async with asyncio.timeout(GUARD):
            m = await task
        self.assertGreater(m.fences[1], hy.fence)
        for name in (x, y, z):
            self.assertEqual((await watch.status(name)).state, "TAKEN")
        self.assertEqual(await m.unlock(), [0, 0, 0])

    async def test_opposite_orders_no_deadlock(self):
        c1, c2, shared = await self.client(), await self.client(), await self.client()
        a, b = self.names("a", "b")
        state = {"holding": 0, "overlaps": 0}
        last = {a: 0, b: 0}

        async def loop(c, names, rounds):
            for _ in range(rounds):
                async with c.mlock(names) as m:
                    state["overlaps"] += state["holding"] > 0
                    state["holding"] += 1
                    for name, fence in zip(names, m.fences):
                        self.assertGreater(fence, last[name])
                        last[name] = fence
                    await asyncio.sleep(0)
                    state["holding"] -= 1

        async with asyncio.timeout(LOOP_GUARD):
            await asyncio.gather(loop(c1, [a, b], 40), loop(c2, [b, a], 40),
                                 loop(shared, [a, b], 40), loop(shared, [b, a], 40))
        self.assertEqual(state["overlaps"], 0)

    async def test_cancel_waiting_mlock_leaves_nothing(self):
        holder, c, watch = await self.client(), await self.client(), await self.client()
        x, y, z = self.names("x", "y", "z")
        hy = await holder.lock(y)
        before = (await watch.info())["waiters"]
        task = asyncio.ensure_future(c.mlock([x, y]))
        await self.await_waiters(watch, before + 1)
        task.cancel()
        async with asyncio.timeout(GUARD):
            with self.assertRaises(asyncio.CancelledError):
                await task
        await self.await_waiters(watch, before)
        self.assertEqual((await watch.status(x)).state, "FREE")
        # Waiting locally behind this client's own hold of x: withdrawn too.
        hx = await c.lock(x)
        task = asyncio.ensure_future(c.mlock([z, x]))
        self.assertTrue(await c.ping())
        self.assertFalse(task.done())
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertEqual((await watch.status(z)).state, "FREE")
        await hx.unlock()
        await hy.unlock()
        async with c.trymlock([x, y, z]) as m:
            self.assertEqual(len(m.fences), 3)
        # asyncio.timeout() around a wait withdraws it the same way.
        hy = await holder.lock(y)
        with self.assertRaises(TimeoutError):
            async with asyncio.timeout(0.2):
                await c.mlock([x, y])
        self.assertEqual((await watch.status(x)).state, "FREE")
        await hy.unlock()

    async def test_trymlock_timeout(self):
        holder, c = await self.client(), await self.client()
        x, y = self.names("x", "y")
        hy = await holder.lock(y)
        with self.assertRaises(dlock.Timeout):
            await c.trymlock([x, y])
        t0 = asyncio.get_running_loop().time()
        with self.assertRaises(dlock.Timeout):
            await c.trymlock([y, x], wait_ms=100)
        self.assertGreaterEqual(asyncio.get_running_loop().time() - t0, 0.09)
        self.assertEqual((await c.status(x)).state, "FREE")
        await hy.unlock()

    async def test_held_handle_counts_as_reentry(self):
        c = await self.client()
        x, y = self.names("x", "y")
        hx = await c.lock(x)
        async with asyncio.timeout(GUARD):
            m = await c.mlock([x, y], held=[hx])
        self.assertEqual(m.fences[0], hx.fence)
        self.assertEqual((await c.status(x)).holds, 2)
        self.assertEqual(await m.unlock(), [1, 0])
        self.assertEqual(await hx.unlock(), 0)
        # The plain handle let go first: the set keeps x from this client's other tasks.
        hx = await c.lock(x)
        m = await c.mlock([y, x], held=[hx])
        await hx.unlock()
        second = asyncio.ensure_future(c.lock(x))
        self.assertTrue(await c.ping())
        self.assertFalse(second.done())
        self.assertEqual(await m.unlock(), [0, 0])
        async with asyncio.timeout(GUARD):
            await (await second).unlock()
        with self.assertRaises(dlock.BadRequest):
            await c.mlock([x], held=[object()])

    async def test_loss_of_one_name_cancels_the_block(self):
        c, admin = await self.client(), await self.client()
        x, y = self.names("x", "y")
        async with asyncio.timeout(GUARD):
            with self.assertRaises(dlock.LockLost) as cm:
                async with c.mlock([x, y], lease_ms=60000) as m:
                    self.assertTrue(await admin.force_unlock(y))
                    await asyncio.Event().wait()    # until the loss cancels us
        self.assertEqual((cm.exception.reason, m.reason, m.lost_name), ("forced", "forced", y))
        self.assertEqual(asyncio.current_task().cancelling(), 0)
        self.assertEqual((await c.status(x)).state, "FREE")   # the rest released on exit
        m2 = await c.mlock([x, y])
        self.assertTrue(await admin.force_unlock(x))
        async with asyncio.timeout(GUARD):
            await m2.lost.wait()
        self.assertEqual((await c.status(y)).state, "MINE")   # the others stay held
        with self.assertRaises(dlock.LockLost):
            await m2.unlock()
        self.assertEqual((await c.status(y)).state, "FREE")

    async def test_bad_input_refused_locally(self):
        c = await self.client()
        x = self.names("x")[0]
        many = ["%s-%d" % (x, i) for i in range(MNAMES_MAX + 1)]
        before = (await c.info())["requests"]
        for names, kw in [([], {}), (many, {}), ([x, "y", x], {}), ("ab", {}), (None, {}),
                          ([x, "n" * 300], {}), ([x, "a b"], {}),
                          ([x], {"lease_ms": 2147483648}), ([x], {"lease_ms": -1})]:
            with self.assertRaises(dlock.BadRequest, msg=repr((names, kw))):
                await c.mlock(names, **kw)
        with self.assertRaises(dlock.BadRequest):
            await c.trymlock([x], wait_ms=1.5)
        self.assertEqual((await c.info())["requests"], before + 1)     # this INFO only
        self.assertEqual((await c.status(x)).state, "FREE")
        m = await c.mlock(many[:MNAMES_MAX])
        self.assertEqual(len(m.fences), MNAMES_MAX)
        self.assertEqual(await m.unlock(), [0] * MNAMES_MAX)


class FakeServerTest(unittest.IsolatedAsyncioTestCase):
    """Against a fake dlockd answering scripted lines: races on the wire."""

    async def test_lost_right_behind_the_grant(self):
        script = {"MLOCK 2 a b": "OK 3 4\n!LOST b expired\n", "MUNLOCK 1 a": "OK 0\n",
                  "PING": "OK PONG\n"}
        seen = []

        async def serve(r, w):
            # Each request comes tagged; its reply's first line takes the
            # tag, an event after it none.
            while line := await r.readline():
                tag, _, req = line.decode().strip().partition(" ")
                self.assertRegex(tag, r"^#[0-9A-Za-z_-]{1,16}$")
                if req == "QUIT":
                    w.write(b"%s OK BYE\n" % tag.encode())
                    break
                seen.append(req)
                w.write(("%s %s" % (tag, script.get(req, "OK 0\n"))).encode())
            w.close()

        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        srv = await asyncio.start_unix_server(serve, os.path.join(d, "f.sock"))
        self.addAsyncCleanup(srv.wait_closed)
        self.addCleanup(srv.close)
        c = await dlock_asyncio.connect(os.path.join(d, "f.sock"))
        self.addAsyncCleanup(c.close)
        async with asyncio.timeout(GUARD):
            with self.assertRaises(dlock.LockLost) as cm:
                async with c.mlock(["a", "b"]):
                    await asyncio.Event().wait()
            self.assertEqual((cm.exception.name, cm.exception.reason), ("b", "expired"))
            self.assertTrue(await c.ping())
        self.assertEqual(seen, ["MLOCK 2 a b", "MUNLOCK 1 a", "PING"])


if __name__ == "__main__":
    unittest.main()
