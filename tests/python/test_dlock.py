#!/usr/bin/env python3
"""Tests of the Python dlock client against a real dlockd and redis-server.

Run: DLOCKD_BIN=$PWD/build/dlockd python3 tests/python/test_dlock.py -v
"""
# SPDX-License-Identifier: MIT

import atexit
import errno
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

import dlock  # noqa: E402

START_TIMEOUT = 15.0     # seconds for redis-server and dlockd to come up
EVENT_TIMEOUT = 5.0      # seconds to wait for an event or a grant
CONF_LEASE_MS = 600

_env = {"tmp": None, "procs": [], "logs": [], "sock": None}


def _pdeathsig():
    # Linux: the child dies with us even if we are killed.
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _spawn(argv, logname):
    log = open(os.path.join(_env["tmp"], logname), "wb")
    _env["logs"].append(log)
    kw = {}
    if sys.platform.startswith("linux"):
        kw["preexec_fn"] = _pdeathsig
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         cwd=_env["tmp"], **kw)
    _env["procs"].append((p, logname))
    return p


def _logs():
    out = []
    for _, logname in _env["procs"]:
        try:
            with open(os.path.join(_env["tmp"], logname), "rb") as f:
                out.append("--- %s ---\n%s" % (logname, f.read().decode("utf-8", "replace")))
        except OSError:
            pass
    return "\n".join(out)


def _cleanup():
    procs, _env["procs"] = _env["procs"], []
    for p, _ in reversed(procs):        # dlockd first, then redis
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    for log in _env["logs"]:
        log.close()
    _env["logs"] = []
    tmp, _env["tmp"] = _env["tmp"], None
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


def setUpModule():
    atexit.register(_cleanup)
    redis = shutil.which("redis-server")
    if redis is None:
        raise RuntimeError("redis-server not found in PATH")
    dlockd = os.environ.get("DLOCKD_BIN") or os.path.join(ROOT, "build", "dlockd")
    if not os.access(dlockd, os.X_OK):
        raise RuntimeError("dlockd binary %s not found; run `make build/dlockd` or set "
                           "DLOCKD_BIN" % dlockd)
    tmp = _env["tmp"] = tempfile.mkdtemp(prefix="dlock-py-")
    rsock = os.path.join(tmp, "redis.sock")
    dsock = _env["sock"] = os.path.join(tmp, "d.sock")
    conf = os.path.join(tmp, "dlockd.conf")
    with open(conf, "w") as f:
        f.write("[server]\nsocket = %s\nadmin_uids = 0\n[redis]\nurl = unix://%s\n"
                "[lock]\nlease_ms = %d\n" % (dsock, rsock, CONF_LEASE_MS))
    os.chmod(conf, 0o600)  # dlockd refuses, as root, a file others can write
    _spawn([redis, "--port", "0", "--unixsocket", rsock, "--save", "", "--appendonly", "no",
            "--dir", tmp], "redis.log")
    _spawn([dlockd, "-c", conf], "dlockd.log")

    deadline = time.monotonic() + START_TIMEOUT
    last = None
    while time.monotonic() < deadline:
        for p, logname in _env["procs"]:
            if p.poll() is not None:
                raise RuntimeError("%s exited with %s\n%s" % (logname, p.returncode, _logs()))
        try:
            with dlock.Client(dsock, timeout=1.0) as c:
                c.ping()
                info = c.info()
                if info.get("redis") == "up":
                    return
                last = "redis=%s" % info.get("redis")
        except (dlock.DlockError, OSError) as e:
            last = e
        time.sleep(0.02)    # poll interval
    raise RuntimeError("dlockd not ready within %ss (%s)\n%s" % (START_TIMEOUT, last, _logs()))


def tearDownModule():
    _cleanup()


def wait_readable(test, fd, timeout=EVENT_TIMEOUT):
    r, _, _ = select.select([fd], [], [], timeout)
    test.assertTrue(r, "no event from dlockd within %ss" % timeout)


class DlockTest(unittest.TestCase):
    def setUp(self):
        self.sock = _env["sock"]
        self.name = "py-%s-%s" % (self._testMethodName, uuid.uuid4().hex[:8])

    def client(self, **kw):
        c = dlock.Client(self.sock, **kw)
        self.addCleanup(c.close)
        return c

    def lock_obj(self, name=None, **kw):
        kw.setdefault("socket", self.sock)
        lk = dlock.Lock(name or self.name, **kw)

        def cleanup():
            try:
                lk.release()
            except dlock.DlockError:
                pass
        self.addCleanup(cleanup)
        return lk

    # -- basics --

    def test_ping_and_info(self):
        c = self.client()
        self.assertTrue(c.ping())
        info = c.info()
        self.assertEqual(info["redis"], "up")
        self.assertIsInstance(info["connections"], int)
        self.assertIsInstance(info["version"], str)
        self.assertEqual(info["peer_uid"], os.getuid())
        self.assertEqual(info["peer_pid"], os.getpid())

    def test_default_socket_from_env(self):
        with mock.patch.dict(os.environ, {"DLOCK_SOCKET": self.sock}):
            with dlock.Client() as c:
                self.assertEqual(c.path, self.sock)
                self.assertTrue(c.ping())

    def test_context_manager_yields_fence_and_releases(self):
        other = self.client()
        lk = self.lock_obj()
        with lk as fence:
            self.assertIsInstance(fence, int)
            self.assertGreater(fence, 0)
            self.assertEqual(lk.fence, fence)
            self.assertTrue(lk.locked())
            st = lk.status()
            self.assertEqual((st.state, st.holds, st.fence), ("MINE", 1, fence))
            self.assertEqual(other.status(self.name).state, "TAKEN")
        self.assertFalse(lk.locked())
        self.assertIsNone(lk.fence)
        self.assertEqual(other.status(self.name), dlock.Status("FREE", 0, None, None))

    def test_reentrancy(self):
        c = self.client()
        fence, holds = c.lock(self.name)
        self.assertEqual(holds, 1)
        self.assertEqual(c.lock(self.name), (fence, 2))
        self.assertEqual(c.trylock(self.name), (fence, 3))
        self.assertEqual(c.status(self.name).holds, 3)
        self.assertEqual(c.unlock(self.name), 2)
        self.assertEqual(c.unlock(self.name), 1)
        self.assertEqual(c.unlock(self.name), 0)
        self.assertEqual(c.status(self.name).state, "FREE")
        with self.assertRaises(dlock.NotHeld) as cm:
            c.unlock(self.name)
        self.assertEqual(cm.exception.code, "NOTHELD")

    def test_lock_reentrancy(self):
        lk = self.lock_obj()
        self.assertIs(lk.acquire(), True)
        f1 = lk.fence
        self.assertGreater(f1, 0)
        self.assertIs(lk.acquire(), True)
        self.assertEqual(lk.fence, f1)
        self.assertEqual(lk.status().holds, 2)
        lk.release()        # every hold
        self.assertEqual(self.client().status(self.name).state, "FREE")

    def test_fences_rise(self):
        a, b = self.client(), self.client()
        f1, _ = a.lock(self.name)
        a.unlock(self.name)
        f2, _ = a.lock(self.name)
        a.unlock(self.name)
        f3, _ = b.lock(self.name)
        b.unlock(self.name)
        with self.lock_obj() as f4:
            pass
        self.assertTrue(0 < f1 < f2 < f3 < f4, (f1, f2, f3, f4))

    # -- waiting --

    def test_trylock_timeout_with_ttl(self):
        holder, other = self.client(), self.client()
        holder.lock(self.name, lease_ms=10000)
        with self.assertRaises(dlock.Timeout) as cm:
            other.trylock(self.name)
        self.assertTrue(0 < cm.exception.ttl_ms <= 10000, cm.exception.ttl_ms)
        self.assertIsInstance(cm.exception, dlock.DlockError)
        t0 = time.monotonic()
        with self.assertRaises(dlock.Timeout):
            other.trylock(self.name, wait_ms=100)
        self.assertGreaterEqual(time.monotonic() - t0, 0.08)

    def test_blocking_acquire_gets_lock_on_release(self):
        holder = self.client()
        hfence, _ = holder.lock(self.name)
        watcher = self.client()
        waiters0 = watcher.info()["waiters"]
        lk = self.lock_obj()
        result = {}
        done = threading.Event()

        def run():
            try:
                result["acquired"] = lk.acquire()
                result["fence"] = lk.fence
            except BaseException as e:  # report it to the main thread
                result["error"] = e
            done.set()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        # Bounded wait until dlockd counts the waiter.
        deadline = time.monotonic() + EVENT_TIMEOUT
        while watcher.info()["waiters"] <= waiters0 and not done.is_set():
            self.assertLess(time.monotonic(), deadline, "the waiter never showed up")
            time.sleep(0.01)
        self.assertFalse(done.is_set(), "acquired while the holder held: %r" % result)
        self.assertEqual(holder.unlock(self.name), 0)
        self.assertTrue(done.wait(EVENT_TIMEOUT), "blocking acquire did not return")
        t.join(EVENT_TIMEOUT)
        self.assertNotIn("error", result)
        self.assertIs(result["acquired"], True)
        self.assertGreater(result["fence"], hfence)
        self.assertTrue(lk.locked())
        lk.release()

    def test_acquire_timeout_returns_false(self):
        # Like threading.Lock.acquire: False when not acquired, no exception.
        holder = self.client()
        holder.lock(self.name)
        lk = self.lock_obj()
        t0 = time.monotonic()
        self.assertIs(lk.acquire(timeout=0.2), False)
        elapsed = time.monotonic() - t0
        self.assertGreaterEqual(elapsed, 0.18)
        self.assertLess(elapsed, 3.0)
        self.assertIs(lk.acquire(blocking=False), False)
        self.assertIs(lk.acquire(timeout=0), False)
        self.assertIs(lk.acquire(True, 0.05), False)     # positional, as threading
        self.assertIsNone(lk.fence)
        self.assertFalse(lk.locked())
        holder.unlock(self.name)
        self.assertIs(lk.acquire(blocking=False), True)
        self.assertGreater(lk.fence, 0)
        self.assertTrue(lk.locked())
        self.assertEqual(holder.status(self.name).state, "TAKEN")
        lk.release()
        self.assertIsNone(lk.fence)

    def test_acquire_with_timeout_succeeds_when_released(self):
        holder = self.client()
        hfence, _ = holder.lock(self.name)
        lk = self.lock_obj()
        self.assertIs(lk.acquire(timeout=0.05), False)
        threading.Timer(0.2, holder.unlock, (self.name,)).start()
        self.assertIs(lk.acquire(timeout=EVENT_TIMEOUT), True)
        self.assertGreater(lk.fence, hfence)
        self.assertEqual(lk.status().fence, lk.fence)
        lk.release()
        # The with block still works after a failed try, and gives the fence.
        with lk as fence:
            self.assertGreater(fence, hfence)
            self.assertEqual(lk.fence, fence)

    def test_acquire_argument_errors(self):
        lk = self.lock_obj()
        with self.assertRaises(ValueError):
            lk.acquire(blocking=False, timeout=1)
        with self.assertRaises(ValueError):
            lk.acquire(timeout=-2)
        self.assertFalse(lk.locked())
        self.assertIs(lk.acquire(timeout=None), True)    # None: as long as it takes
        self.assertIs(lk.acquire(blocking=False, timeout=-1), True)
        self.assertEqual(lk.status().holds, 2)

    def test_acquire_raises_other_errors(self):
        # A dlockd whose Redis is not there answers ERR BACKEND: acquire()
        # raises it, whatever the timeout, rather than returning False.
        tmp = _env["tmp"]
        sock = os.path.join(tmp, "noredis.sock")
        conf = os.path.join(tmp, "noredis.conf")
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n[redis]\nurl = unix://%s\n"
                    % (sock, os.path.join(tmp, "missing-redis.sock")))
        os.chmod(conf, 0o600)
        dlockd = os.environ.get("DLOCKD_BIN") or os.path.join(ROOT, "build", "dlockd")
        p = _spawn([dlockd, "-c", conf], "noredis.log")
        self.addCleanup(p.wait)
        self.addCleanup(p.terminate)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                with dlock.Client(sock, timeout=1.0) as c:
                    c.ping()
                break
            except (dlock.DlockError, OSError):
                self.assertLess(time.monotonic(), deadline, "dlockd without redis never answered")
                time.sleep(0.02)    # poll interval
        lk = self.lock_obj(socket=sock)
        for kw in ({"timeout": 0.2}, {"blocking": False}, {"timeout": 0}, {}):
            with self.assertRaises(dlock.BackendError, msg=repr(kw)) as cm:
                lk.acquire(**kw)
            self.assertEqual(cm.exception.code, "BACKEND")
            self.assertIsNone(lk.fence)

    # -- leases --

    def test_renew_returns_lease(self):
        c = self.client()
        c.lock(self.name, lease_ms=10000)
        self.assertEqual(c.renew(self.name, 5000), 5000)
        self.assertLessEqual(c.status(self.name).ttl_ms, 5000)
        self.assertEqual(c.renew(self.name), 5000)    # its own lease now
        wd = self.name + "-wd"
        c.lock(wd)                                    # watchdog mode
        self.assertEqual(c.renew(wd), CONF_LEASE_MS)
        with self.assertRaises(dlock.NotHeld):
            c.renew(self.name + "-none")
        lk = self.lock_obj(self.name + "-lk", lease_ms=10000)
        lk.acquire()
        self.assertEqual(lk.renew(3000), 3000)

    def test_status_states(self):
        a, b = self.client(), self.client()
        self.assertEqual(a.status(self.name), ("FREE", 0, None, None))
        fence, _ = a.lock(self.name)
        st = a.status(self.name)
        self.assertEqual((st.state, st.holds, st.fence), ("MINE", 1, fence))
        self.assertTrue(0 <= st.ttl_ms <= CONF_LEASE_MS, st.ttl_ms)
        st = b.status(self.name)
        self.assertEqual((st.state, st.holds, st.fence), ("TAKEN", 0, None))
        self.assertTrue(-1 <= st.ttl_ms <= CONF_LEASE_MS, st.ttl_ms)
        a.unlock(self.name)
        self.assertEqual(b.status(self.name).state, "FREE")

    def test_lease_expiry_raises_lock_lost(self):
        c = self.client()
        c.lock(self.name, lease_ms=200)
        wait_readable(self, c.fileno())
        with self.assertRaises(dlock.LockLost) as cm:
            c.status(self.name)
        self.assertEqual((cm.exception.name, cm.exception.reason), (self.name, "expired"))
        self.assertEqual(c.lost, {})
        # Reported once; then the daemon's view. dlockd reports the loss at
        # the end of the lease as it measures it, which can be a millisecond
        # before Redis drops the key: STATUS may still say "TAKEN 0" then.
        st = c.status(self.name)
        self.assertIn(st.state, ("FREE", "TAKEN"))
        if st.state == "TAKEN":
            self.assertLessEqual(st.ttl_ms, 200)
        with self.assertRaises(dlock.NotHeld):
            c.unlock(self.name)

    def test_lease_expiry_on_unlock(self):
        c = self.client()
        c.lock(self.name, lease_ms=200)
        wait_readable(self, c.fileno())
        with self.assertRaises(dlock.LockLost) as cm:
            c.unlock(self.name)
        self.assertEqual(cm.exception.reason, "expired")

    def test_check_raises_lock_lost(self):
        c = self.client()
        c.lock(self.name, lease_ms=200)
        self.assertIsNone(c.check())
        wait_readable(self, c.fileno())
        with self.assertRaises(dlock.LockLost) as cm:
            c.check()
        self.assertEqual((cm.exception.name, cm.exception.reason), (self.name, "expired"))
        self.assertIsNone(c.check())
        self.assertEqual(c.lost, {})
        self.assertTrue(c.ping())

    def test_lost_recorded_while_reading_other_replies(self):
        c = self.client()
        c.lock(self.name, lease_ms=200)
        wait_readable(self, c.fileno())
        self.assertTrue(c.ping())          # reads the event along the way
        self.assertEqual(c.lost, {self.name: "expired"})
        with self.assertRaises(dlock.LockLost):
            c.lock(self.name)
        self.assertEqual(c.lost, {})

    def test_with_block_raises_lock_lost(self):
        lk = self.lock_obj(lease_ms=200)
        with self.assertRaises(dlock.LockLost) as cm:
            with lk as fence:
                self.assertGreater(fence, 0)
                wait_readable(self, lk.fileno())
        self.assertEqual((cm.exception.name, cm.exception.reason), (self.name, "expired"))
        self.assertFalse(lk.locked())

    def test_with_block_does_not_mask_exception(self):
        lk = self.lock_obj(lease_ms=200)
        with self.assertRaises(KeyError):
            with lk:
                wait_readable(self, lk.fileno())
                raise KeyError("inner")
        self.assertFalse(lk.locked())

    def test_lock_check(self):
        lk = self.lock_obj(lease_ms=200)
        lk.acquire()
        lk.check()
        wait_readable(self, lk.fileno())
        self.assertFalse(lk.locked())
        with self.assertRaises(dlock.LockLost):
            lk.check()
        lk.release()        # acknowledged: closes quietly

    # -- read/write locks --

    def test_readers_share_and_keep_a_writer_out(self):
        a, b, w = self.client(), self.client(), self.client()
        with a.read_lock(self.name) as f1:
            with b.read_lock(self.name) as f2:
                self.assertEqual(f1, f2)        # a read grant does not raise it
                st = w.status(self.name)
                self.assertEqual((st.state, st.holds, st.readers), ("READ", 0, 2))
                st = a.status(self.name)
                self.assertEqual((st.state, st.holds, st.fence), ("READ", 1, None))
                self.assertTrue(0 < st.ttl_ms <= CONF_LEASE_MS, st.ttl_ms)
                with self.assertRaises(dlock.Timeout):
                    w.trywlock(self.name)
                wl = w.write_lock(self.name)
                self.assertIs(wl.acquire(timeout=0.05), False)
                self.assertIs(wl.acquire(blocking=False), False)
                self.assertIsNone(wl.fence)
            self.assertEqual(w.status(self.name).readers, 1)
        # Both let go on leaving their blocks: the writer gets it.
        wl = w.write_lock(self.name)
        self.assertIs(wl.acquire(timeout=EVENT_TIMEOUT), True)
        self.assertGreater(wl.fence, f1)
        self.assertTrue(wl.locked())
        wl.release()
        self.assertFalse(wl.locked())
        self.assertEqual(a.status(self.name), ("FREE", 0, None, None))

    def test_writer_excludes_and_wakes_a_reader(self):
        a, b, watcher = self.client(), self.client(), self.client()
        waiters0 = watcher.info()["waiters"]
        result = {}
        done = threading.Event()

        def read():
            try:
                with b.read_lock(self.name) as fence:
                    result["fence"] = fence
                    result["status"] = b.status(self.name)
            except BaseException as e:  # report it to the main thread
                result["error"] = e
            done.set()

        with a.write_lock(self.name) as wfence:
            self.assertGreater(wfence, 0)
            st = a.status(self.name)
            self.assertEqual((st.state, st.holds, st.readers), ("WRITE", 1, 1))
            st = watcher.status(self.name)
            self.assertEqual((st.state, st.holds), ("WRITE", 0))
            with self.assertRaises(dlock.Timeout):
                watcher.tryrlock(self.name)
            with self.assertRaises(dlock.Timeout):
                watcher.trywlock(self.name, wait_ms=50)
            t = threading.Thread(target=read, daemon=True)
            t.start()
            # Bounded wait until dlockd counts the reader as waiting.
            deadline = time.monotonic() + EVENT_TIMEOUT
            while watcher.info()["waiters"] <= waiters0 and not done.is_set():
                self.assertLess(time.monotonic(), deadline, "the reader never waited")
                time.sleep(0.01)
            self.assertFalse(done.is_set(), "read while the writer wrote: %r" % result)
        self.assertTrue(done.wait(EVENT_TIMEOUT), "the reader was not woken")
        t.join(EVENT_TIMEOUT)
        self.assertNotIn("error", result)
        self.assertEqual(result["fence"], wfence)   # the writer's, as it is
        self.assertEqual((result["status"].state, result["status"].holds), ("READ", 1))

    def test_client_lock_holds_nest(self):
        c = self.client()
        rl = c.read_lock(self.name)
        with rl as f1:
            with rl as f2:
                self.assertEqual(f1, f2)
                self.assertEqual(c.status(self.name).holds, 2)
            self.assertEqual(c.status(self.name).holds, 1)
            self.assertTrue(rl.locked())
        self.assertFalse(rl.locked())
        self.assertIsNone(rl.fence)
        self.assertEqual(c.status(self.name).state, "FREE")
        with self.assertRaises(dlock.NotHeld):
            rl.release()
        # A writer may read too (a downgrade), then stop writing.
        wl = c.write_lock(self.name)
        self.assertIs(wl.acquire(), True)
        self.assertEqual(c.wlock(self.name), (wl.fence, 2))
        self.assertEqual(c.wunlock(self.name), 1)
        self.assertIs(rl.acquire(blocking=False), True)
        self.assertEqual(rl.fence, wl.fence)
        wl.release()
        st = c.status(self.name)
        self.assertEqual((st.state, st.holds), ("READ", 1))
        self.assertEqual(c.runlock(self.name), 0)
        with self.assertRaises(dlock.NotHeld):
            c.runlock(self.name)
        with self.assertRaises(dlock.NotHeld):
            c.wunlock(self.name)
        with self.assertRaises(ValueError):
            dlock.ClientLock(c, self.name, "shared")

    def test_kind_errors(self):
        a, b = self.client(), self.client()
        plain, rw = self.name, self.name + "-rw"
        a.lock(plain)
        for call in (lambda: b.rlock(plain), lambda: b.trywlock(plain),
                     lambda: b.read_lock(plain).acquire(timeout=0),
                     lambda: a.runlock(plain), lambda: a.wunlock(plain)):
            with self.assertRaises(dlock.KindError) as cm:
                call()
            self.assertEqual(cm.exception.code, "KIND")
            self.assertIsInstance(cm.exception, dlock.DlockError)
        with self.assertRaises(dlock.KindError):
            with b.write_lock(plain):
                self.fail("granted a write lock of a plain lock")
        self.assertEqual(a.unlock(plain), 0)
        # The other way round, and an upgrade.
        a.rlock(rw)
        with self.assertRaises(dlock.KindError):
            b.lock(rw)
        with self.assertRaises(dlock.KindError):
            a.unlock(rw)
        with self.assertRaises(dlock.KindError) as cm:
            a.wlock(rw)
        self.assertIn("upgrade", cm.exception.message)
        with self.assertRaises(dlock.KindError):
            with a.write_lock(rw):
                self.fail("upgraded a read lock")
        # Nothing changed: still one reader, and both connections work.
        self.assertEqual(b.status(rw).readers, 1)
        self.assertEqual(a.runlock(rw), 0)
        self.assertTrue(a.ping() and b.ping())

    def test_read_lock_lost_raises_on_exit(self):
        c = self.client()
        rl = c.read_lock(self.name, lease_ms=200)
        with self.assertRaises(dlock.LockLost) as cm:
            with rl:
                wait_readable(self, c.fileno())
        self.assertEqual((cm.exception.name, cm.exception.reason), (self.name, "expired"))
        self.assertFalse(rl.locked())
        self.assertIsNone(rl.fence)
        self.assertTrue(c.ping())

    # -- semaphores --

    def await_waiters(self, watcher, n):
        """Bounded wait until dlockd counts at least n waiting requests."""
        deadline = time.monotonic() + EVENT_TIMEOUT
        while watcher.info()["waiters"] < n:
            self.assertLess(time.monotonic(), deadline, "never %d waiters" % n)
            time.sleep(0.01)    # poll interval

    def test_semaphore_permits(self):
        a, b = self.client(), self.client()
        self.assertIs(a.seminit(self.name, 3), True)
        self.assertIs(b.seminit(self.name, 5), False)     # set once
        self.assertIs(a.seminit(self.name, 3), False)
        st = b.status(self.name)
        self.assertEqual(st, ("SEM", 0, None, None))
        self.assertEqual(st.available, 3)
        self.assertIn("available=3", repr(st))
        self.assertEqual(a.acquire(self.name, 2), 2)
        st = a.status(self.name)
        self.assertEqual((st.state, st.holds, st.available, st.ttl_ms, st.fence),
                         ("SEM", 2, 1, None, None))
        self.assertIsNone(st.readers)
        self.assertEqual((b.status(self.name).holds, b.status(self.name).available), (0, 1))
        # Two are not free for b, at once nor after a wait.
        with self.assertRaises(dlock.Timeout) as cm:
            b.tryacquire(self.name, 2)
        self.assertIsInstance(cm.exception.ttl_ms, int)
        t0 = time.monotonic()
        with self.assertRaises(dlock.Timeout):
            b.tryacquire(self.name, 2, wait_ms=100)
        self.assertGreaterEqual(time.monotonic() - t0, 0.08)
        # A holder takes more: the last one.
        self.assertEqual(a.tryacquire(self.name, 1), 3)
        self.assertEqual(a.status(self.name).available, 0)
        with self.assertRaises(dlock.Timeout):
            b.tryacquire(self.name, 1)
        # More than held: NotHeld, nothing released.
        with self.assertRaises(dlock.NotHeld) as cm:
            a.release(self.name, 4)
        self.assertEqual(cm.exception.code, "NOTHELD")
        with self.assertRaises(dlock.NotHeld):
            b.release(self.name, 1)
        st = a.status(self.name)
        self.assertEqual((st.holds, st.available), (3, 0))
        # After a release b gets its two.
        self.assertEqual(a.release(self.name, 2), 1)
        self.assertEqual(b.tryacquire(self.name, 2, wait_ms=int(EVENT_TIMEOUT * 1000)), 2)
        self.assertEqual(a.release(self.name, 1), 0)
        self.assertEqual(b.release(self.name, 2), 0)
        self.assertEqual(a.tryacquire(self.name, 3, wait_ms=int(EVENT_TIMEOUT * 1000)), 3)

    def test_semaphore_waiters_are_woken(self):
        a, b, watcher = self.client(), self.client(), self.client()
        waiters0 = watcher.info()["waiters"]
        a.seminit(self.name, 2)
        a.acquire(self.name, 2)
        result = {}
        done = threading.Event()

        def run(fn, *args):
            try:
                result["held"] = fn(*args)
            except BaseException as e:  # report it to the main thread
                result["error"] = e
            done.set()

        t = threading.Thread(target=run, args=(b.acquire, self.name, 1), daemon=True)
        t.start()
        self.await_waiters(watcher, waiters0 + 1)
        self.assertFalse(done.is_set(), "acquired while none was free: %r" % result)
        self.assertEqual(a.release(self.name, 1), 1)
        self.assertTrue(done.wait(EVENT_TIMEOUT), "the waiting acquire did not return")
        t.join(EVENT_TIMEOUT)
        self.assertEqual(result, {"held": 1})
        # A semaphore whose permits were never set: try times out, acquire
        # waits for SEMINIT.
        unset = self.name + "-unset"
        with self.assertRaises(dlock.Timeout):
            b.tryacquire(unset, 1, wait_ms=50)
        result.clear()
        done.clear()
        t = threading.Thread(target=run, args=(b.tryacquire, unset, 2,
                                               int(EVENT_TIMEOUT * 1000)), daemon=True)
        t.start()
        self.await_waiters(watcher, waiters0 + 1)
        self.assertIs(a.seminit(unset, 2), True)
        self.assertTrue(done.wait(EVENT_TIMEOUT), "the waiting tryacquire did not return")
        t.join(EVENT_TIMEOUT)
        self.assertEqual(result, {"held": 2})

    def test_semaphore_context_manager(self):
        a, b = self.client(), self.client()
        a.seminit(self.name, 3)
        sem = a.semaphore(self.name, 2)
        with sem as held:
            self.assertEqual(held, 2)
            self.assertTrue(sem.locked())
            self.assertEqual(b.status(self.name).available, 1)
            with a.semaphore(self.name, 1) as held2:     # a holder takes more
                self.assertEqual(held2, 3)
                with self.assertRaises(dlock.Timeout):
                    with b.semaphore(self.name, 1, wait_ms=50):
                        self.fail("got a permit while none was free")
            self.assertEqual(a.status(self.name).holds, 2)
        self.assertFalse(sem.locked())
        self.assertEqual(sem.held, 0)
        with self.assertRaises(dlock.NotHeld):
            sem.release()
        # acquire() as threading.Semaphore's: True or False.
        bs = b.semaphore(self.name, 3)
        self.assertIs(bs.acquire(timeout=EVENT_TIMEOUT), True)    # all three, once back
        self.assertEqual(bs.held, 3)
        self.assertIs(sem.acquire(timeout=0.05), False)
        self.assertIs(sem.acquire(blocking=False), False)
        self.assertFalse(sem.locked())
        bs.release()
        self.assertIs(sem.acquire(timeout=EVENT_TIMEOUT), True)
        self.assertIs(a.semaphore(self.name, 2).acquire(timeout=0.05), False)  # one left
        sem.release()
        self.assertEqual(a.status(self.name).holds, 0)
        # Nested blocks of one object each take and give back their permits.
        one = a.semaphore(self.name, 1, wait_ms=int(EVENT_TIMEOUT * 1000))
        with one:
            with one as held:
                self.assertEqual(held, 2)
            self.assertEqual(a.status(self.name).holds, 1)
        self.assertEqual(a.status(self.name).holds, 0)

    def test_semaphore_close_gives_permits_back(self):
        a, b = self.client(), self.client()
        a.seminit(self.name, 2)
        a.acquire(self.name, 1)
        self.assertEqual(a.acquire(self.name, 1), 2)
        with self.assertRaises(dlock.Timeout):
            b.tryacquire(self.name, 1)
        a.close()
        self.assertEqual(b.tryacquire(self.name, 2, wait_ms=int(EVENT_TIMEOUT * 1000)), 2)

    def test_semaphore_lease_lost_and_renewed(self):
        c = self.client()
        c.seminit(self.name, 2)
        self.assertEqual(c.acquire(self.name, 1, lease_ms=10000), 1)
        self.assertEqual(c.renew(self.name, 5000), 5000)
        lost = self.name + "-lost"
        c.seminit(lost, 1)
        sem = c.semaphore(lost, 1, lease_ms=200)
        with self.assertRaises(dlock.LockLost) as cm:
            with sem:
                wait_readable(self, c.fileno())
        self.assertEqual((cm.exception.name, cm.exception.reason), (lost, "expired"))
        self.assertFalse(sem.locked())
        with self.assertRaises(dlock.NotHeld):
            c.release(lost, 1)
        self.assertEqual(self.client().tryacquire(lost, 1, wait_ms=int(EVENT_TIMEOUT * 1000)), 1)

    def test_semaphore_kind_errors(self):
        a, b = self.client(), self.client()
        sem, plain, rw = self.name, self.name + "-plain", self.name + "-rw"
        a.seminit(sem, 2)
        a.acquire(sem, 1)
        for call in (lambda: b.lock(sem), lambda: b.trylock(sem), lambda: b.rlock(sem),
                     lambda: b.trywlock(sem), lambda: a.unlock(sem), lambda: a.runlock(sem),
                     lambda: b._call(["WHO", sem])):
            with self.assertRaises(dlock.KindError) as cm:
                call()
            self.assertEqual(cm.exception.code, "KIND")
        a.lock(plain)
        b.rlock(rw)
        for call in (lambda: b.seminit(plain, 2), lambda: b.acquire(plain, 1),
                     lambda: b.tryacquire(plain, 1), lambda: a.release(plain, 1),
                     lambda: a.seminit(rw, 2), lambda: a.tryacquire(rw, 1, 10),
                     lambda: b.release(rw, 1), lambda: b.semaphore(plain, 1).acquire(timeout=0)):
            with self.assertRaises(dlock.KindError):
                call()
        with self.assertRaises(dlock.KindError):
            with b.semaphore(plain, 1):
                self.fail("granted permits of a plain lock")
        # Nothing changed.
        st = b.status(sem)
        self.assertEqual((st.state, st.available, st.holds), ("SEM", 1, 0))
        self.assertEqual(a.status(plain).state, "MINE")
        self.assertEqual(b.status(rw).holds, 1)
        self.assertTrue(a.ping() and b.ping())

    def test_semaphore_force_unlock(self):
        a, b, admin = self.client(), self.client(), self.client()
        admin.seminit(self.name, 3)
        a.acquire(self.name, 2)
        b.acquire(self.name, 1)
        if os.geteuid() != 0:
            with self.assertRaises(dlock.Denied):
                admin.force_unlock(self.name)
            return
        self.assertIs(admin.force_unlock(self.name), True)
        for c in (a, b):
            wait_readable(self, c.fileno())
            with self.assertRaises(dlock.LockLost) as cm:
                c.check()
            self.assertEqual((cm.exception.name, cm.exception.reason), (self.name, "forced"))
        self.assertIs(admin.force_unlock(self.name), False)
        self.assertEqual(admin.tryacquire(self.name, 3, wait_ms=int(EVENT_TIMEOUT * 1000)), 3)

    def test_semaphore_bad_arguments_not_sent(self):
        c = self.client()
        before = c.info()["requests"]
        for call in (lambda: c.seminit("a b", 1), lambda: c.seminit(self.name, -1),
                     lambda: c.seminit(self.name, 2 ** 31), lambda: c.seminit(self.name, "2"),
                     lambda: c.acquire(self.name, 0), lambda: c.acquire(self.name, 10001),
                     lambda: c.acquire(self.name, True), lambda: c.acquire("", 1),
                     lambda: c.acquire(self.name, 1, lease_ms=-1),
                     lambda: c.tryacquire(self.name, 1, wait_ms=-1),
                     lambda: c.tryacquire(self.name, 0), lambda: c.release(self.name, 0),
                     lambda: c.release(self.name, dlock.PERMITS_MAX + 1),
                     lambda: c.semaphore(self.name, 0), lambda: c.semaphore("a b", 1),
                     lambda: c.semaphore(self.name, 1, wait_ms=-5)):
            with self.assertRaises(dlock.BadRequest):
                call()
        self.assertEqual(c.info()["requests"], before + 1)   # only this INFO
        # The largest request is fine.
        c.seminit(self.name, dlock.PERMITS_MAX)
        self.assertEqual(c.tryacquire(self.name, dlock.PERMITS_MAX), dlock.PERMITS_MAX)
        self.assertEqual(c.release(self.name, dlock.PERMITS_MAX), 0)

    # -- fair locks --

    def await_waiters_at_most(self, watcher, n):
        """Bounded wait until dlockd counts at most n waiting requests."""
        deadline = time.monotonic() + EVENT_TIMEOUT
        while watcher.info()["waiters"] > n:
            self.assertLess(time.monotonic(), deadline, "still more than %d waiters" % n)
            time.sleep(0.01)    # poll interval

    def test_fair_lock_reenter_unlock(self):
        a, b = self.client(), self.client()
        f1, holds = a.fairlock(self.name)
        self.assertGreater(f1, 0)
        self.assertEqual(holds, 1)
        self.assertEqual(a.fairlock(self.name), (f1, 2))
        self.assertEqual(a.tryfairlock(self.name), (f1, 3))    # the holder's one try
        st = a.status(self.name)
        self.assertEqual((st.state, st.holds, st.fence), ("MINE", 3, f1))
        self.assertEqual(b.status(self.name).state, "TAKEN")
        with self.assertRaises(dlock.NotHeld):
            b.unlock(self.name)
        self.assertEqual([a.unlock(self.name) for _ in range(3)], [2, 1, 0])
        with self.assertRaises(dlock.NotHeld):
            a.unlock(self.name)
        self.assertEqual(b.status(self.name).state, "FREE")
        f2, holds = b.tryfairlock(self.name, wait_ms=int(EVENT_TIMEOUT * 1000))
        self.assertGreater(f2, f1)
        self.assertEqual(holds, 1)
        # With a lease: renewed to what is asked, lost when it runs out.
        leased, lost = self.name + "-lease", self.name + "-lost"
        a.fairlock(leased, lease_ms=10000)
        self.assertEqual(a.renew(leased, 5000), 5000)
        a.tryfairlock(lost, lease_ms=200)
        wait_readable(self, a.fileno())
        with self.assertRaises(dlock.LockLost) as cm:
            a.check()
        self.assertEqual((cm.exception.name, cm.exception.reason), (lost, "expired"))
        with self.assertRaises(dlock.NotHeld):
            a.unlock(lost)

    def test_fair_trylock_times_out_and_leaves(self):
        a, b, c, watcher = self.client(), self.client(), self.client(), self.client()
        waiters0 = watcher.info()["waiters"]
        fence, _ = a.fairlock(self.name)
        with self.assertRaises(dlock.Timeout) as cm:
            b.tryfairlock(self.name)
        self.assertGreater(cm.exception.ttl_ms, 0)
        t0 = time.monotonic()
        with self.assertRaises(dlock.Timeout):
            b.tryfairlock(self.name, wait_ms=100)
        self.assertGreaterEqual(time.monotonic() - t0, 0.08)
        self.await_waiters_at_most(watcher, waiters0)
        self.assertEqual(a.unlock(self.name), 0)
        # b left no place behind: one try, refused while anyone queues, gets it.
        f2, holds = c.tryfairlock(self.name)
        self.assertGreater(f2, fence)
        self.assertEqual(holds, 1)

    def test_fair_waiters_in_order(self):
        a, watcher = self.client(), self.client()
        waiters0 = watcher.info()["waiters"]
        fence, _ = a.fairlock(self.name)
        order, errors = [], []

        def wait_turn(i, c):
            try:
                f, _ = c.fairlock(self.name)
                order.append((i, f))        # while it holds the lock
                c.unlock(self.name)
            except BaseException as e:      # report it to the main thread
                errors.append(e)

        threads = []
        for i in range(3):
            t = threading.Thread(target=wait_turn, args=(i, self.client()), daemon=True)
            t.start()
            threads.append(t)
            self.await_waiters(watcher, waiters0 + i + 1)   # queued before the next
        self.assertEqual(order, [])
        self.assertEqual(a.unlock(self.name), 0)
        for t in threads:
            t.join(EVENT_TIMEOUT)
            self.assertFalse(t.is_alive(), "a waiter was never granted")
        self.assertEqual(errors, [])
        self.assertEqual([i for i, _ in order], [0, 1, 2])
        fences = [fence] + [f for _, f in order]
        self.assertEqual(fences, sorted(set(fences)))       # rising

    def spawn_fair_waiter(self, name):
        """A process of its own waiting for the fair lock name; it prints
        "granted" if it ever gets it."""
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import dlock; "
                "dlock.Client(sys.argv[2]).fairlock(sys.argv[3]); print('granted')")
        p = subprocess.Popen([sys.executable, "-c", code, os.path.join(ROOT, "clients", "python"),
                              self.sock, name], stdout=subprocess.PIPE)

        def cleanup():
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdout.close()
        self.addCleanup(cleanup)
        return p

    def test_fair_closed_waiter_lets_next_go(self):
        a, b, c, watcher = self.client(), self.client(), self.client(), self.client()
        waiters0 = watcher.info()["waiters"]
        a.fairlock(self.name)
        head = self.spawn_fair_waiter(self.name)
        self.await_waiters(watcher, waiters0 + 1)
        result = {}
        done = threading.Event()

        def run():
            try:
                result["grant"] = b.fairlock(self.name)
            except BaseException as e:  # report it to the main thread
                result["error"] = e
            done.set()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self.await_waiters(watcher, waiters0 + 2)
        # The head's process dies while it waits: the one behind it is next.
        head.kill()
        head.wait(EVENT_TIMEOUT)
        self.assertEqual(head.stdout.read(), b"")
        self.await_waiters_at_most(watcher, waiters0 + 1)
        self.assertFalse(done.is_set(), "granted while the holder held: %r" % result)
        self.assertEqual(a.unlock(self.name), 0)
        self.assertTrue(done.wait(EVENT_TIMEOUT), "the waiter behind was not granted")
        t.join(EVENT_TIMEOUT)
        self.assertEqual(result["grant"][1], 1)
        self.assertEqual(b.unlock(self.name), 0)
        # The only waiter dies: once the holder lets go, nobody queues, and
        # one try (refused while anyone queues) gets it.
        a.fairlock(self.name)
        only = self.spawn_fair_waiter(self.name)
        self.await_waiters(watcher, waiters0 + 1)
        only.kill()
        only.wait(EVENT_TIMEOUT)
        self.await_waiters_at_most(watcher, waiters0)
        self.assertEqual(a.unlock(self.name), 0)
        self.assertEqual(c.tryfairlock(self.name)[1], 1)

    def test_fair_lock_context_manager(self):
        a, b = self.client(), self.client()
        fl = a.fair_lock(self.name)
        self.assertIn("fair", repr(fl))
        with fl as f1:
            self.assertGreater(f1, 0)
            self.assertTrue(fl.locked())
            with fl as f2:                                  # holds nest
                self.assertEqual(f2, f1)
                self.assertEqual(a.status(self.name).holds, 2)
            self.assertEqual(a.status(self.name).holds, 1)
            with self.assertRaises(dlock.Timeout):
                with b.fair_lock(self.name, wait_ms=50):
                    self.fail("got a fair lock while it was held")
            self.assertIs(b.fair_lock(self.name).acquire(timeout=0.05), False)
            self.assertIs(b.fair_lock(self.name).acquire(blocking=False), False)
        self.assertFalse(fl.locked())
        self.assertIsNone(fl.fence)
        self.assertEqual(a.status(self.name).state, "FREE")
        with self.assertRaises(dlock.NotHeld):
            fl.release()
        bl = b.fair_lock(self.name, wait_ms=int(EVENT_TIMEOUT * 1000))
        with bl as f3:
            self.assertGreater(f3, f1)
            self.assertEqual(b.status(self.name).state, "MINE")
        # A lease, lost inside the block.
        lost = b.fair_lock(self.name + "-lost", lease_ms=200)
        with self.assertRaises(dlock.LockLost) as cm:
            with lost:
                wait_readable(self, b.fileno())
        self.assertEqual(cm.exception.reason, "expired")
        self.assertFalse(lost.locked())
        # dlock.Lock(name, fair=True): its own connection, a fair lock.
        lk = self.lock_obj(fair=True)
        self.assertIn("fair", repr(lk))
        with lk as f4:
            self.assertGreater(f4, f3)
            with self.assertRaises(dlock.KindError):
                b.lock(self.name)                           # one kind on one dlockd
            self.assertIs(self.lock_obj(fair=True).acquire(timeout=0.05), False)
        self.assertEqual(a.status(self.name).state, "FREE")
        self.assertIs(lk.acquire(blocking=False), True)
        self.assertEqual(a.status(self.name).state, "TAKEN")
        lk.release()
        with self.assertRaises(ValueError):
            dlock.ClientLock(a, self.name, "unfair")

    def test_fair_kind_errors(self):
        a, b = self.client(), self.client()
        fair, plain = self.name, self.name + "-plain"
        a.fairlock(fair)
        for call in (lambda: b.lock(fair), lambda: b.trylock(fair), lambda: a.lock(fair),
                     lambda: b.rlock(fair), lambda: b.trywlock(fair),
                     lambda: b.acquire(fair, 1), lambda: b.seminit(fair, 1),
                     lambda: self.lock_obj(fair).acquire(timeout=0)):
            with self.assertRaises(dlock.KindError) as cm:
                call()
            self.assertEqual(cm.exception.code, "KIND")
        self.assertEqual(cm.exception.message,
                         "%s is held as a fair lock (FAIRLOCK, UNLOCK)" % fair)
        a.lock(plain)
        for call in (lambda: b.fairlock(plain), lambda: b.tryfairlock(plain),
                     lambda: a.fairlock(plain), lambda: b.fair_lock(plain).acquire(timeout=0),
                     lambda: self.lock_obj(plain, fair=True).acquire(blocking=False)):
            with self.assertRaises(dlock.KindError) as cm:
                call()
        self.assertEqual(cm.exception.message,
                         "%s is held as a plain lock (LOCK, UNLOCK)" % plain)
        with self.assertRaises(dlock.KindError):
            with b.fair_lock(plain):
                self.fail("granted a fair lock of a plain lock")
        # Nothing changed, and once free each name may be the other kind.
        self.assertEqual((a.status(fair).state, a.status(fair).holds), ("MINE", 1))
        self.assertEqual((a.status(plain).state, a.status(plain).holds), ("MINE", 1))
        self.assertEqual(a.unlock(fair), 0)
        self.assertEqual(a.unlock(plain), 0)
        b.trylock(fair, wait_ms=int(EVENT_TIMEOUT * 1000))
        b.tryfairlock(plain, wait_ms=int(EVENT_TIMEOUT * 1000))
        self.assertTrue(a.ping() and b.ping())

    def test_fair_bad_arguments_not_sent(self):
        c = self.client()
        before = c.info()["requests"]
        for call in (lambda: c.fairlock("a b"), lambda: c.fairlock(""),
                     lambda: c.fairlock(self.name, lease_ms=-1),
                     lambda: c.fairlock(self.name, lease_ms=dlock.NUM_MAX + 1),
                     lambda: c.fairlock(self.name, lease_ms="5"),
                     lambda: c.tryfairlock(self.name, wait_ms=-1),
                     lambda: c.tryfairlock(self.name, wait_ms=None),
                     lambda: c.tryfairlock(self.name, lease_ms=True),
                     lambda: c.fair_lock("a b"), lambda: c.fair_lock(self.name, lease_ms=-1),
                     lambda: c.fair_lock(self.name, wait_ms=-5),
                     lambda: dlock.Lock("a b", socket=self.sock, fair=True)):
            with self.assertRaises(dlock.BadRequest):
                call()
        self.assertEqual(c.info()["requests"], before + 1)   # only this INFO

    # -- admin and ownership --

    def test_force_unlock(self):
        owner, admin = self.client(), self.client()
        owner.lock(self.name)
        if os.geteuid() != 0:
            with self.assertRaises(dlock.Denied) as cm:
                admin.force_unlock(self.name)
            self.assertEqual(cm.exception.code, "DENIED")
            return
        self.assertIs(admin.force_unlock(self.name), True)
        wait_readable(self, owner.fileno())
        with self.assertRaises(dlock.LockLost) as cm:
            owner.check()
        self.assertEqual(cm.exception.reason, "forced")
        self.assertIs(admin.force_unlock(self.name), False)
        self.assertEqual(admin.status(self.name).state, "FREE")

    def test_close_releases_locks(self):
        a, b = self.client(), self.client()
        a.lock(self.name)
        a.lock(self.name)
        with self.assertRaises(dlock.Timeout):
            b.trylock(self.name)
        a.close()
        a.close()           # idempotent
        with self.assertRaises(dlock.ConnectionClosed):
            a.ping()
        fence, holds = b.trylock(self.name, wait_ms=int(EVENT_TIMEOUT * 1000))
        self.assertEqual(holds, 1)

    def test_lock_release_closes_connection(self):
        other = self.client()
        lk = self.lock_obj()
        lk.acquire()
        lk.release()
        self.assertEqual(other.status(self.name).state, "FREE")
        with self.assertRaises(dlock.NotHeld):
            lk.release()

    # -- errors --

    def test_bad_name_not_sent(self):
        c = self.client()
        before = c.info()["requests"]
        bad = ["", "a b", "x" * 256, "tab\there", "caf\u00e9", "nl\n", b"\x7f", 42]
        for name in bad:
            for call in (c.lock, c.trylock, c.unlock, c.renew, c.status, c.force_unlock,
                         c.rlock, c.wlock, c.tryrlock, c.trywlock, c.runlock, c.wunlock,
                         c.read_lock, c.write_lock):
                with self.assertRaises(dlock.DlockError):
                    call(name)
            with self.assertRaises(dlock.DlockError):
                dlock.Lock(name, socket=self.sock)
        with self.assertRaises(dlock.DlockError):
            c.lock(self.name, lease_ms=-1)
        with self.assertRaises(dlock.DlockError):
            c.trylock(self.name, wait_ms=2 ** 31)
        self.assertEqual(c.info()["requests"], before + 1)   # only this INFO
        self.assertTrue(c.ping())
        # The longest valid name works.
        long_name = ("n" * 255)
        self.assertEqual(c.lock(long_name)[1], 1)
        self.assertEqual(c.unlock(long_name), 0)

    def test_missing_socket(self):
        path = os.path.join(_env["tmp"], "missing.sock")
        with self.assertRaises(ConnectionError) as cm:
            dlock.Client(path)
        self.assertIsInstance(cm.exception, dlock.DlockError)
        self.assertIn(path, str(cm.exception))
        self.assertEqual(str(cm.exception), "cannot connect to dlockd at %s: No such file or "
                                            "directory (is dlockd running?)" % path)
        self.assertEqual((cm.exception.path, cm.exception.errno), (path, errno.ENOENT))
        with self.assertRaises(ConnectionError):
            dlock.Lock(self.name, socket=path).acquire()
        with self.assertRaises(ConnectionError):
            dlock.Lock(self.name, socket=path).acquire(timeout=0.1)

    def test_permission_denied_hint(self):
        # As root: a child that became nobody, to the test's dlockd (its
        # directory is root's, 0700). Else: a path in a directory we cannot
        # search. Either way connect() fails with EACCES.
        if os.geteuid() == 0:
            path = self.sock
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                msg = b"connected"
                try:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                    dlock.Client(path).close()
                except dlock.ConnectFailed as e:
                    msg = ("%d %s" % (e.errno, e)).encode()
                except BaseException as e:
                    msg = repr(e).encode()
                finally:
                    os.write(w, msg)
                    os._exit(0)
            os.close(w)
            with os.fdopen(r, "rb") as f:
                got = f.read().decode()
            os.waitpid(pid, 0)
        else:
            closed = os.path.join(_env["tmp"], "closed-%s" % self.name)
            os.mkdir(closed, 0)
            self.addCleanup(os.rmdir, closed)
            path = os.path.join(closed, "d.sock")
            with self.assertRaises(dlock.ConnectFailed) as cm:
                dlock.Client(path)
            got = "%d %s" % (cm.exception.errno, cm.exception)
        self.assertEqual(got, "%d cannot connect to dlockd at %s: Permission denied (add "
                              "yourself to the dlockd group, or check socket_mode)"
                         % (errno.EACCES, path))

    def test_error_codes(self):
        c = self.client()
        with self.assertRaises(dlock.BadRequest) as cm:
            c._call(["FROB"])
        self.assertEqual(cm.exception.code, "UNKNOWN")
        with self.assertRaises(dlock.BadRequest) as cm:
            c._call(["LOCK", "a", "b", "c"])
        self.assertEqual(cm.exception.code, "ARGS")
        self.assertTrue(c.ping())

    # -- cancel --

    def _blocked(self, fn, *args):
        """Run fn(*args) in a thread until dlockd counts it waiting: (thread,
        result dict, done event)."""
        watcher = self.client()
        waiters0 = watcher.info()["waiters"]
        result, done = {}, threading.Event()

        def run():
            try:
                result["value"] = fn(*args)
            except BaseException as e:  # report it to the main thread
                result["error"] = e
            done.set()

        t = threading.Thread(target=run, daemon=True)
        t.start()
        deadline = time.monotonic() + EVENT_TIMEOUT
        while watcher.info()["waiters"] <= waiters0 and not done.is_set():
            self.assertLess(time.monotonic(), deadline, "the waiter never showed up")
            time.sleep(0.01)    # poll interval, bounded by the deadline
        self.assertFalse(done.is_set(), "returned while it should wait: %r" % result)
        return t, result, done

    def test_cancel_withdraws_a_waiting_lock(self):
        holder, c = self.client(), self.client()
        holder.lock(self.name)
        t, result, done = self._blocked(c.lock, self.name)
        self.assertTrue(c.cancel())
        self.assertTrue(done.wait(EVENT_TIMEOUT), "cancelled lock did not return")
        t.join(EVENT_TIMEOUT)
        self.assertIsInstance(result.get("error"), dlock.Cancelled, result)
        self.assertEqual(result["error"].code, "CANCELLED")
        # Nothing held, nothing waiting: the holder lets go, and the name is
        # free for a third client; c is still usable.
        self.assertEqual(holder.unlock(self.name), 0)
        other = self.client()
        fence, _ = other.trylock(self.name, 2000)
        self.assertGreater(fence, 0)
        self.assertEqual(c.status(self.name).state, "TAKEN")
        self.assertTrue(c.ping())
        self.assertGreaterEqual(c.info()["cancelled"], 1)

    def test_cancel_withdraws_a_waiting_acquire_and_trylock(self):
        holder, c = self.client(), self.client()
        holder.seminit(self.name, 1)
        holder.acquire(self.name, 1)
        t, result, done = self._blocked(c.acquire, self.name, 1)
        self.assertTrue(c.cancel())
        self.assertTrue(done.wait(EVENT_TIMEOUT))
        self.assertIsInstance(result.get("error"), dlock.Cancelled, result)
        self.assertEqual(c.status(self.name).holds, 0)
        lock_name = self.name + "-l"
        holder.lock(lock_name)
        t, result, done = self._blocked(c.trylock, lock_name, 60000)
        self.assertTrue(c.cancel())
        self.assertTrue(done.wait(EVENT_TIMEOUT))
        self.assertIsInstance(result.get("error"), dlock.Cancelled, result)
        self.assertTrue(c.ping())

    def test_cancel_with_nothing_waiting_does_nothing(self):
        c = self.client()
        self.assertFalse(c.cancel())
        c.lock(self.name)
        self.assertFalse(c.cancel())
        self.assertEqual(c.unlock(self.name), 0)
        self.assertTrue(c.ping())

    def test_cancel_racing_a_grant_gives_it_back(self):
        # The grant comes first: CANCEL answers OK 0 and the client gives
        # the lock back. Simulated by cancelling while the request is being
        # sent (the "pending" state), when nothing else holds the name.
        c = self.client()
        real_sendall = c._sock.sendall
        sock = c._sock

        class Sock(object):
            def __getattr__(self, attr):
                return getattr(sock, attr)

            def sendall(self, data):
                if data.startswith(b"LOCK "):
                    self_client.cancel()
                return real_sendall(data)

        self_client = c
        c._sock = Sock()
        with self.assertRaises(dlock.Cancelled):
            c.lock(self.name)
        c._sock = sock
        # Whichever came first (dlockd withdrew the acquire, or granted it
        # and c gave it back), the name is free for another client soon.
        fence, _ = self.client().trylock(self.name, int(EVENT_TIMEOUT * 1000))
        self.assertGreater(fence, 0)
        self.assertTrue(c.ping())


class LatchTest(unittest.TestCase):
    """Count-down latches: Client.latch_set, count_down, latch_count,
    await_latch, tryawait."""

    setUp = DlockTest.setUp
    client = DlockTest.client
    _blocked = DlockTest._blocked

    def test_set_once_count_down_and_open(self):
        a, b = self.client(), self.client()
        self.assertEqual(a.latch_count(self.name), 0)
        self.assertIs(a.latch_set(self.name, 2), True)
        self.assertIs(b.latch_set(self.name, 5), False)     # set once
        self.assertEqual(b.latch_count(self.name), 2)
        with self.assertRaises(dlock.Timeout) as cm:
            b.tryawait(self.name)
        self.assertEqual(cm.exception.count, 2)
        t0 = time.monotonic()
        with self.assertRaises(dlock.Timeout) as cm:
            b.tryawait(self.name, wait_ms=150)
        self.assertGreaterEqual(time.monotonic() - t0, 0.14)
        self.assertEqual(cm.exception.count, 2)
        self.assertEqual(a.count_down(self.name), 1)
        with self.assertRaises(dlock.Timeout) as cm:
            b.tryawait(self.name, wait_ms=0)
        self.assertEqual(cm.exception.count, 1)
        self.assertEqual(a.count_down(self.name), 0)
        # Open: no latch, and it stays open.
        self.assertIsNone(b.tryawait(self.name))
        self.assertIsNone(b.await_latch(self.name))
        self.assertEqual(b.latch_count(self.name), 0)
        self.assertEqual(b.count_down(self.name), 0)
        self.assertEqual(b.latch_count(self.name), 0)
        self.assertIs(b.latch_set(self.name, 1), True)      # set anew
        self.assertEqual(a.count_down(self.name), 0)

    def test_waiters_released_by_the_last_count_down_only(self):
        setter, watcher = self.client(), self.client()
        waiters = [self.client() for _ in range(3)]
        setter.latch_set(self.name, 2)
        before = watcher.info()["waiters"]
        runs = [self._blocked(c.await_latch, self.name) for c in waiters]
        self.assertEqual(watcher.info()["waiters"], before + 3)
        self.assertEqual(setter.count_down(self.name), 1)
        # Nobody released: dlockd still counts the three waiting.
        self.assertEqual(watcher.info()["waiters"], before + 3)
        self.assertFalse(any(done.is_set() for _, _, done in runs))
        self.assertEqual(setter.count_down(self.name), 0)
        for t, result, done in runs:
            self.assertTrue(done.wait(EVENT_TIMEOUT), "an await was not released")
            t.join(EVENT_TIMEOUT)
            self.assertEqual(result, {"value": None})

    def test_tryawait_released_within_its_wait(self):
        setter, c = self.client(), self.client()
        setter.latch_set(self.name, 1)
        t, result, done = self._blocked(c.tryawait, self.name, int(EVENT_TIMEOUT * 1000))
        self.assertEqual(setter.count_down(self.name), 0)
        self.assertTrue(done.wait(EVENT_TIMEOUT))
        t.join(EVENT_TIMEOUT)
        self.assertEqual(result, {"value": None})

    def test_cancel_withdraws_an_await(self):
        setter, c, watcher = self.client(), self.client(), self.client()
        setter.latch_set(self.name, 1)
        before = watcher.info()["waiters"]
        t, result, done = self._blocked(c.await_latch, self.name)
        self.assertTrue(c.cancel())
        self.assertTrue(done.wait(EVENT_TIMEOUT), "the cancelled await did not return")
        t.join(EVENT_TIMEOUT)
        self.assertIsInstance(result.get("error"), dlock.Cancelled, result)
        self.assertEqual(watcher.info()["waiters"], before)
        self.assertEqual(c.latch_count(self.name), 1)   # the count stays
        self.assertEqual(setter.count_down(self.name), 0)
        self.assertIsNone(c.await_latch(self.name))

    def test_kind_errors(self):
        a, b = self.client(), self.client()
        lock_name = self.name + "-lock"
        a.latch_set(self.name, 1)
        with self.assertRaises(dlock.KindError):
            b.lock(self.name)
        a.lock(lock_name)
        with self.assertRaises(dlock.KindError):
            b.latch_set(lock_name, 1)
        with self.assertRaises(dlock.KindError):
            b.count_down(lock_name)
        with self.assertRaises(dlock.KindError):
            b.await_latch(lock_name)
        with self.assertRaises(dlock.KindError):
            b.tryawait(lock_name)
        self.assertTrue(b.ping())
        self.assertEqual(a.count_down(self.name), 0)
        self.assertEqual(b.lock(self.name)[1], 1)   # the latch gone, a lock may have it

    def test_bad_arguments_not_sent(self):
        c = self.client()
        for count in (0, -1, dlock.NUM_MAX + 1, 1.5, True, "2"):
            with self.assertRaises(dlock.BadRequest) as cm:
                c.latch_set(self.name, count)
            self.assertIsNone(cm.exception.code)
        for call in (lambda n: c.latch_set(n, 1), c.count_down, c.latch_count,
                     c.await_latch, c.tryawait):
            with self.assertRaises(dlock.BadRequest) as cm:
                call("bad name")
            self.assertIn("bad lock name", str(cm.exception))
        with self.assertRaises(dlock.BadRequest):
            c.tryawait(self.name, wait_ms=-1)
        self.assertTrue(c.ping())
        self.assertEqual(c.latch_count(self.name), 0)

    def test_timeout_pickles_with_its_count(self):
        import pickle
        e = pickle.loads(pickle.dumps(dlock.Timeout(-1, "m", 3)))
        self.assertEqual((e.ttl_ms, e.message, e.count), (-1, "m", 3))


class MultiLockTest(unittest.TestCase):
    """Several names at once: Client.mlock, trymlock, munlock, MultiLock."""

    setUp = DlockTest.setUp
    client = DlockTest.client
    _blocked = DlockTest._blocked

    def names(self, n):
        return ["%s-%d" % (self.name, i) for i in range(n)]

    def test_all_or_nothing_then_granted(self):
        a, b, o = self.client(), self.client(), self.client()
        x, y, z = self.names(3)
        fy, _ = a.lock(y)
        t, result, done = self._blocked(b.mlock, [x, y, z])
        # B waits holding nothing of the set.
        self.assertEqual(o.status(x).state, "FREE")
        self.assertEqual(o.status(z).state, "FREE")
        self.assertEqual(a.unlock(y), 0)
        self.assertTrue(done.wait(EVENT_TIMEOUT), "mlock not granted after the unlock")
        t.join(EVENT_TIMEOUT)
        m = result.get("value")
        self.assertIsInstance(m, dlock.MultiLock, result)
        self.assertEqual(m.names, [x, y, z])
        self.assertEqual(len(m.fences), 3)
        self.assertGreater(m.fences[1], fy)
        self.assertTrue(m.held)
        for name in (x, y, z):
            self.assertEqual(o.status(name).state, "TAKEN")
        self.assertEqual(m.unlock(), [0, 0, 0])
        self.assertFalse(m.held)
        self.assertRaises(dlock.NotHeld, m.unlock)
        for name in (x, y, z):
            self.assertEqual(o.status(name).state, "FREE")

    def test_with_block_releases_and_reentry(self):
        c = self.client()
        x, y = self.names(2)
        fx, _ = c.lock(x)
        with c.mlock([x, y], 5000) as m:
            self.assertEqual(m.fences[0], fx)      # a reentry: the hold's fence
            self.assertEqual(c.status(x).holds, 2)
            self.assertEqual(c.status(y).state, "MINE")
        self.assertEqual(c.status(x).holds, 1)
        self.assertEqual(c.status(y).state, "FREE")
        self.assertEqual(c.munlock([x]), [0])

    def test_opposite_orders_do_not_deadlock(self):
        a, b = self.client(), self.client()
        x, y = self.names(2)
        fences, errors = [], []

        def run(c, names):
            try:
                for _ in range(200):
                    with c.mlock(names) as m:
                        fences.append(dict(zip(names, m.fences)))
            except BaseException as e:     # report it to the main thread
                errors.append(e)
        ts = [threading.Thread(target=run, args=(a, [x, y]), daemon=True),
              threading.Thread(target=run, args=(b, [y, x]), daemon=True)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
            self.assertFalse(t.is_alive(), "deadlocked")
        self.assertEqual(errors, [])
        self.assertEqual(len(fences), 400)
        self.assertEqual(len({f[x] for f in fences}), 400)     # one grant each

    def test_trymlock_times_out_holding_nothing(self):
        a, c = self.client(), self.client()
        x, y = self.names(2)
        a.lock(y, 60000)
        with self.assertRaises(dlock.Timeout) as cm:
            c.trymlock([x, y], 100)
        self.assertGreater(cm.exception.ttl_ms, 0)
        self.assertRaises(dlock.Timeout, c.trymlock, [y, x])
        self.assertEqual(c.status(x).state, "FREE")
        a.unlock(y)
        m = c.trymlock([x, y], 0, 10000)
        self.assertEqual(m.unlock(), [0, 0])

    def test_cancel_holds_nothing(self):
        a, c = self.client(), self.client()
        x, y = self.names(2)
        a.lock(y)
        t, result, done = self._blocked(c.mlock, [x, y])
        self.assertTrue(c.cancel())
        self.assertTrue(done.wait(EVENT_TIMEOUT))
        self.assertIsInstance(result.get("error"), dlock.Cancelled, result)
        self.assertEqual(c.status(x).state, "FREE")
        self.assertEqual(a.unlock(y), 0)
        m = self.client().trymlock([x, y], int(EVENT_TIMEOUT * 1000))
        self.assertEqual(len(m.fences), 2)

    def test_loss_of_one_name(self):
        c, admin = self.client(), self.client()
        x, y = self.names(2)
        m = c.mlock([x, y])
        self.assertEqual(admin.force_unlock(y), 1)
        deadline = time.monotonic() + EVENT_TIMEOUT
        while m.held:
            self.assertLess(time.monotonic(), deadline, "no loss seen")
            c.wait_event(0.1)
        with self.assertRaises(dlock.LockLost) as cm:
            m.check()
        self.assertEqual((cm.exception.name, cm.exception.reason), (y, "forced"))
        self.assertEqual(c.status(x).state, "MINE")   # the other stays held
        self.assertEqual(m.unlock(), [0, 0])
        self.assertEqual(c.status(x).state, "FREE")

    def test_closed_client_frees_the_set(self):
        c, o = self.client(), self.client()
        names = self.names(3)
        c.mlock(names)
        c.close()
        m = o.trymlock(names, int(EVENT_TIMEOUT * 1000))
        self.assertEqual(m.unlock(), [0, 0, 0])

    def test_bad_input_not_sent(self):
        c = self.client()
        x, y = self.names(2)
        for names in ([], self.names(65), [x, y, x]):
            with self.assertRaises(dlock.BadRequest) as cm:
                c.mlock(names)
            self.assertIsNone(cm.exception.code)
        with self.assertRaises(dlock.BadRequest):
            c.mlock([x, "n" * 300])
        with self.assertRaises(dlock.BadRequest):
            c.trymlock([x, y], -1)
        with self.assertRaises(dlock.BadRequest):
            c.mlock([x, y], dlock.NUM_MAX + 1)
        self.assertTrue(c.ping())
        m = c.mlock(self.names(64))
        self.assertEqual(m.unlock(), [0] * 64)

    def test_kind_error_changes_nothing(self):
        c, o = self.client(), self.client()
        x, y = self.names(2)
        o.rlock(y)
        with self.assertRaises(dlock.KindError):
            c.mlock([x, y])
        self.assertEqual(c.status(x).state, "FREE")
        with self.assertRaises(dlock.NotHeld):
            c.munlock([x])


class ElectTest(unittest.TestCase):
    """Leader election: Client.elect, resign, leader, observe."""

    setUp = DlockTest.setUp
    client = DlockTest.client

    def until(self, c, pred, timeout=EVENT_TIMEOUT):
        """Handle c's events until pred() holds (a hang guard, not a pause)."""
        deadline = time.monotonic() + timeout
        while not pred():
            left = deadline - time.monotonic()
            self.assertGreater(left, 0, "no such event within %ss" % timeout)
            c.wait_event(left)

    def waiters(self, n):
        """Until dlockd counts n waiting requests."""
        c = self.client()
        deadline = time.monotonic() + EVENT_TIMEOUT
        while c.info().get("waiters", 0) < n:
            self.assertLess(time.monotonic(), deadline, "fewer than %d waiters" % n)
            time.sleep(0.005)   # poll interval, bounded by the deadline

    def test_elect_resign_hands_over(self):
        a, b, o = self.client(), self.client(), self.client()
        la = a.elect(self.name, "node-a:1")
        self.assertGreater(la.fence, 0)
        self.assertTrue(la.leading)
        self.assertEqual(o.leader(self.name), (la.fence, "node-a:1"))
        got = []
        t = threading.Thread(target=lambda: got.append(b.elect(self.name, "node-b:2")))
        t.start()
        self.waiters(1)
        self.assertEqual(got, [])
        self.assertTrue(la.resign())
        t.join(EVENT_TIMEOUT)
        self.assertFalse(t.is_alive())
        lb = got[0]
        self.assertGreater(lb.fence, la.fence)
        self.assertFalse(la.leading)
        self.assertEqual(o.leader(self.name), (lb.fence, "node-b:2"))
        self.assertFalse(a.resign(self.name))
        self.assertTrue(lb.resign())
        self.assertIsNone(o.leader(self.name))

    def test_elect_again_same_fence(self):
        c = self.client()
        f = c.elect(self.name, "v").fence
        self.assertEqual(c.elect(self.name, "v").fence, f)
        self.assertTrue(c.resign(self.name))

    def test_with_block_resigns(self):
        c, o = self.client(), self.client()
        with c.elect(self.name, "10.0.0.5:8080") as leader:
            self.assertEqual(o.leader(self.name), (leader.fence, "10.0.0.5:8080"))
        self.assertIsNone(o.leader(self.name))
        self.assertFalse(leader.leading)

    def test_lease_lost_raises_on_check_and_exit(self):
        c = self.client()
        with self.assertRaises(dlock.LockLost) as cm:
            with c.elect(self.name, "v", lease_ms=200) as leader:
                wait_readable(self, c.fileno())
                self.until(c, lambda: not leader.leading)
        self.assertEqual((cm.exception.name, cm.exception.reason), (self.name, "expired"))
        self.assertIsNone(self.client().leader(self.name))

    def test_closed_leader_replaced(self):
        a, b = self.client(), self.client()
        la = a.elect(self.name, "a")
        got = []
        t = threading.Thread(target=lambda: got.append(b.elect(self.name, "b")))
        t.start()
        self.waiters(1)
        a.close()
        t.join(EVENT_TIMEOUT)
        self.assertFalse(t.is_alive())
        self.assertGreater(got[0].fence, la.fence)
        self.assertFalse(la.leading)
        with self.assertRaises(dlock.LockLost) as cm:
            la.check()
        self.assertEqual(cm.exception.reason, "closed")

    def test_cancel_leaves_no_candidate(self):
        a, b, o = self.client(), self.client(), self.client()
        la = a.elect(self.name, "a")
        errs = []

        def campaign():
            try:
                b.elect(self.name, "b")
            except dlock.DlockError as e:
                errs.append(e)
        t = threading.Thread(target=campaign)
        t.start()
        self.waiters(1)
        self.assertTrue(b.cancel())
        t.join(EVENT_TIMEOUT)
        self.assertFalse(t.is_alive())
        self.assertIsInstance(errs[0], dlock.Cancelled)
        self.assertTrue(la.resign())
        self.assertIsNone(o.leader(self.name))
        self.assertTrue(b.ping())

    def test_observe_iterates_changes(self):
        a, o = self.client(), self.client()
        it = iter(o.observe(self.name))
        self.assertIsNone(next(it))
        f1 = a.elect(self.name, "v1").fence
        self.assertEqual(next(it), (f1, "v1"))
        a.resign(self.name)
        self.assertIsNone(next(it))
        f2 = a.elect(self.name, "v2").fence
        self.assertEqual(next(it), (f2, "v2"))
        self.assertGreater(f2, f1)
        a.resign(self.name)

    def test_observe_callback_and_unobserve(self):
        a, o = self.client(), self.client()
        seen = []
        obs = o.observe(self.name, lambda name, leader: seen.append((name, leader)))
        self.assertIsNone(obs.leader)
        la = a.elect(self.name, "v")
        self.until(o, lambda: seen)
        self.assertEqual(seen, [(self.name, (la.fence, "v"))])
        self.assertEqual(obs.leader, (la.fence, "v"))
        self.assertTrue(o.unobserve(self.name))
        self.assertFalse(o.unobserve(self.name))
        la.resign()
        a.elect(self.name, "w")
        o.ping()
        o.check()
        self.assertEqual(len(seen), 1)
        self.assertEqual(list(obs), [])     # ended: the iterator stops

    def test_bad_input_not_sent(self):
        c = self.client()
        for value in ("v" * 256, "", "a b", "caf\u00e9", None):
            with self.assertRaises(dlock.BadRequest) as cm:
                c.elect(self.name, value)
            self.assertIsNone(cm.exception.code)
        with self.assertRaises(dlock.BadRequest):
            c.elect("n" * 256, "v")
        with self.assertRaises(dlock.BadRequest):
            c.elect(self.name, "v", lease_ms=dlock.NUM_MAX + 1)
        with self.assertRaises(dlock.BadRequest):
            c.observe("a b")
        self.assertTrue(c.ping())
        self.assertEqual(c.elect(self.name, "v" * 255).value, "v" * 255)
        self.assertEqual(c.leader(self.name)[1], "v" * 255)
        c.resign(self.name)

    def test_kind_errors(self):
        c = self.client()
        c.lock(self.name)
        with self.assertRaises(dlock.KindError):
            self.client().elect(self.name, "v")
        c.unlock(self.name)
        other = self.name + "-e"
        c.elect(other, "v")
        with self.assertRaises(dlock.KindError):
            c.unlock(other)
        c.resign(other)


if __name__ == "__main__":
    unittest.main()
