#!/usr/bin/env python3
"""Tests of the asyncio dlock client against a real dlockd and redis-server.

Run: DLOCKD_BIN=$PWD/build/dlockd python3 tests/python/test_dlock_asyncio.py -v
"""
# SPDX-License-Identifier: MIT

import asyncio
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import unittest
import uuid
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import test_dlock  # noqa: E402  (its redis-server + dlockd fixture, and sys.path)
from test_dlock import _env, _spawn, EVENT_TIMEOUT  # noqa: E402

import dlock  # noqa: E402
import dlock_asyncio  # noqa: E402

GUARD = EVENT_TIMEOUT * 2       # hang guard of a whole step


def setUpModule():
    test_dlock.setUpModule()


def tearDownModule():
    test_dlock.tearDownModule()


def daemon_has_cancel(path):
    """True when dlockd knows CANCEL (answers it OK 0 with nothing waiting)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(EVENT_TIMEOUT)
        s.connect(path)
        s.sendall(b"CANCEL\n")
        return s.makefile("rb").readline().startswith(b"OK")


class AsyncioTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self):
        self.sock = _env["sock"]
        self.name = "pya-%s-%s" % (self._testMethodName, uuid.uuid4().hex[:8])

    async def client(self, path=None):
        c = await dlock_asyncio.connect(path or self.sock)
        self.addAsyncCleanup(c.close)
        return c

    async def await_waiters(self, watcher, n):
        """Bounded wait until dlockd counts at least n waiting requests."""
        async with asyncio.timeout(GUARD):
            while (await watcher.info())["waiters"] < n:
                await asyncio.sleep(0.01)   # poll interval

    def need_cancel(self):
        if not daemon_has_cancel(self.sock):
            self.skipTest("this dlockd has no CANCEL")

    # -- grants --

    async def test_grant_fence_scope_and_release(self):
        c, other = await self.client(), await self.client()
        async with c.lock(self.name) as h:
            self.assertIsInstance(h.fence, int)
            self.assertGreater(h.fence, 0)
            self.assertEqual(h.holds, 1)
            self.assertFalse(h.lost.is_set())
            self.assertEqual((await other.status(self.name)).state, "TAKEN")
            st = await c.status(self.name)
            self.assertEqual((st.state, st.holds, st.fence), ("MINE", 1, h.fence))
            first = h.fence
        self.assertEqual(h.holds, 0)
        self.assertEqual(await other.status(self.name), dlock.Status("FREE", 0, None, None))
        h2 = await other.lock(self.name)
        self.assertGreater(h2.fence, first)
        self.assertEqual(await h2.unlock(), 0)

    async def test_default_socket_from_env(self):
        with mock.patch.dict(os.environ, {"DLOCK_SOCKET": self.sock}):
            async with await dlock_asyncio.connect() as c:
                self.assertEqual(c.path, self.sock)
                self.assertTrue(await c.ping())
        self.assertTrue(c.closed)
        with self.assertRaises(dlock.ConnectionClosed):
            await c.ping()

    async def test_trylock_timeout(self):
        a, b = await self.client(), await self.client()
        h = await a.lock(self.name, lease_ms=5000)
        with self.assertRaises(dlock.Timeout) as cm:
            await b.trylock(self.name, wait_ms=50)
        self.assertGreater(cm.exception.ttl_ms, 0)
        # Another task of the same client: a local Timeout, nothing sent.
        with self.assertRaises(dlock.Timeout) as cm:
            await a.trylock(self.name)
        self.assertEqual(cm.exception.ttl_ms, -1)
        self.assertEqual(await h.unlock(), 0)
        h = await b.trylock(self.name, wait_ms=1000)
        self.assertEqual(h.holds, 1)
        await h.unlock()

    async def test_reentry(self):
        c = await self.client()
        h = await c.lock(self.name)
        self.assertEqual(await h.relock(), (h.fence, 2))
        self.assertEqual(await h.relock(), (h.fence, 3))
        self.assertEqual((await c.status(self.name)).holds, 3)
        self.assertEqual(await h.unlock(), 2)
        self.assertEqual(await h.unlock(), 1)
        self.assertEqual(await h.unlock(), 0)
        self.assertEqual((await c.status(self.name)).state, "FREE")
        with self.assertRaises(dlock.NotHeld):
            await h.unlock()

    async def test_scope_releases_every_hold(self):
        c, other = await self.client(), await self.client()
        async with c.lock(self.name) as h:
            await h.relock()
            self.assertGreater(await h.renew(), 0)
        self.assertEqual((await other.status(self.name)).state, "FREE")

    # -- loss --

    async def test_lease_expiry_cancels_the_task(self):
        c = await self.client()
        async with asyncio.timeout(GUARD):
            with self.assertRaises(dlock.LockLost) as cm:
                async with c.lock(self.name, lease_ms=200) as h:
                    await asyncio.Event().wait()    # until the loss cancels us
        self.assertEqual(cm.exception.reason, "expired")
        self.assertEqual(cm.exception.name, self.name)
        self.assertTrue(h.lost.is_set())
        self.assertEqual(h.reason, "expired")
        self.assertEqual(asyncio.current_task().cancelling(), 0)
        self.assertEqual((await c.status(self.name)).state, "FREE")

    async def test_explicit_handle_loss_event(self):
        c = await self.client()
        h = await c.lock(self.name, lease_ms=200)
        async with asyncio.timeout(GUARD):
            await h.lost.wait()
        self.assertEqual(h.reason, "expired")
        with self.assertRaises(dlock.LockLost):
            await h.unlock()

    async def test_forceunlock_cancels_the_task(self):
        if os.geteuid() != 0:
            self.skipTest("FORCEUNLOCK needs uid 0 (admin_uids)")
        c, admin = await self.client(), await self.client()
        inside = asyncio.Event()

        async def hold():
            async with c.lock(self.name):
                inside.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(hold())
        async with asyncio.timeout(GUARD):
            await inside.wait()
            self.assertTrue(await admin.force_unlock(self.name))
            with self.assertRaises(dlock.LockLost) as cm:
                await task
        self.assertEqual(cm.exception.reason, "forced")
        self.assertFalse(task.cancelled())

    async def test_outside_cancel_is_not_a_loss(self):
        c, other = await self.client(), await self.client()
        inside = asyncio.Event()

        async def hold():
            async with c.lock(self.name):
                inside.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(hold())
        await inside.wait()
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertEqual((await other.status(self.name)).state, "FREE")

    # -- many tasks, one connection --

    async def test_100_tasks_5_names_no_overlap(self):
        c = await self.client()
        holding, last, grants, bad = {}, {}, [0], []

        async def worker(t):
            for r in range(5):
                name = "%s-%d" % (self.name, (t + r) % 5)
                async with c.lock(name) as h:
                    if holding.get(name):
                        bad.append("overlap %s" % name)
                    if h.fence <= last.get(name, 0):
                        bad.append("fence of %s did not rise" % name)
                    holding[name], last[name] = True, h.fence
                    grants[0] += 1
                    await asyncio.sleep(0)
                    holding[name] = False

        async with asyncio.timeout(60):
            await asyncio.gather(*(worker(t) for t in range(100)))
        self.assertEqual(bad, [])
        self.assertEqual(grants[0], 500)

    async def test_local_waiter_goes_after_the_holder(self):
        c = await self.client()
        order = []
        h = await c.lock(self.name)

        async def second():
            async with c.lock(self.name) as h2:
                order.append(("second", h2.holds))

        task = asyncio.create_task(second())
        await asyncio.sleep(0)
        self.assertEqual((await c.status(self.name)).holds, 1)    # nothing sent for it
        order.append("unlock")
        await h.unlock()
        async with asyncio.timeout(GUARD):
            await task
        self.assertEqual(order, ["unlock", ("second", 1)])

    # -- many waits at once on one connection (tagged requests) --

    async def _held_names(self, other, n):
        """n names of this test, each held by other: {name: handle}."""
        names = ["%s-%d" % (self.name, i) for i in range(n)]
        return {name: await other.lock(name) for name in names}

    async def test_20_waits_at_once_granted_as_released(self):
        c, other, watcher = await self.client(), await self.client(), await self.client()
        held = await self._held_names(other, 20)
        names = list(held)
        before = (await watcher.info())["waiters"]
        granted = []

        async def wait(name):
            h = await c.lock(name)
            granted.append(name)
            return h

        tasks = {n: asyncio.create_task(wait(n)) for n in names}
        await self.await_waiters(watcher, before + 20)     # all 20 in dlockd at once
        order = list(names)
        random.Random(38).shuffle(order)
        for i, n in enumerate(order):
            self.assertFalse(tasks[n].done(), "%s granted before its release" % n)
            await held[n].unlock()
            async with asyncio.timeout(GUARD):
                h = await tasks[n]
            self.assertEqual((h.name, h.holds), (n, 1))
            self.assertGreater(h.fence, held[n].fence)
            self.assertEqual(granted, order[:i + 1])    # each right after its own release
        for n in names:
            self.assertEqual(await tasks[n].result().unlock(), 0)

    async def test_cancel_one_of_many(self):
        self.need_cancel()
        c, other, watcher = await self.client(), await self.client(), await self.client()
        held = await self._held_names(other, 20)
        names = list(held)
        before = (await watcher.info())["waiters"]
        tasks = {n: asyncio.create_task(self._lock(c, n)) for n in names}
        await self.await_waiters(watcher, before + 20)
        gone = names[7]
        tasks[gone].cancel()
        async with asyncio.timeout(GUARD):
            with self.assertRaises(asyncio.CancelledError):
                await tasks[gone]
            while (await watcher.info())["waiters"] != before + 19:    # its wait withdrawn
                await asyncio.sleep(0.01)   # poll interval
        self.assertEqual((await c.status(gone)).state, "TAKEN")    # nothing of it held
        self.assertEqual([n for n in names if tasks[n].done()], [gone])
        await held[gone].unlock()
        self.assertEqual((await c.status(gone)).state, "FREE")     # no wait came back to life
        for n in reversed(names):
            if n != gone:
                await held[n].unlock()
                async with asyncio.timeout(GUARD):
                    h = await tasks[n]
                self.assertEqual(await h.unlock(), 0)

    async def test_unlock_status_list_not_behind_another_wait(self):
        c, other, watcher = await self.client(), await self.client(), await self.client()
        x, y = self.name + "-x", self.name + "-y"
        hx = await c.lock(x)
        hy = await other.lock(y)
        before = (await watcher.info())["waiters"]
        waiting = asyncio.create_task(self._lock(c, y))
        await self.await_waiters(watcher, before + 1)

        async def meanwhile():
            return (await hx.unlock(), (await c.status(y)).state,
                    [e.name for e in (await c.list(self.name + "-*")).entries], await c.ping())

        # A task, not a timeout: an unlock completes even when cancelled.
        calls = asyncio.create_task(meanwhile())
        await asyncio.wait([calls], timeout=EVENT_TIMEOUT)
        if not calls.done():
            await hy.unlock()       # let the wait end, and the test with it
            self.fail("unlock, status, list and ping not answered within %ss while another "
                      "task of the client waited" % EVENT_TIMEOUT)
        self.assertEqual(calls.result(), (0, "TAKEN", [y], True))
        self.assertEqual((await other.status(x)).state, "FREE")     # released, not only answered
        self.assertFalse(waiting.done())
        await hy.unlock()
        async with asyncio.timeout(GUARD):
            h = await waiting
        self.assertEqual(await h.unlock(), 0)

    async def test_tags_reused_only_once_answered_real_daemon(self):
        # A tag space of 4 (tags 1 to 4): one wait keeps its tag while
        # pings go round the other three; dlockd would answer a tag in
        # flight "ERR ARGS tag in use".
        c, other = await self.client(), await self.client()
        held = await other.lock(self.name)
        with mock.patch.object(dlock_asyncio, "_TAG_SPACE", 5):
            waiting = asyncio.create_task(self._lock(c))
            for _ in range(10):
                self.assertTrue(await c.ping())
            self.assertFalse(waiting.done())
            await held.unlock()
            async with asyncio.timeout(GUARD):
                h = await waiting
            self.assertEqual(await h.unlock(), 0)
            self.assertTrue(await c.ping())

    # -- cancellation --

    async def test_cancel_local_wait_sends_nothing(self):
        c = await self.client()
        h = await c.lock(self.name)
        task = asyncio.create_task(self._lock(c))
        await asyncio.sleep(0)
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertEqual((await c.status(self.name)).holds, 1)
        await h.unlock()
        self.assertEqual((await c.status(self.name)).state, "FREE")

    async def _lock(self, c, name=None):
        return await c.lock(name or self.name)

    async def test_cancel_wait_nothing_held(self):
        self.need_cancel()
        a, c, watcher = await self.client(), await self.client(), await self.client()
        held = await a.lock(self.name)
        before = (await watcher.info())["waiters"]
        task = asyncio.create_task(self._lock(c))
        await self.await_waiters(watcher, before + 1)
        task.cancel()
        async with asyncio.timeout(GUARD):
            with self.assertRaises(asyncio.CancelledError):
                await task
        self.assertTrue(await c.ping())       # the connection goes on
        await held.unlock()
        self.assertNotEqual((await c.status(self.name)).state, "MINE")
        h = await c.trylock(self.name, wait_ms=1000)     # and c can take it
        self.assertEqual(h.holds, 1)
        await h.unlock()

    async def test_asyncio_timeout_withdraws_the_wait(self):
        self.need_cancel()
        a, c = await self.client(), await self.client()
        held = await a.lock(self.name)
        with self.assertRaises(TimeoutError):
            async with asyncio.timeout(0.2):
                await c.lock(self.name)
        self.assertEqual(asyncio.current_task().cancelling(), 0)
        self.assertTrue(await c.ping())
        await held.unlock()
        h = await c.trylock(self.name, wait_ms=1000)
        self.assertEqual(h.holds, 1)
        await h.unlock()

    async def test_cancel_racing_the_grant_leaves_nothing_held(self):
        self.need_cancel()
        a, c, watcher = await self.client(), await self.client(), await self.client()
        for _ in range(10):
            held = await a.lock(self.name)
            before = (await watcher.info())["waiters"]
            task = asyncio.create_task(self._lock(c))
            await self.await_waiters(watcher, before + 1)
            unlocking = asyncio.create_task(held.unlock())
            await asyncio.sleep(0)      # the UNLOCK is written
            task.cancel()
            async with asyncio.timeout(GUARD):
                await unlocking
                try:
                    h = await task
                    await h.unlock()    # the grant won the race
                except asyncio.CancelledError:
                    pass
            self.assertNotEqual((await c.status(self.name)).state, "MINE")
            self.assertEqual((await a.status(self.name)).state, "FREE")

    # -- failure --

    async def test_dlockd_killed_during_wait(self):
        tmp = _env["tmp"]
        sock2 = os.path.join(tmp, "d2-%s.sock" % uuid.uuid4().hex[:6])
        conf = os.path.join(tmp, "d2-%s.conf" % uuid.uuid4().hex[:6])
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n[redis]\nurl = unix://%s\n[lock]\nlease_ms = %d\n"
                    % (sock2, os.path.join(tmp, "redis.sock"), test_dlock.CONF_LEASE_MS))
        os.chmod(conf, 0o600)
        dlockd = os.environ.get("DLOCKD_BIN") or os.path.join(test_dlock.ROOT, "build", "dlockd")
        proc = _spawn([dlockd, "-c", conf], os.path.basename(conf) + ".log")
        async with asyncio.timeout(GUARD):
            while True:
                try:
                    x = await dlock_asyncio.connect(sock2)
                    if (await x.info())["redis"] == "up":
                        break
                    await x.close()
                except dlock.DlockError:
                    pass
                await asyncio.sleep(0.02)   # poll interval
        self.addAsyncCleanup(x.close)
        watcher = await self.client(sock2)
        holder = await self.client()
        taken = await holder.lock(self.name)
        taken2 = await holder.lock(self.name + "-2")
        mine = await x.lock(self.name + "-mine")
        inside = asyncio.Event()

        async def scoped():
            async with x.lock(self.name + "-scoped"):
                inside.set()
                await asyncio.Event().wait()

        scope = asyncio.create_task(scoped())
        await inside.wait()
        waiter = asyncio.create_task(self._lock(x))
        waiter2 = asyncio.create_task(self._lock(x, self.name + "-2"))  # beside it
        await self.await_waiters(watcher, 2)
        proc.send_signal(signal.SIGKILL)
        async with asyncio.timeout(GUARD):
            with self.assertRaises(dlock.ConnectionClosed):
                await waiter
            with self.assertRaises(dlock.ConnectionClosed):
                await waiter2
            with self.assertRaises(dlock.LockLost) as cm:
                await scope
            await mine.lost.wait()
        self.assertEqual(cm.exception.reason, "closed")
        self.assertEqual(mine.reason, "closed")
        with self.assertRaises(dlock.ConnectionClosed):
            await x.ping()
        with self.assertRaises(dlock.ConnectionClosed):
            await x.lock("another")
        proc.wait()
        await taken.unlock()
        await taken2.unlock()

    async def test_close_fails_pending_and_reports_loss(self):
        a, c = await self.client(), await self.client()
        held = await a.lock(self.name)
        mine = await c.lock(self.name + "-mine")
        waiter = asyncio.create_task(self._lock(c))
        await self.await_waiters(a, 1)
        await c.close()
        async with asyncio.timeout(GUARD):
            with self.assertRaises(dlock.ConnectionClosed):
                await waiter
        self.assertEqual(mine.reason, "closed")
        await held.unlock()
        h = await a.trylock(self.name + "-mine", wait_ms=int(EVENT_TIMEOUT * 1000))
        await h.unlock()

    async def test_missing_socket(self):
        path = os.path.join(_env["tmp"], "missing.sock")
        with self.assertRaises(dlock.ConnectFailed) as cm:
            await dlock_asyncio.connect(path)
        self.assertIsInstance(cm.exception, ConnectionError)
        self.assertEqual(str(cm.exception), "cannot connect to dlockd at %s: No such file or "
                                            "directory (is dlockd running?)" % path)

    # -- the other kinds --

    async def test_read_write_locks(self):
        c, other = await self.client(), await self.client()
        async with c.rlock(self.name) as r1, c.rlock(self.name) as r2:
            self.assertEqual((r1.holds, r2.holds), (1, 1))
            r3 = await other.rlock(self.name)
            st = await other.status(self.name)
            self.assertEqual((st.state, st.readers), ("READ", 2))
            with self.assertRaises(dlock.Timeout):
                await other.trywlock(self.name, 50)
            await r3.unlock()
        w = await other.wlock(self.name)
        self.assertGreater(w.fence, 0)
        with self.assertRaises(dlock.Timeout):
            await c.tryrlock(self.name, wait_ms=20)
        await w.unlock()

    async def test_semaphore(self):
        c, other = await self.client(), await self.client()
        self.assertTrue(await c.seminit(self.name, 2))
        self.assertFalse(await c.seminit(self.name, 5))
        p = await c.acquire(self.name, 1)
        self.assertEqual((p.permits, p.held), (1, 1))
        async with c.acquire(self.name, 1) as q:
            self.assertEqual(q.held, 2)
            with self.assertRaises(dlock.Timeout):
                await other.tryacquire(self.name, 1, wait_ms=20)
        st = await c.status(self.name)
        self.assertEqual((st.state, st.available, st.holds), ("SEM", 1, 1))
        self.assertEqual(await p.release(), 0)

    async def test_latch(self):
        c, other = await self.client(), await self.client()
        self.assertEqual(await c.latch_count(self.name), 0)
        self.assertIs(await c.latch_set(self.name, 2), True)
        self.assertIs(await other.latch_set(self.name, 5), False)
        self.assertEqual(await other.latch_count(self.name), 2)
        with self.assertRaises(dlock.Timeout) as cm:
            await other.tryawait(self.name, wait_ms=20)
        self.assertEqual(cm.exception.count, 2)
        self.assertEqual(await c.count_down(self.name), 1)
        with self.assertRaises(dlock.Timeout) as cm:
            await other.tryawait(self.name)
        self.assertEqual(cm.exception.count, 1)
        self.assertEqual(await other.count_down(self.name), 0)
        self.assertIsNone(await c.tryawait(self.name))
        self.assertIsNone(await c.await_latch(self.name))
        self.assertEqual(await c.count_down(self.name), 0)     # no latch: nothing changes
        self.assertEqual(await c.latch_count(self.name), 0)
        for bad in (0, dlock.NUM_MAX + 1):
            with self.assertRaises(dlock.BadRequest):
                await c.latch_set(self.name, bad)
        with self.assertRaises(dlock.BadRequest):
            await c.await_latch("bad name")
        h = await c.lock(self.name + "-lock")
        with self.assertRaises(dlock.KindError):
            await other.await_latch(self.name + "-lock")
        with self.assertRaises(dlock.KindError):
            await other.count_down(self.name + "-lock")
        await h.unlock()

    async def test_latch_20_tasks_of_one_client_released_at_once(self):
        c, setter, watcher = await self.client(), await self.client(), await self.client()
        await setter.latch_set(self.name, 2)
        before = (await watcher.info())["waiters"]
        tasks = [asyncio.create_task(c.await_latch(self.name)) for _ in range(20)]
        await self.await_waiters(watcher, before + 20)     # all 20 in dlockd at once
        self.assertEqual(await setter.count_down(self.name), 1)
        self.assertEqual((await watcher.info())["waiters"], before + 20)
        self.assertTrue(await c.ping())     # answered while the 20 wait
        self.assertFalse(any(t.done() for t in tasks))
        self.assertEqual(await setter.count_down(self.name), 0)
        async with asyncio.timeout(GUARD):
            self.assertEqual(await asyncio.gather(*tasks), [None] * 20)

    async def test_latch_cancel_one_await(self):
        self.need_cancel()
        c, setter, watcher = await self.client(), await self.client(), await self.client()
        await setter.latch_set(self.name, 1)
        before = (await watcher.info())["waiters"]
        tasks = [asyncio.create_task(c.await_latch(self.name)) for _ in range(3)]
        await self.await_waiters(watcher, before + 3)
        tasks[1].cancel()
        async with asyncio.timeout(GUARD):
            with self.assertRaises(asyncio.CancelledError):
                await tasks[1]
            while (await watcher.info())["waiters"] != before + 2:    # its wait withdrawn
                await asyncio.sleep(0.01)   # poll interval
        self.assertFalse(tasks[0].done() or tasks[2].done())
        self.assertEqual(await c.latch_count(self.name), 1)
        with self.assertRaises(TimeoutError):
            async with asyncio.timeout(0.1):
                await c.tryawait(self.name, wait_ms=60000)    # withdrawn by asyncio's timeout
        self.assertEqual(await setter.count_down(self.name), 0)
        async with asyncio.timeout(GUARD):
            self.assertEqual(await asyncio.gather(tasks[0], tasks[2]), [None, None])
        self.assertEqual((await watcher.info())["waiters"], before)

    async def test_fair_lock(self):
        c, other = await self.client(), await self.client()
        async with c.fairlock(self.name) as h:
            self.assertEqual(await h.relock(), (h.fence, 2))
            with self.assertRaises(dlock.Timeout):
                await other.tryfairlock(self.name, 0)
        h = await other.tryfairlock(self.name, 1000)
        await h.unlock()

    # -- bad input --

    async def test_bad_names_not_sent(self):
        c = await self.client()
        before = (await c.info())["requests"]
        for name in ["", "a b", "x" * 300, "caf\u00e9", "nl\n", 42]:
            for call in (c.lock, c.trylock, c.rlock, c.wlock, c.fairlock):
                with self.assertRaises(dlock.BadRequest):
                    await call(name)
            with self.assertRaises(dlock.BadRequest):
                await c.status(name)
            with self.assertRaises(dlock.BadRequest):
                await c.acquire(name, 1)
        with self.assertRaises(dlock.BadRequest):
            await c.lock(self.name, lease_ms=-1)
        with self.assertRaises(dlock.BadRequest):
            await c.trylock(self.name, wait_ms=2 ** 31)
        self.assertEqual((await c.info())["requests"], before + 1)     # this INFO only
        h = await c.lock("n" * 255)
        self.assertEqual(await h.unlock(), 0)
        with self.assertRaises(dlock.KindError):
            await self._kind(c)
        self.assertTrue(await c.ping())

    async def _kind(self, c):
        h = await c.lock(self.name + "k")
        try:
            await c.acquire(self.name + "k", 1)
        finally:
            await h.unlock()


class FakeDlockd:
    """A fake dlockd on a Unix socket, for what a real one will not do on
    cue: the test reads each request line as it comes (its tag and the
    request) and writes the replies itself; QUIT and the requests in auto
    are answered at once. It notes a tag that comes while the same tag is
    in flight (read, its reply not yet written)."""

    def __init__(self, auto=None):
        self.auto = auto or {}      # request -> the reply after its tag
        self.lines = asyncio.Queue()
        self.inflight = set()
        self.reused = []            # lines whose tag was in flight
        self.tags = []              # every tag read, in order

    async def start(self, test):
        d = tempfile.mkdtemp()
        test.addCleanup(shutil.rmtree, d)
        self.path = os.path.join(d, "fake.sock")
        self.conn = asyncio.get_running_loop().create_future()
        srv = await asyncio.start_unix_server(self._serve, self.path)
        test.addAsyncCleanup(srv.wait_closed)
        test.addCleanup(srv.close)
        return self

    async def _serve(self, r, w):
        self.conn.set_result(w)
        while line := await r.readline():
            tag, _, req = line.decode().rstrip("\n").partition(" ")
            if tag in self.inflight:
                self.reused.append("%s %s" % (tag, req))
            self.inflight.add(tag)
            self.tags.append(tag)
            if req == "QUIT":
                self.write("%s OK BYE\n" % tag)
                break
            if req in self.auto:
                self.write("%s %s\n" % (tag, self.auto[req]))
            else:
                self.lines.put_nowait((tag, req))
        w.close()

    def write(self, text):
        """Replies (and events): a tagged line's tag is no longer in flight."""
        for line in text.splitlines():
            if line.startswith("#"):
                self.inflight.discard(line.split(" ", 1)[0])
        self.conn.result().write(text.encode())

    async def read(self):
        """The next request not answered at once: (tag, request)."""
        async with asyncio.timeout(GUARD):
            return await self.lines.get()


class WireTest(unittest.IsolatedAsyncioTestCase):
    """The tagged wire against a fake dlockd: races and replies on cue."""

    async def fake(self, auto=None):
        f = await FakeDlockd(auto).start(self)
        c = await dlock_asyncio.connect(f.path)
        self.addAsyncCleanup(c.close)
        return f, c

    async def test_replies_matched_by_tag_in_any_order(self):
        f, c = await self.fake()
        a = asyncio.ensure_future(c.lock("a"))
        b = asyncio.ensure_future(c.lock("b"))
        (ta, ra), (tb, rb) = await f.read(), await f.read()
        self.assertEqual((ra, rb), ("LOCK a", "LOCK b"))
        self.assertNotEqual(ta, tb)
        f.write("%s OK 9 1\n%s OK 8 1\n" % (tb, ta))
        async with asyncio.timeout(GUARD):
            ha, hb = await a, await b
        self.assertEqual((ha.name, ha.fence, hb.name, hb.fence), ("a", 8, "b", 9))

    async def test_grant_racing_the_cancel_released_before_the_call_returns(self):
        f, c = await self.fake()
        task = asyncio.ensure_future(c.lock("a"))
        tag, req = await f.read()
        self.assertEqual(req, "LOCK a")
        task.cancel()
        ctag, creq = await f.read()
        self.assertEqual(creq, "CANCEL %s" % tag)       # the CANCEL tagged too
        self.assertNotEqual(ctag, tag)
        f.write("%s OK 7 1\n%s OK 0\n" % (tag, ctag))   # the grant came first
        utag, ureq = await f.read()
        self.assertEqual(ureq, "UNLOCK a")
        for _ in range(20):             # turns of the loop, the UNLOCK unanswered
            await asyncio.sleep(0)
        self.assertFalse(task.done(), "the cancelled call returned before its grant was released")
        f.write("%s OK 0\n" % utag)
        async with asyncio.timeout(GUARD):
            with self.assertRaises(asyncio.CancelledError):
                await task
        self.assertEqual(c._handles, {})
        self.assertEqual(c._gates, {})      # the name's local turn given on

    async def test_cancel_answered_cancelled_sends_nothing_more(self):
        f, c = await self.fake({"PING": "OK PONG"})
        task = asyncio.ensure_future(c.lock("a"))
        other = asyncio.ensure_future(c.lock("b"))
        tag, _ = await f.read()
        otag, _ = await f.read()
        task.cancel()
        ctag, creq = await f.read()
        self.assertEqual(creq, "CANCEL %s" % tag)
        f.write("%s ERR CANCELLED the wait was cancelled\n%s OK 1\n" % (tag, ctag))
        async with asyncio.timeout(GUARD):
            with self.assertRaises(asyncio.CancelledError):
                await task
            self.assertTrue(await c.ping())
        self.assertTrue(f.lines.empty())    # no release, no other CANCEL
        self.assertFalse(other.done())      # the other wait undisturbed
        f.write("%s OK 3 1\n" % otag)
        async with asyncio.timeout(GUARD):
            self.assertEqual((await other).fence, 3)

    async def test_tags_never_reused_while_in_flight(self):
        # A tag space of 4 (tags 1 to 4), so that the counter wraps while
        # one wait keeps its tag: pings go round the other three.
        with mock.patch.object(dlock_asyncio, "_TAG_SPACE", 5):
            f, c = await self.fake({"PING": "OK PONG"})
            waiting = asyncio.ensure_future(c.lock("a"))
            tag, _ = await f.read()
            async with asyncio.timeout(GUARD):
                for _ in range(12):
                    self.assertTrue(await c.ping())
                # Many at once too: each gets a tag not in flight.
                self.assertEqual(await asyncio.gather(c.ping(), c.ping(), c.ping()), [True] * 3)
            self.assertEqual(f.reused, [])
            f.write("%s OK 5 1\n" % tag)
            async with asyncio.timeout(GUARD):
                await waiting
                self.assertTrue(await c.ping())
        self.assertEqual(f.reused, [])
        self.assertEqual(len(f.tags), 17)
        self.assertLessEqual(set(f.tags), {"#1", "#2", "#3", "#4"})   # the counter wrapped
        self.assertEqual(f.tags[-1], tag)       # the wait's tag, free again once answered

    async def test_untagged_err_fails_the_connection(self):
        f, c = await self.fake()
        task = asyncio.ensure_future(c.lock("a"))
        await f.read()
        f.write("ERR ARGS a tag is # and 1 to 16 of 0-9 A-Z a-z _ -\n")
        async with asyncio.timeout(GUARD):
            with self.assertRaises(dlock.ConnectionClosed) as cm:
                await task
        self.assertIn("ERR ARGS a tag is", str(cm.exception))
        self.assertTrue(c.closed)

    async def test_reply_to_no_request_fails_the_connection(self):
        f, c = await self.fake()
        task = asyncio.ensure_future(c.lock("a"))
        await f.read()
        f.write("#zz OK 1 1\n")
        async with asyncio.timeout(GUARD):
            with self.assertRaises(dlock.ConnectionClosed) as cm:
                await task
        self.assertIn("no request in flight", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
