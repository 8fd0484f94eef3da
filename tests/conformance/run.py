#!/usr/bin/env python3
"""The client conformance suite: every scenario against every client's adapter.

Run: python3 tests/conformance/run.py [scenario ...]
  DLOCKD_BIN           the daemon (default build/dlockd)
  CONFORMANCE_CLIENTS  c,python,... (default: every client whose adapter exists)
  CONFORMANCE_ADAPTER_<CLIENT>  an adapter command line replacing the table's
                       (shell words; <CLIENT> upper-case, '-' as '_')
  CONFORMANCE_VERBOSE=1  a line per scenario
  CONFORMANCE_SEED     the seed of the scenarios' random choices (default: a
                       random one; the run prints it)

See tests/conformance/README.md for the adapter protocol. Standard library only.
"""
# SPDX-License-Identifier: MIT

import atexit
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("BUILD") or os.path.join(ROOT, "build")
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)

GUARD = 20.0            # seconds any wait for an answer, event or daemon may take
CONTEND_GUARD = 120.0   # contend_100 does 1000 grants
PROMPT_GUARD = 5.0      # an answer due at once, or right after its own release
CONF_LEASE_MS = 1500    # the daemons' watchdog lease
NUM_MAX = 2147483647
NAME_MAX = 255          # bytes in a lock name
NAME_SHOWN_MIN = 40     # a bad name longer than this may be shown cut, after this many bytes


def _exe(path):
    return lambda: os.access(path, os.X_OK) or "%s not built" % os.path.relpath(path, ROOT)


def _file_and_tool(path, tool):
    def check():
        if not os.path.exists(path):
            return "%s missing" % os.path.relpath(path, ROOT)
        if shutil.which(tool) is None:
            return "%s not installed" % tool
        return True
    return check


# client: (adapter argv, check: True when available, else why not). The
# compiled adapters are built by `make conformance` (c) and by each
# language's `make clients-<lang>` (go, java).
ADAPTERS = {
    "c": ([os.path.join(BUILD, "conformance", "adapter-c")],
          _exe(os.path.join(BUILD, "conformance", "adapter-c"))),
    "python": (["python3", os.path.join(ROOT, "clients", "python", "conformance.py")],
               _file_and_tool(os.path.join(ROOT, "clients", "python", "conformance.py"),
                              "python3")),
    "python-asyncio": (["python3", os.path.join(ROOT, "clients", "python",
                                                "conformance_asyncio.py")],
                       _file_and_tool(os.path.join(ROOT, "clients", "python",
                                                   "conformance_asyncio.py"), "python3")),
    "shell": (["sh", os.path.join(ROOT, "clients", "shell", "conformance.sh")],
              _file_and_tool(os.path.join(ROOT, "clients", "shell", "conformance.sh"),
                             "socat")),
    "go": ([os.path.join(BUILD, "go", "bin", "dlock-conformance")],
           _exe(os.path.join(BUILD, "go", "bin", "dlock-conformance"))),
    "java": (["java", "-cp", os.path.join(BUILD, "dlock.jar") + ":" +
              os.path.join(BUILD, "dlock-tests.jar"), "io.github.dlockd.dlock.conformance.Adapter"],
             _file_and_tool(os.path.join(BUILD, "dlock-tests.jar"), "java")),
    "node": (["node", os.path.join(ROOT, "clients", "node", "conformance.js")],
             _file_and_tool(os.path.join(ROOT, "clients", "node", "conformance.js"), "node")),
}


# The clients that send every request tagged (issue 38): any number of
# their tasks wait at once on one connection. The blocking clients (c,
# python, shell) serve one call at a time per client and skip the
# scenarios marked for_clients(TAGGING).
TAGGING = ("go", "java", "node", "python-asyncio")


def for_clients(names, why):
    """Mark a scenario as run only by these clients; the others skip it
    (counted as skipped, with why)."""
    def mark(fn):
        fn.clients = frozenset(names)
        fn.skip_why = why
        return fn
    return mark


class Fail(Exception):
    """A scenario's check failed."""


# ---- processes -------------------------------------------------------------

def _pdeathsig():
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class World(object):
    """One redis-server and the shared dlockd in a temporary directory, and
    what the scenarios start besides (private daemons)."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="dlock-conf-")
        self.procs = []
        self.dlockd_bin = os.environ.get("DLOCKD_BIN") or os.path.join(BUILD, "dlockd")
        self.rsock = os.path.join(self.tmp, "redis.sock")
        self.serial = 0
        seed = os.environ.get("CONFORMANCE_SEED", "").strip()
        self.seed = int(seed) if seed else random.SystemRandom().randrange(1, 10 ** 9)
        atexit.register(self.stop)

    def spawn(self, argv, logname):
        log = open(os.path.join(self.tmp, logname), "ab")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=self.tmp,
                                 preexec_fn=_pdeathsig)
        finally:
            log.close()
        p.logname = logname
        self.procs.append(p)
        return p

    def log(self, p, lines=20):
        try:
            with open(os.path.join(self.tmp, p.logname), "rb") as f:
                text = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def start(self):
        redis = shutil.which("redis-server")
        if redis is None:
            raise RuntimeError("redis-server not found in PATH")
        if not os.access(self.dlockd_bin, os.X_OK):
            raise RuntimeError("dlockd %s not built (make build/dlockd, or set DLOCKD_BIN)"
                               % self.dlockd_bin)
        self.redis = self.spawn([redis, "--port", "0", "--unixsocket", self.rsock,
                                 "--save", "", "--appendonly", "no", "--dir", self.tmp],
                                "redis.log")
        self.sock, self.dlockd = self.start_dlockd()

    def start_dlockd(self):
        """A dlockd of its own on a fresh socket: (socket, process), ready."""
        self.serial += 1
        sock = os.path.join(self.tmp, "d%d.sock" % self.serial)
        conf = os.path.join(self.tmp, "d%d.conf" % self.serial)
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\nadmin_uids = 0\n[redis]\nurl = unix://%s\n"
                    "[lock]\nlease_ms = %d\n" % (sock, self.rsock, CONF_LEASE_MS))
        os.chmod(conf, 0o600)   # dlockd refuses, as root, a file others can write
        p = self.spawn([self.dlockd_bin, "-c", conf], "dlockd%d.log" % self.serial)
        deadline = time.monotonic() + GUARD
        last = None
        while time.monotonic() < deadline:
            for q in (self.redis, p):
                if q.poll() is not None:
                    raise RuntimeError("%s exited with %s\n%s" % (q.logname, q.returncode,
                                                                   self.log(q)))
            try:
                with Raw(sock, 1.0) as r:
                    info = r.info()
                    if info.get("redis") == "up":
                        return sock, p
                    last = "redis=%s" % info.get("redis")
            except (OSError, Fail) as e:
                last = e
            time.sleep(0.02)    # poll interval while it starts
        raise RuntimeError("dlockd not ready within %ss (%s)\n%s" % (GUARD, last, self.log(p)))

    def stop(self):
        procs, self.procs = self.procs, []
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


# ---- the runner's own connection --------------------------------------------

class Raw(object):
    """The runner's own connection to a dlockd: raw protocol lines."""

    def __init__(self, path, timeout=GUARD):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        self.s.close()

    def req(self, line):
        """Send one request; its reply line (events skipped)."""
        self.s.sendall(line.encode() + b"\n")
        return self._line(line)

    def _line(self, line):
        """The next line that is not an event; line names the request."""
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                out, self.buf = self.buf[:i].decode(), self.buf[i + 1:]
                if not out.startswith("!"):
                    return out
                continue
            try:
                d = self.s.recv(4096)
            except socket.timeout:
                raise Fail("dlockd did not answer %r within %ss" % (line, GUARD))
            if not d:
                raise Fail("dlockd closed the runner's connection at %r" % line)
            self.buf += d

    def expect(self, line, prefix):
        reply = self.req(line)
        if not reply.startswith(prefix):
            raise Fail("runner: %s answered %r, expected %s..." % (line, reply, prefix))
        return reply

    def info(self):
        return dict(w.split("=", 1) for w in self.req("INFO").split()[1:] if "=" in w)

    def list(self, pattern):
        """LIST pattern 1000: {name: entry}, each entry a dict of kind,
        fence, holders and waiters (their totals) and holds (the counts
        of the holders told)."""
        req = "LIST %s 1000" % pattern
        head = self.req(req).split(" ")
        if head[:2] != ["OK", "LIST"] or len(head) != 4:
            raise Fail("runner: %s answered %r" % (req, " ".join(head)))
        out = {}
        for _ in range(int(head[2])):
            w = self._line(req).split(" ")
            if len(w) != 8 or w[0] != "=":
                raise Fail("runner: %s told the entry %r" % (req, " ".join(w)))
            holders, waiters = w[5].split(","), w[6].split(",")
            out[w[1]] = {"kind": w[2], "fence": w[4], "holders": int(holders[0]),
                         "waiters": int(waiters[0]),
                         "holds": [h.split("/")[4] for h in holders[1:]]}
        return out


def wait_no_waiters(sock):
    """Until dlockd at sock has no request waiting (INFO waiters): a client
    whose wait was cancelled by ending its connection (shell) is gone."""
    deadline = time.monotonic() + GUARD
    with Raw(sock) as r:
        while time.monotonic() < deadline:
            if int(r.info().get("waiters", 0)) == 0:
                return
            time.sleep(0.005)   # poll interval, bounded by the guard
    raise Fail("dlockd still had waiters %ss after the cancel" % GUARD)


def wait_waiters(sock, n):
    """Until dlockd at sock has at least n requests waiting (INFO waiters)."""
    deadline = time.monotonic() + GUARD
    with Raw(sock) as r:
        while time.monotonic() < deadline:
            if int(r.info().get("waiters", 0)) >= n:
                return
            time.sleep(0.005)   # poll interval, bounded by the guard
    raise Fail("dlockd had fewer than %d waiters within %ss" % (n, GUARD))


# ---- the adapter -------------------------------------------------------------

class Adapter(object):
    """One adapter process: commands out, answers and events in."""

    def __init__(self, argv, logpath):
        self.log = open(logpath, "wb")
        self.logpath = logpath
        # A process group of its own: kill() ends what it started too (the
        # shell adapter's client jobs, which would hold their connections).
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, cwd=ROOT, preexec_fn=_pdeathsig,
                                  start_new_session=True)
        self.cv = threading.Condition()
        self.answers = {}       # rid -> words after the rid
        self.answer_at = {}     # rid -> how many events had come before its answer
        self.answer_time = {}   # rid -> time.monotonic() when its answer was read
        self.events = []        # words after "*"
        self.junk = []          # lines that fit nothing
        self.eof = False
        self.next_rid = 0
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self._wait(lambda: ["ready"] in self.events, GUARD, "* ready")

    def _read(self):
        for raw in self.p.stdout:
            words = raw.decode("utf-8", "replace").rstrip("\n").split(" ")
            with self.cv:
                if words[0] == "*":
                    self.events.append(words[1:])
                elif len(words) >= 2 and words[0] not in self.answers:
                    self.answers[words[0]] = words[1:]
                    self.answer_at[words[0]] = len(self.events)
                    self.answer_time[words[0]] = time.monotonic()
                else:
                    self.junk.append(" ".join(words))
                self.cv.notify_all()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def _wait(self, pred, guard, what):
        deadline = time.monotonic() + guard
        with self.cv:
            while not pred():
                left = deadline - time.monotonic()
                if self.eof and not pred():
                    raise Fail("adapter exited (status %s) while waiting for %s%s"
                               % (self.p.poll(), what, self.stderr_tail()))
                if left <= 0:
                    raise Fail("no %s within %ss%s" % (what, guard, self.stderr_tail()))
                self.cv.wait(left)

    def stderr_tail(self, lines=6):
        self.log.flush()
        try:
            with open(self.logpath, "rb") as f:
                text = f.read().decode("utf-8", "replace").splitlines()[-lines:]
        except OSError:
            text = []
        junk = ["  stdout: " + j for j in self.junk[-3:]]
        tail = ["  stderr: " + t for t in text]
        return ("\n" + "\n".join(junk + tail)) if junk or tail else ""

    def send(self, *words):
        """Write a command; its rid."""
        self.next_rid += 1
        rid = "r%d" % self.next_rid
        line = " ".join([rid] + [str(w) for w in words])
        self.sent = getattr(self, "sent", {})
        self.sent[rid] = line
        try:
            self.p.stdin.write(line.encode() + b"\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError):
            raise Fail("adapter gone when sending %r%s" % (line, self.stderr_tail()))
        return rid

    def answer(self, rid, guard=GUARD):
        self._wait(lambda: rid in self.answers, guard, "answer to %r" % self.sent[rid])
        return self.answers[rid]

    def first_of(self, rids, guard=GUARD):
        """The rid among rids answered first (when several are, the first in rids)."""
        self._wait(lambda: any(r in self.answers for r in rids), guard,
                   "answer to any of %s" % [self.sent[r] for r in rids])
        return next(r for r in rids if r in self.answers)

    def answered(self, rid):
        with self.cv:
            return rid in self.answers

    def ok(self, rid, n=None, guard=GUARD):
        """The answer to rid must be ok [with n words]: its words after ok,
        as ints where they are numbers."""
        a = self.answer(rid, guard)
        if a[0] != "ok" or (n is not None and len(a) != n + 1):
            raise Fail("%r answered %r, expected ok%s" % (
                self.sent[rid], " ".join(a), "" if n is None else " and %d words" % n))
        return [int(w) if w.lstrip("-").isdigit() else w for w in a[1:]]

    def call(self, *words, n=None, guard=GUARD):
        return self.ok(self.send(*words), n, guard)

    def err(self, rid, kind, guard=GUARD):
        """The answer to rid must be err <kind>: its text."""
        a = self.answer(rid, guard)
        if a[:2] != ["err", kind]:
            raise Fail("%r answered %r, expected err %s" % (self.sent[rid], " ".join(a), kind))
        return " ".join(a[2:])

    def event(self, hid, reason, guard=GUARD):
        self._wait(lambda: ["lost", hid, reason] in self.events, guard,
                   "'* lost %s %s' (events: %s)" % (hid, reason, self.events))

    def leaders(self, oid, after=0):
        """The leaders observation oid reported (from event number after
        on): [fence, value] or ["NONE"] each, fences as ints."""
        with self.cv:
            evs = [e[2:] for e in self.events[after:] if e[:2] == ["leader", oid]]
        return [[int(e[0]), e[1]] if len(e) == 2 and e[0].isdigit() else e for e in evs]

    def leader_event(self, oid, want, guard=GUARD):
        """Until oid reported want ([fence, value] or ["NONE"]) as its
        latest leader."""
        self._wait(lambda: self.leaders(oid)[-1:] == [want], guard,
                   "'* leader %s %s' (its reports: %s)" % (
                       oid, " ".join(str(w) for w in want), self.leaders(oid)))

    def finish(self):
        """End stdin: the adapter must exit 0."""
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            rc = self.p.wait(GUARD)
        except subprocess.TimeoutExpired:
            raise Fail("adapter did not exit within %ss of its stdin's end" % GUARD)
        if rc != 0:
            raise Fail("adapter exited with status %s%s" % (rc, self.stderr_tail()))

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass    # the group is gone
        self.p.wait()
        try:
            self.p.stdin.close()
        except OSError:
            pass
        self.reader.join(5)
        self.log.close()


class T(object):
    """What a scenario gets: the adapter (a), the shared daemon's socket,
    fresh names, the runner's own connections, and the world."""

    def __init__(self, world, client, scenario, adapter):
        self.world = world
        self.client = client
        self.scenario = scenario
        # The scenario's random choices: the run's seed, the client and the
        # scenario give them, so that a failure repeats with the same seed.
        self.rng = random.Random("%s %s %s" % (world.seed, client, scenario))
        self.a = adapter
        self.sock = world.sock
        self.raws = []
        self.private = []
        self.free_checks = []       # (socket, name, kind) checked free at the end
        self.n = 0

    def name(self, kind="lock", check=True, sock=None):
        """A fresh lock name; checked free after the scenario unless check
        is False."""
        self.n += 1
        world = self.world
        world.serial += 1
        name = "conf-%s-%s-%d-%d" % (self.client, self.scenario, self.n, world.serial)
        if check:
            self.free_checks.append((sock or self.sock, name, kind))
        return name

    def raw(self, sock=None):
        r = Raw(sock or self.sock)
        self.raws.append(r)
        return r

    def dlockd(self):
        """A private dlockd for this scenario (killed at its end): socket, process."""
        sock, p = self.world.start_dlockd()
        self.private.append(p)
        return sock, p

    def check_free(self):
        """Nothing the scenario used is left held: the runner takes each name."""
        for sock, name, kind in self.free_checks:
            with Raw(sock) as r:
                if kind == "sem":
                    continue    # checked by the scenario (the permits it expects)
                if kind == "latch":
                    # Counted down to 0 (gone) and nobody left waiting for it.
                    reply = r.req("LATCHCOUNT %s" % name)
                    if reply != "OK 0":
                        raise Fail("LATCHCOUNT %s after the scenario answered %r, expected "
                                   "OK 0" % (name, reply))
                    continue
                if kind == "elect":
                    # No leader and no candidate left: the runner leads at once.
                    reply = r.req("ELECT %s conformance-check" % name)
                    if not reply.startswith("OK "):
                        raise Fail("ELECT %s by the runner after the scenario answered %r"
                                   % (name, reply))
                    r.expect("RESIGN %s" % name, "OK 1")
                    continue
                take, drop = {"lock": ("TRYLOCK", "UNLOCK"), "rw": ("TRYWLOCK", "WUNLOCK"),
                              "fair": ("TRYFAIRLOCK", "UNLOCK")}[kind]
                reply = r.req("%s %s %d" % (take, name, int(GUARD * 1000)))
                if not reply.startswith("OK "):
                    raise Fail("%s is still held after the scenario: %s answered %r"
                               % (name, take, reply))
                r.expect("%s %s" % (drop, name), "OK 0")

    def cleanup(self):
        for r in self.raws:
            r.close()
        for p in self.private:
            if p.poll() is None:
                p.kill()
                p.wait()


# ---- the scenarios ------------------------------------------------------------
# Each takes a T; t.a is the adapter. Fail (or any exception) fails it.

def grant_rising_fences(t):
    a, x = t.a, t.name()
    a.call("connect", "c", t.sock)
    f1, h = a.call("lock", "c", "h1", x, 0, n=2)
    if h != 1 or f1 <= 0:
        raise Fail("lock: fence %s holds %s, expected a fence > 0 and 1 hold" % (f1, h))
    a.call("unlock", "h1", n=1)
    f2, _ = a.call("lock", "c", "h2", x, 0, n=2)
    a.call("unlock", "h2", n=1)
    f3, _ = a.call("trylock", "c", "h3", x, 0, 0, n=2)
    a.call("unlock", "h3", n=1)
    if not f1 < f2 < f3:
        raise Fail("fences did not rise: %s %s %s" % (f1, f2, f3))


def trylock_timeout(t):
    a, x = t.a, t.name()
    t.raw().expect("LOCK %s" % x, "OK ")
    a.call("connect", "c", t.sock)
    t0 = time.monotonic()
    rid = a.send("trylock", "c", "h", x, 200, 0)
    if a.answer(rid) != ["timeout"]:
        raise Fail("trylock of a held name answered %r, expected timeout" % a.answer(rid))
    if time.monotonic() - t0 < 0.19:
        raise Fail("trylock with wait 200 timed out after %.0f ms" % ((time.monotonic() - t0) * 1000))
    t.raws[0].expect("UNLOCK %s" % x, "OK 0")


def reentry(t):
    a, x = t.a, t.name()
    a.call("connect", "c", t.sock)
    f, h = a.call("lock", "c", "h", x, 0, n=2)
    f2, h2 = a.call("reenter", "h", n=2)
    if (f2, h2) != (f, 2):
        raise Fail("reenter: fence %s holds %s, expected %s 2" % (f2, h2, f))
    st = a.call("status", "c", x)
    if st[:2] != ["MINE", 2] or st[-1] != f:
        raise Fail("status while holding twice: %r, expected MINE 2 <ttl> %s" % (st, f))
    if a.call("unlock", "h", n=1) != [1] or a.call("unlock", "h", n=1) != [0]:
        raise Fail("unlock did not count holds down 1, 0")
    if a.call("status", "c", x) != ["FREE"]:
        raise Fail("status after the last unlock is not FREE")


def lease_expiry_loss(t):
    a, x = t.a, t.name()
    a.call("connect", "c", t.sock)
    a.call("lock", "c", "h", x, 400, n=2)
    a.event("h", "expired")


def force_unlock_loss(t):
    a, x = t.a, t.name()
    a.call("connect", "c", t.sock)
    a.call("lock", "c", "h", x, 0, n=2)
    t.raw().expect("FORCEUNLOCK %s" % x, "OK 1")
    a.event("h", "forced")


def closed_client_frees(t):
    a, x = t.a, t.name()
    a.call("connect", "c", t.sock)
    a.call("lock", "c", "h", x, 0, n=2)
    r = t.raw()
    if not r.req("TRYLOCK %s" % x).startswith("TIMEOUT"):
        raise Fail("the runner got %s while the client held it" % x)
    a.call("close", "c")
    a.event("h", "closed")
    r.expect("TRYLOCK %s %d" % (x, GUARD * 1000), "OK ")
    r.expect("UNLOCK %s" % x, "OK 0")


def contend_100(t):
    a = t.a
    a.call("connect", "c", t.sock)
    prefix = t.name(check=False) + "-"
    got = a.call("contend", "c", 100, 5, 10, prefix, n=3, guard=CONTEND_GUARD)
    if got != [1000, 0, 0]:
        raise Fail("contend answered grants overlaps nonrising = %s, expected 1000 0 0" % got)
    for i in range(5):
        t.free_checks.append((t.sock, prefix + str(i), "lock"))


def cancel_wait(t):
    a, x = t.a, t.name()
    r = t.raw()
    r.expect("LOCK %s" % x, "OK ")
    a.call("connect", "c", t.sock)
    rid = a.send("lock", "c", "h", x, 0)
    wait_waiters(t.sock, 1)
    a.call("cancel", rid)
    a.err(rid, "cancelled")
    r.expect("UNLOCK %s" % x, "OK 0")
    # Free, and it stays so: had the wait lived on, dlockd would grant it now.
    r.expect("TRYLOCK %s %d" % (x, GUARD * 1000), "OK ")
    st = r.req("STATUS %s" % x)
    if not st.startswith("OK MINE 1 "):
        raise Fail("STATUS after the runner took it back: %r" % st)
    r.expect("UNLOCK %s" % x, "OK 0")


def dlockd_killed_during_wait(t):
    a = t.a
    sock, p = t.dlockd()
    x, y = t.name(check=False), t.name(check=False)
    t.raw(sock).expect("LOCK %s" % x, "OK ")
    a.call("connect", "c", sock)
    a.call("lock", "c", "hy", y, 0, n=2)
    rid = a.send("lock", "c", "hx", x, 0)
    wait_waiters(sock, 1)
    p.kill()
    p.wait()
    a.err(rid, "closed")
    a.event("hy", "closed")


def socket_missing(t):
    a = t.a
    path = os.path.join(t.world.tmp, "no-such-%s.sock" % t.client)
    text = a.err(a.send("connect", "c", path), "connect")
    if path not in text:
        raise Fail("the connect error %r does not name %s" % (text, path))


def rwlock_once(t):
    a, x = t.a, t.name("rw")
    for c in ("c1", "c2", "c3"):
        a.call("connect", c, t.sock)
    fr, hr = a.call("rlock", "c1", "r1", x, 0, n=2)
    a.call("rlock", "c2", "r2", x, 0, n=2)
    st = a.call("status", "c1", x)
    if st[:3] != ["READ", 2, 1]:
        raise Fail("status with two readers: %r, expected READ 2 1 <ttl>" % st)
    rid = a.send("wlock", "c3", "w", x, 0)
    wait_waiters(t.sock, 1)
    a.call("unlock", "r1", n=1)
    if a.answered(rid):
        raise Fail("the writer got %s while a reader held it" % x)
    a.call("unlock", "r2", n=1)
    fw, hw = a.ok(rid, 2)
    if fw <= fr or hw != 1:
        raise Fail("write grant fence %s holds %s: expected a fence > the read's %s, 1 hold"
                   % (fw, hw, fr))
    st = a.call("status", "c3", x)
    if st[:3] != ["WRITE", 1, 1]:
        raise Fail("status of the writer: %r, expected WRITE 1 1 <ttl>" % st)
    a.call("unlock", "w", n=1)


def semaphore_once(t):
    a, s = t.a, t.name("sem")
    a.call("connect", "c1", t.sock)
    a.call("connect", "c2", t.sock)
    if a.call("seminit", "c1", s, 3) != [1] or a.call("seminit", "c2", s, 5) != [0]:
        raise Fail("seminit did not answer 1, then 0")
    if a.call("acquire", "c1", "a1", s, 2, 0) != [2]:
        raise Fail("acquire 2 did not answer 2 held")
    rid = a.send("acquire", "c2", "a2", s, 2, 0)
    wait_waiters(t.sock, 1)
    st = a.call("status", "c1", s)
    if st != ["SEM", 1, 2]:
        raise Fail("status: %r, expected SEM 1 2" % st)
    a.call("release", "a1", 2, n=1)
    if a.ok(rid, 1) != [2]:
        raise Fail("the waiting acquire got %r, expected 2 held" % a.answer(rid))
    a.call("release", "a2", 2, n=1)
    with Raw(t.sock) as r:
        r.expect("TRYACQUIRE %s 3 %d" % (s, GUARD * 1000), "OK 3")


def fairlock_once(t):
    a, x = t.a, t.name("fair")
    for c in ("c1", "c2", "c3"):
        a.call("connect", c, t.sock)
    f1, _ = a.call("fairlock", "c1", "f1", x, 0, n=2)
    r2 = a.send("fairlock", "c2", "f2", x, 0)
    wait_waiters(t.sock, 1)
    r3 = a.send("fairlock", "c3", "f3", x, 0)
    wait_waiters(t.sock, 2)
    a.call("unlock", "f1", n=1)
    if a.first_of([r2, r3]) != r2:
        raise Fail("the second waiter was granted before the first")
    f2, _ = a.ok(r2, 2)
    a.call("unlock", "f2", n=1)
    f3, _ = a.ok(r3, 2)
    a.call("unlock", "f3", n=1)
    if not f1 < f2 < f3:
        raise Fail("fair fences did not rise: %s %s %s" % (f1, f2, f3))


def bad_input(t):
    a, x = t.a, t.name()
    a.call("connect", "c", t.sock)
    a.err(a.send("lock", "c", "h1", "n" * 300, 0), "name")
    a.err(a.send("trylock", "c", "h2", x, 0, NUM_MAX + 1), "args")
    a.err(a.send("acquire", "c", "h3", x + "-sem", 0, 0), "args")
    a.call("ping", "c")
    a.call("lock", "c", "h4", x, 0, n=2)
    a.call("unlock", "h4", n=1)



# ---- what every client agrees on (issue 42) ----

def sub_ms_lease(t):
    """A lease below 1 ms is rounded up to 1 ms, never down to 0 (no
    lease: the watchdog's, held while the connection lives): the lock is
    granted, runs out, and is FREE to another client."""
    a = t.a
    a.call("connect", "c", t.sock)
    leases = ["0.000001", "0.999999"]      # 1 ns, and 999 999 ns
    names = {}
    for i, lease in enumerate(leases):
        x = t.name()
        rid = a.send("lock", "c", "h%d" % i, x, lease)
        got = a.answer(rid)
        if got[0] != "ok":
            raise Fail("lock with a lease of %s ms answered %r, expected ok (the lease rounded "
                       "up to 1 ms)" % (lease, " ".join(got)))
        names["h%d" % i] = (x, lease)
    deadline = time.monotonic() + GUARD
    with Raw(t.sock) as r:
        for hid, (x, lease) in names.items():
            while True:
                st = r.req("STATUS %s" % x)
                if st == "OK FREE":
                    break
                w = st.split(" ")
                if w[:2] == ["OK", "TAKEN"] and len(w) == 3 and w[2].isdigit() and \
                        int(w[2]) > 1:
                    raise Fail("the lock taken with a lease of %s ms has %s ms left (STATUS: "
                               "%r): its lease is not 1 ms (0, no lease, is the watchdog's)"
                               % (lease, w[2], st))
                if time.monotonic() >= deadline:
                    raise Fail("the lock taken with a lease of %s ms was not FREE within %ss "
                               "(STATUS: %r)" % (lease, GUARD, st))
                time.sleep(0.01)    # poll interval, bounded by the guard
            a.event(hid, "expired")


def hex_name(name):
    """lock's <name> in the adapter protocol's hex form: % and the bytes' hex."""
    return "%" + name.encode("latin-1").hex()


_ESC = re.compile(r"""\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[0-7]{1,3}|[abtnvfr\\"'])""")
_ESC_SIMPLE = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, "\\": 92,
               '"': 34, "'": 39}


def _escaped(m):
    """The byte a backslash escape stands for."""
    e = m.group(1)
    if e[0] in "xu":
        return int(e[1:], 16)
    if e[0] in "01234567":
        return int(e, 8)
    return _ESC_SIMPLE[e]


def shows_name(text, name):
    """Whether an error's text shows name: in double or single quotes,
    each byte of 0x20-0x7E as itself (the quote and the backslash may be
    escaped), every other byte as a backslash escape of it (\\x01, \\n,
    \\u0001, \\001); a name longer than NAME_SHOWN_MIN bytes may be cut
    after at least that many, with "..." right after the cut, inside or
    outside the closing quote."""
    raw = name.encode("latin-1")
    for start, q in enumerate(text):
        if q not in "\"'":
            continue
        i, n = start + 1, 0
        while n < len(raw):
            b = raw[n]
            plain = 0x20 <= b <= 0x7E and chr(b) not in (q, "\\")
            if plain and text.startswith(chr(b), i):
                i += 1
            else:
                m = _ESC.match(text, i)
                if m is None or _escaped(m) != b:
                    break
                i = m.end()
            n += 1
        if n == len(raw) and text.startswith(q, i):
            return True
        if len(raw) > NAME_SHOWN_MIN and n >= NAME_SHOWN_MIN and \
                (text.startswith("...", i) or text.startswith(q + "...", i)):
            return True
    return False


def bad_name_shown(t):
    """A bad name's error (err name) shows the name, in every client the
    same way (shows_name): empty, one byte too long, with a space, with a
    control byte, with a newline. The client refuses it itself: the
    connection goes on."""
    a = t.a
    a.call("connect", "c", t.sock)
    base = t.name(check=False)
    cases = [("empty", ""),
             ("%d bytes" % (NAME_MAX + 1), (base + "-").ljust(NAME_MAX + 1, "x")),
             ("with a space", base + " x"),
             ("with a control byte", base + "\x01x"),
             ("with a newline", base + "\nx")]
    for i, (what, name) in enumerate(cases):
        word = hex_name(name) if what != cases[1][0] else name
        text = a.err(a.send("lock", "c", "h%d" % i, word, 0), "name")
        if not shows_name(text, name):
            raise Fail("the error for a bad name (%s) does not show it: %r; expected it "
                       "quoted, e.g. %s" % (what, text, json_quote(name)))
    a.call("ping", "c")
    x = t.name()
    a.call("lock", "c", "hx", x, 0, n=2)
    a.call("unlock", "hx", n=1)


def json_quote(name):
    """name as a JSON string, cut after NAME_SHOWN_MIN bytes: one form
    shows_name takes."""
    import json
    if len(name) > NAME_SHOWN_MIN:
        return json.dumps(name[:NAME_SHOWN_MIN]) + "..."
    return json.dumps(name)


# ---- leader election ----

def observed_in_order(a, oid, start=None):
    """oid's reports keep the observer's promises: fences never go down, a
    fence is told again only after a NONE, no NONE twice in a row. start is
    the observe answer's [fence, value] or ["NONE"]."""
    seen = ([start] if start is not None else []) + a.leaders(oid)
    last, prev = 0, None
    for e in seen:
        if e == ["NONE"]:
            if prev == ["NONE"]:
                raise Fail("%s was told NONE twice in a row: %s" % (oid, seen))
        elif len(e) != 2 or not isinstance(e[0], int):
            raise Fail("%s reported %r, not <fence> <value> or NONE" % (oid, e))
        elif e[0] < last or (e[0] == last and prev != ["NONE"]):
            raise Fail("%s was told fence %s after %s: %s" % (oid, e[0], last, seen))
        else:
            last = e[0]
        prev = e
    return seen


def no_lost(a, hid):
    with a.cv:
        bad = [e for e in a.events if e[:2] == ["lost", hid]]
    if bad:
        raise Fail("%s reported %s, and it had not lost its leadership" % (hid, bad))


def election_handover(t):
    a, x = t.a, t.name("elect")
    for c in ("ca", "cb", "co"):
        a.call("connect", c, t.sock)
    fa = a.call("elect", "ca", "ha", x, "node-a:1", 0, n=1)[0]
    start = a.call("observe", "co", "o", x, n=2)
    if start != [fa, "node-a:1"]:
        raise Fail("observe while A leads answered %s, expected %s node-a:1" % (start, fa))
    if a.call("leader", "cb", x, n=2) != [fa, "node-a:1"]:
        raise Fail("leader while A leads did not answer %s node-a:1" % fa)
    rid = a.send("elect", "cb", "hb", x, "node-b:2", 0)
    wait_waiters(t.sock, 1)
    if a.answered(rid):
        raise Fail("B's campaign was answered %r while A led" % a.answer(rid))
    if a.call("resign", "ha", n=1) != [1]:
        raise Fail("resign of the leader did not answer ok 1")
    fb = a.ok(rid, 1)[0]
    if fb <= fa:
        raise Fail("B leads with fence %s, not above A's %s" % (fb, fa))
    a.leader_event("o", [fb, "node-b:2"])
    if a.call("leader", "ca", x, n=2) != [fb, "node-b:2"]:
        raise Fail("leader after the hand-over did not answer %s node-b:2" % fb)
    if a.call("resign", "ha", n=1) != [0]:
        raise Fail("resign by A, no longer leading nor campaigning, did not answer ok 0")
    if a.call("resign", "hb", n=1) != [1]:
        raise Fail("resign of B did not answer ok 1")
    a.leader_event("o", ["NONE"])
    if a.call("leader", "co", x, n=1) != ["NONE"]:
        raise Fail("leader after both resigned did not answer NONE")
    observed_in_order(a, "o", start)
    no_lost(a, "ha")
    no_lost(a, "hb")


def election_leader_closed(t):
    a, x = t.a, t.name("elect")
    for c in ("ca", "cb", "co"):
        a.call("connect", c, t.sock)
    fa = a.call("elect", "ca", "ha", x, "a", 0, n=1)[0]
    start = a.call("observe", "co", "o", x, n=2)
    rid = a.send("elect", "cb", "hb", x, "b", 0)
    wait_waiters(t.sock, 1)
    a.call("close", "ca")
    a.event("ha", "closed")
    fb = a.ok(rid, 1)[0]
    if fb <= fa:
        raise Fail("B leads with fence %s, not above the closed A's %s" % (fb, fa))
    a.leader_event("o", [fb, "b"])
    observed_in_order(a, "o", start)
    if a.call("resign", "hb", n=1) != [1]:
        raise Fail("resign of B did not answer ok 1")
    a.leader_event("o", ["NONE"])
    no_lost(a, "hb")


def election_cancel(t):
    a, x = t.a, t.name("elect")
    for c in ("ca", "cb", "co"):
        a.call("connect", c, t.sock)
    fa = a.call("elect", "ca", "ha", x, "a", 0, n=1)[0]
    if a.call("observe", "co", "o", x, n=2) != [fa, "a"]:
        raise Fail("observe while A leads did not answer %s a" % fa)
    rid = a.send("elect", "cb", "hb", x, "b", 0)
    wait_waiters(t.sock, 1)
    a.call("cancel", rid)
    a.err(rid, "cancelled")
    wait_no_waiters(t.sock)
    if a.call("resign", "ha", n=1) != [1]:
        raise Fail("resign of the leader did not answer ok 1")
    # Had B's campaign lived on, B would lead now.
    a.leader_event("o", ["NONE"])
    if a.call("leader", "co", x, n=1) != ["NONE"]:
        raise Fail("leader after the cancel and the resign did not answer NONE")
    if any(e != ["NONE"] and e[1] == "b" for e in a.leaders("o")):
        raise Fail("the cancelled candidate was reported leading: %s" % a.leaders("o"))


def election_observe_none(t):
    a, x = t.a, t.name("elect")
    for c in ("ca", "co", "cp"):
        a.call("connect", c, t.sock)
    if a.call("observe", "co", "o", x, n=1) != ["NONE"]:
        raise Fail("observe of a name nobody leads did not answer NONE")
    if a.call("leader", "co", x, n=1) != ["NONE"]:
        raise Fail("leader of a name nobody leads did not answer NONE")
    f1 = a.call("elect", "ca", "h1", x, "v1", 0, n=1)[0]
    a.leader_event("o", [f1, "v1"])
    rid = a.send("unobserve", "o")
    a.ok(rid, 0)
    after = a.answer_at[rid]
    # A second observation on another client sees what o no longer may.
    if a.call("observe", "cp", "p", x, n=2) != [f1, "v1"]:
        raise Fail("observe while v1 leads did not answer %s v1" % f1)
    a.call("resign", "h1", n=1)
    a.leader_event("p", ["NONE"])
    f2 = a.call("elect", "ca", "h2", x, "v2", 0, n=1)[0]
    a.leader_event("p", [f2, "v2"])
    if f2 <= f1:
        raise Fail("the second leadership's fence %s is not above the first's %s" % (f2, f1))
    a.call("ping", "co")    # whatever dlockd sent co before this is read
    a.call("resign", "h2", n=1)
    a.leader_event("p", ["NONE"])
    a.call("ping", "co")
    if a.leaders("o", after):
        raise Fail("o reported %s after unobserve answered" % a.leaders("o", after))
    observed_in_order(a, "o", ["NONE"])
    observed_in_order(a, "p", [f1, "v1"])


def election_lease_expiry(t):
    a, x = t.a, t.name("elect")
    a.call("connect", "ca", t.sock)
    a.call("connect", "co", t.sock)
    fa = a.call("elect", "ca", "ha", x, "a", 400, n=1)[0]
    start = a.call("observe", "co", "o", x, n=2)
    if start != [fa, "a"] and start != ["NONE"]:
        raise Fail("observe of a leader with a 400 ms lease answered %s" % start)
    a.event("ha", "expired")
    if start != ["NONE"]:
        a.leader_event("o", ["NONE"])
    if a.call("leader", "co", x, n=1) != ["NONE"]:
        raise Fail("leader after the lease ran out did not answer NONE")
    observed_in_order(a, "o", start)
    if a.call("resign", "ha", n=1) != [0]:
        raise Fail("resign after the leadership expired did not answer ok 0")


def election_two_daemons(t):
    a = t.a
    sock2, _ = t.dlockd()
    x = t.name("elect")
    a.call("connect", "ca", t.sock)
    a.call("connect", "cb", sock2)
    a.call("connect", "co", sock2)
    fa = a.call("elect", "ca", "ha", x, "on-1", 0, n=1)[0]
    start = a.call("observe", "co", "o", x, n=2)
    if start != [fa, "on-1"]:
        raise Fail("observe on the second dlockd answered %s, expected %s on-1" % (start, fa))
    if a.call("leader", "cb", x, n=2) != [fa, "on-1"]:
        raise Fail("leader on the second dlockd did not answer %s on-1" % fa)
    rid = a.send("elect", "cb", "hb", x, "on-2", 0)
    wait_waiters(sock2, 1)
    a.call("resign", "ha", n=1)
    fb = a.ok(rid, 1)[0]
    if fb <= fa:
        raise Fail("B on the second dlockd leads with fence %s, not above %s" % (fb, fa))
    a.leader_event("o", [fb, "on-2"])
    a.call("resign", "hb", n=1)
    a.leader_event("o", ["NONE"])
    observed_in_order(a, "o", start)


def election_bad_input(t):
    a, x = t.a, t.name("elect")
    a.call("connect", "c", t.sock)
    a.err(a.send("elect", "c", "h1", x, "v" * 300, 0), "args")
    a.err(a.send("elect", "c", "h2", "n" * 300, "v", 0), "name")
    a.err(a.send("elect", "c", "h3", x, "v", NUM_MAX + 1), "args")
    a.err(a.send("leader", "c", "n" * 300), "name")
    a.err(a.send("observe", "c", "o", "n" * 300), "name")
    a.call("ping", "c")
    if a.call("leader", "c", x, n=1) != ["NONE"]:
        raise Fail("a refused campaign left a leader of %s" % x)
    f = a.call("elect", "c", "h4", x, "v" * 255, 0, n=1)[0]
    if a.call("leader", "c", x, n=2) != [f, "v" * 255]:
        raise Fail("leader did not tell the 255-byte value back")
    if a.call("resign", "h4", n=1) != [1]:
        raise Fail("resign did not answer ok 1")


# ---- multi-name locks ----

def mlock_all_or_nothing(t):
    a = t.a
    x, y, z = t.name(), t.name(), t.name()
    a.call("connect", "ca", t.sock)
    a.call("connect", "cb", t.sock)
    fy, _ = a.call("lock", "ca", "hy", y, 0, n=2)
    rid = a.send("mlock", "cb", "m", 0, x, y, z)
    wait_waiters(t.sock, 1)
    # B waits holding nothing: x and z are free, not taken by B.
    for name in (x, z):
        st = a.call("status", "ca", name)
        if st != ["FREE"]:
            raise Fail("status of %s while B's mlock waits: %r, expected FREE" % (name, st))
    if a.answered(rid):
        raise Fail("B's mlock was answered %r while A held %s" % (a.answer(rid), y))
    a.call("unlock", "hy", n=1)
    fences = a.ok(rid, 3)
    if any(not isinstance(f, int) or f <= 0 for f in fences) or fences[1] <= fy:
        raise Fail("mlock fences %s: expected three fences > 0, %s's above A's %s"
                   % (fences, y, fy))
    for name in (x, y, z):
        st = a.call("status", "ca", name)
        if st[:1] != ["TAKEN"]:
            raise Fail("status of %s while B holds the set: %r, expected TAKEN" % (name, st))
    if a.call("munlock", "m", n=3) != [0, 0, 0]:
        raise Fail("munlock of the set did not answer 0 0 0")
    no_lost(a, "m")


def mlock_reentry_and_unlock(t):
    a, x, y = t.a, t.name(), t.name()
    a.call("connect", "c", t.sock)
    fx, _ = a.call("lock", "c", "h", x, 0, n=2)
    fences = a.call("mlock", "c", "m", 0, x, y, n=2)
    if fences[0] != fx or fences[1] <= 0:
        raise Fail("mlock of %s (held) and %s: fences %s, expected %s (the hold's) and a "
                   "fence > 0" % (x, y, fences, fx))
    st = a.call("status", "c", x)
    if st[:2] != ["MINE", 2] or st[-1] != fx:
        raise Fail("status of %s after the reentry: %r, expected MINE 2 <ttl> %s" % (x, st, fx))
    st = a.call("status", "c", y)
    if st[:2] != ["MINE", 1] or st[-1] != fences[1]:
        raise Fail("status of %s: %r, expected MINE 1 <ttl> %s" % (y, st, fences[1]))
    if a.call("munlock", "m", n=2) != [1, 0]:
        raise Fail("munlock did not answer the holds left 1 0")
    if a.call("status", "c", y) != ["FREE"]:
        raise Fail("%s is not FREE after the munlock" % y)
    if a.call("unlock", "h", n=1) != [0]:
        raise Fail("unlock of %s after the munlock did not answer 0" % x)
    no_lost(a, "m")


def mlock_opposite_orders(t):
    a, x, y = t.a, t.name(), t.name()
    a.call("connect", "c1", t.sock)
    a.call("connect", "c2", t.sock)
    rounds = 30
    last = {x: 0, y: 0}
    for i in range(rounds):
        r1 = a.send("mlock", "c1", "m1_%d" % i, 0, x, y)
        r2 = a.send("mlock", "c2", "m2_%d" % i, 0, y, x)
        first = a.first_of([r1, r2])
        order = [(r1, "m1_%d" % i, (x, y)), (r2, "m2_%d" % i, (y, x))]
        if first == r2:
            order.reverse()
        for k, (rid, hid, names) in enumerate(order):
            got = dict(zip(names, a.ok(rid, 2)))
            for name in (x, y):
                if got[name] <= last[name]:
                    raise Fail("round %d: %s got fence %s after %s" % (i, name, got[name],
                                                                      last[name]))
                last[name] = got[name]
            if k == 0 and a.answered(order[1][0]):
                raise Fail("round %d: both clients held %s and %s at once" % (i, x, y))
            if a.call("munlock", hid, n=2) != [0, 0]:
                raise Fail("round %d: munlock did not answer 0 0" % i)


def mlock_closed_frees(t):
    a = t.a
    names = [t.name(), t.name(), t.name()]
    a.call("connect", "c", t.sock)
    a.call("mlock", "c", "m", 0, *names, n=3)
    r = t.raw()
    for name in names:
        if not r.req("TRYLOCK %s" % name).startswith("TIMEOUT"):
            raise Fail("the runner got %s while the client held the set" % name)
    a.call("close", "c")
    a.event("m", "closed")
    for name in names:
        r.expect("TRYLOCK %s %d" % (name, GUARD * 1000), "OK ")
        r.expect("UNLOCK %s" % name, "OK 0")


def mlock_lost_one(t):
    a = t.a
    x, y = t.name(), t.name()
    a.call("connect", "c", t.sock)
    a.call("mlock", "c", "m", 0, x, y, n=2)
    r = t.raw()
    r.expect("FORCEUNLOCK %s" % y, "OK 1")
    a.event("m", "forced")
    # The other name stays held: a loss of one name ends no other's exclusion.
    if not r.req("TRYLOCK %s" % x).startswith("TIMEOUT"):
        raise Fail("the runner got %s after the set lost %s" % (x, y))
    # Its unlock may tell of the loss (an err), but frees what is held.
    got = a.answer(a.send("munlock", "m"))
    if got[0] not in ("ok", "err"):
        raise Fail("munlock after the loss answered %r" % " ".join(got))
    r.expect("TRYLOCK %s %d" % (x, GUARD * 1000), "OK ")
    r.expect("UNLOCK %s" % x, "OK 0")
    r.expect("TRYLOCK %s" % y, "OK ")
    r.expect("UNLOCK %s" % y, "OK 0")


def mlock_cancel(t):
    a, x, y = t.a, t.name(), t.name()
    r = t.raw()
    r.expect("LOCK %s" % y, "OK ")
    a.call("connect", "c", t.sock)
    rid = a.send("mlock", "c", "m", 0, x, y)
    wait_waiters(t.sock, 1)
    a.call("cancel", rid)
    a.err(rid, "cancelled")
    wait_no_waiters(t.sock)
    st = r.req("STATUS %s" % x)
    if st != "OK FREE":
        raise Fail("STATUS %s after the cancelled mlock: %r, expected OK FREE" % (x, st))
    r.expect("UNLOCK %s" % y, "OK 0")
    # Free, and they stay so: had the wait lived on, dlockd would grant it now.
    for name in (x, y):
        r.expect("TRYLOCK %s %d" % (name, GUARD * 1000), "OK ")
        st = r.req("STATUS %s" % name)
        if not st.startswith("OK MINE 1 "):
            raise Fail("STATUS after the runner took %s: %r" % (name, st))
    for name in (x, y):
        r.expect("UNLOCK %s" % name, "OK 0")


def mlock_trymlock_timeout(t):
    a, x, y = t.a, t.name(), t.name()
    r = t.raw()
    r.expect("LOCK %s" % y, "OK ")
    a.call("connect", "c", t.sock)
    t0 = time.monotonic()
    rid = a.send("trymlock", "c", "m1", 200, 0, x, y)
    if a.answer(rid) != ["timeout"]:
        raise Fail("trymlock of a set with a held name answered %r, expected timeout"
                   % a.answer(rid))
    if time.monotonic() - t0 < 0.19:
        raise Fail("trymlock with wait 200 timed out after %.0f ms"
                   % ((time.monotonic() - t0) * 1000))
    if a.call("status", "c", x) != ["FREE"]:
        raise Fail("%s is not FREE after the trymlock timed out" % x)
    if a.answer(a.send("trymlock", "c", "m2", 0, 0, y, x)) != ["timeout"]:
        raise Fail("trymlock with wait 0 of a set with a held name did not time out")
    r.expect("UNLOCK %s" % y, "OK 0")
    fences = a.call("trymlock", "c", "m3", 0, 0, x, y, n=2)
    if any(f <= 0 for f in fences):
        raise Fail("trymlock of the free set: fences %s" % fences)
    if a.call("munlock", "m3", n=2) != [0, 0]:
        raise Fail("munlock did not answer 0 0")


def mlock_bad_input(t):
    a, x, y = t.a, t.name(), t.name()
    a.call("connect", "c", t.sock)
    a.err(a.send("mlock", "c", "m1", 0), "args")
    many = ["%s-%d" % (x, i) for i in range(65)]
    a.err(a.send("mlock", "c", "m2", 0, *many), "args")
    a.err(a.send("trymlock", "c", "m3", 0, 0, *many), "args")
    a.err(a.send("mlock", "c", "m4", 0, x, y, x), "args")
    a.err(a.send("mlock", "c", "m5", 0, x, "n" * 300), "name")
    a.err(a.send("mlock", "c", "m6", NUM_MAX + 1, x, y), "args")
    a.call("ping", "c")
    for name in (x, y):
        if a.call("status", "c", name) != ["FREE"]:
            raise Fail("a refused mlock left %s held" % name)
    if len(a.call("mlock", "c", "m7", 0, *many[:64], n=64)) != 64:
        raise Fail("mlock of 64 names did not answer 64 fences")
    if a.call("munlock", "m7", n=64) != [0] * 64:
        raise Fail("munlock of 64 names did not answer 64 zeros")
    for name in many[:64]:
        t.free_checks.append((t.sock, name, "lock"))


# ---- listing ----

def list_every_kind(t):
    """LIST through the client: a lock, a read lock, a semaphore's permits
    and an election's leader under one prefix, each told with its kind."""
    a, base = t.a, t.name(check=False)
    x = {k: "%s-%s" % (base, k) for k in ("lock", "read", "sem", "elect")}
    t.free_checks += [(t.sock, x["lock"], "lock"), (t.sock, x["read"], "rw"),
                      (t.sock, x["elect"], "elect")]
    a.call("connect", "c1", t.sock)
    a.call("connect", "c2", t.sock)
    fence = a.call("lock", "c1", "hl", x["lock"], 0, n=2)[0]
    a.call("rlock", "c1", "hr", x["read"], 0, n=2)
    a.call("seminit", "c1", x["sem"], 3, n=1)
    a.call("acquire", "c1", "hs", x["sem"], 2, 0, n=1)
    fe = a.call("elect", "c2", "he", x["elect"], "v", 0, n=1)[0]
    got = a.call("list", "c2", base + "-*", "-")
    if got[:2] != [4, 0] or len(got) != 2 + 4 * 4:
        raise Fail("list %s-* answered %r, expected ok 4 0 and 4 entries" % (base, got))
    entries = {got[i]: got[i + 1:i + 4] for i in range(2, len(got), 4)}
    want = {x["lock"]: "lock", x["read"]: "read", x["sem"]: "sem", x["elect"]: "elect"}
    if {k: v[0] for k, v in entries.items()} != want:
        raise Fail("list told names and kinds %r, expected %r" % (entries, want))
    if entries[x["lock"]][1] != fence or entries[x["elect"]][1] != fe:
        raise Fail("list told fences %r, expected the lock's %s, the leader's %s"
                   % (entries, fence, fe))
    if entries[x["sem"]][1] != "-":
        raise Fail("list told the semaphore's fence %r, expected -" % entries[x["sem"]][1])
    if any(not isinstance(v[2], int) or v[2] < 1 for v in entries.values()):
        raise Fail("list told a held name with no holder: %r" % entries)
    got = a.call("list", "c2", base + "-*", 2)
    if got[:2] != [2, 1] or len(got) != 2 + 2 * 4:
        raise Fail("list %s-* 2 answered %r, expected ok 2 1 and 2 entries" % (base, got))
    a.err(a.send("list", "c2", "x", 0), "args")
    a.call("ping", "c2")
    a.call("unlock", "hl", n=1)
    a.call("unlock", "hr", n=1)
    a.call("release", "hs", 2, n=1)
    a.call("resign", "he", n=1)
    with Raw(t.sock) as r:
        r.expect("TRYACQUIRE %s 3 %d" % (x["sem"], GUARD * 1000), "OK 3")


# ---- count-down latches (issue 41) ----

def latch_many_waiters(t):
    """20 clients, 10 on each of two dlockds, await one latch set to 3 by
    another client: the first two count-downs release nobody, the third
    releases all 20 at once."""
    a = t.a
    sock2, _ = t.dlockd()
    x = t.name("latch")
    socks = {"cs": t.sock, "ct": sock2}
    for cid, sock in socks.items():
        a.call("connect", cid, sock)
    waiters = ["w%d" % i for i in range(20)]
    for i, cid in enumerate(waiters):
        socks[cid] = t.sock if i < 10 else sock2
        a.call("connect", cid, socks[cid])
    if a.call("latchset", "cs", x, 3, n=1) != [1]:
        raise Fail("latchset %s 3 of a new latch did not answer ok 1" % x)
    rid = {cid: a.send("await", cid, x) for cid in waiters}
    wait_waiters(t.sock, 10)
    wait_waiters(sock2, 10)

    def none_answered(when):
        got = [(cid, a.answer(r)) for cid, r in rid.items() if a.answered(r)]
        if got:
            raise Fail("%d of the 20 awaits answered %s (first: %s on %s: %r)"
                       % (len(got), when, got[0][0], "the second dlockd" if
                          socks[got[0][0]] == sock2 else "the first dlockd",
                          " ".join(got[0][1])))

    none_answered("before any countdown")
    last = t.rng.choice(["cs", "ct"])
    for k, (cid, left) in enumerate([("cs", 2), ("ct", 1)]):
        if a.call("countdown", cid, x, n=1) != [left]:
            raise Fail("countdown %d (by %s) did not answer ok %d" % (k + 1, cid, left))
        # Nobody released: each dlockd still has its 10 waits, and tells
        # the count left; then no await may have answered.
        for sock in (t.sock, sock2):
            with Raw(sock) as r:
                n = int(r.info().get("waiters", -1))
                reply = r.req("LATCHCOUNT %s" % x)
            if n != 10 or reply != "OK %d" % left:
                raise Fail("after countdown %d (ok %d), the %s dlockd had %d waiters and "
                           "answered LATCHCOUNT %r: expected 10 waiters and OK %d"
                           % (k + 1, left, "first" if sock == t.sock else "second", n,
                              reply, left))
        none_answered("after countdown %d (the count %d)" % (k + 1, left))
    t3 = time.monotonic()
    if a.call("countdown", last, x, n=1) != [0]:
        raise Fail("the third countdown (by %s) did not answer ok 0" % last)
    for cid, r in rid.items():
        got = prompt(a, r, "the await of %s on the %s dlockd not answered within %ss of the "
                     "third countdown (on the %s)" % (
                         cid, "second" if socks[cid] == sock2 else "first", PROMPT_GUARD,
                         "second" if last == "ct" else "first"))
        if got != ["ok"]:
            raise Fail("the await of %s answered %r after the third countdown, expected ok"
                       % (cid, " ".join(got)))
        if a.answer_time[r] < t3:
            raise Fail("the await of %s was answered before the third countdown was sent"
                       % cid)
    wait_no_waiters(t.sock)
    wait_no_waiters(sock2)
    for cid in ("cs", "ct", "w0", "w19"):
        if a.call("latchcount", cid, x, n=1) != [0]:
            raise Fail("latchcount on %s after the third countdown did not answer ok 0" % cid)
    # Opened: it stays so (no latch is 0), on either dlockd.
    for cid in ("w0", "w19"):
        got = prompt(a, a.send("await", cid, x), "an await of the opened latch on %s not "
                     "answered within %ss" % (cid, PROMPT_GUARD))
        if got != ["ok"]:
            raise Fail("an await of the opened latch answered %r, expected ok" % " ".join(got))
    t.free_checks.append((sock2, x, "latch"))


def latch_tryawait_cancel(t):
    """latchset sets a count once; tryawait times out telling the count;
    a cancelled await leaves no wait; the last countdown opens it."""
    a, x = t.a, t.name("latch")
    for cid in ("cs", "c1", "c2"):
        a.call("connect", cid, t.sock)
    if a.call("latchset", "cs", x, 2, n=1) != [1]:
        raise Fail("latchset %s 2 of a new latch did not answer ok 1" % x)
    if a.call("latchset", "c1", x, 5, n=1) != [0]:
        raise Fail("latchset of an existing latch did not answer ok 0")
    if a.call("latchcount", "c1", x, n=1) != [2]:
        raise Fail("latchcount after latchset 2 then 5 did not answer ok 2: the second "
                   "changed it")
    t0 = time.monotonic()
    got = a.answer(a.send("tryawait", "c1", x, 200))
    if got != ["timeout", "2"]:
        raise Fail("tryawait with wait 200 of a latch at 2 answered %r, expected timeout 2"
                   % " ".join(got))
    if time.monotonic() - t0 < 0.19:
        raise Fail("tryawait with wait 200 timed out after %.0f ms"
                   % ((time.monotonic() - t0) * 1000))
    if a.call("countdown", "cs", x, n=1) != [1]:
        raise Fail("countdown of a latch at 2 did not answer ok 1")
    got = a.answer(a.send("tryawait", "c1", x, 0))
    if got != ["timeout", "1"]:
        raise Fail("tryawait with wait 0 of a latch at 1 answered %r, expected timeout 1"
                   % " ".join(got))
    rid = a.send("await", "c2", x)
    wait_waiters(t.sock, 1)
    a.call("cancel", rid)
    a.err(rid, "cancelled")
    wait_no_waiters(t.sock)
    if a.call("latchcount", "cs", x, n=1) != [1]:
        raise Fail("latchcount after the cancelled await did not answer ok 1")
    if a.call("countdown", "cs", x, n=1) != [0]:
        raise Fail("the last countdown did not answer ok 0")
    if a.call("tryawait", "cs", x, 0) != []:
        raise Fail("tryawait with wait 0 of the opened latch did not answer ok")
    if a.call("await", "c1", x) != []:
        raise Fail("await of the opened latch did not answer ok")
    if a.call("countdown", "c1", x, n=1) != [0]:
        raise Fail("countdown of a latch that no longer exists did not answer ok 0")
    if a.call("latchcount", "c1", x, n=1) != [0]:
        raise Fail("countdown of a latch that no longer exists left a count")


def latch_bad_input(t):
    """Bad counts and names are refused; a latch and a lock of one name
    exclude each other (err kind)."""
    a, x, y = t.a, t.name("latch"), t.name()
    a.call("connect", "c", t.sock)
    a.err(a.send("latchset", "c", x, 0), "args")
    a.err(a.send("latchset", "c", x, NUM_MAX + 1), "args")
    a.err(a.send("latchset", "c", "n" * 300, 1), "name")
    a.err(a.send("countdown", "c", "n" * 300), "name")
    a.err(a.send("await", "c", "n" * 300), "name")
    a.err(a.send("tryawait", "c", x, NUM_MAX + 1), "args")
    a.call("ping", "c")
    if a.call("latchcount", "c", x, n=1) != [0]:
        raise Fail("a refused latchset left a count on %s" % x)
    # A latch's name is no lock, a lock's name no latch.
    if a.call("latchset", "c", x, 2, n=1) != [1]:
        raise Fail("latchset %s 2 did not answer ok 1" % x)
    a.err(a.send("lock", "c", "h1", x, 0), "kind")
    r = t.raw()
    r.expect("LOCK %s" % y, "OK ")
    a.err(a.send("latchset", "c", y, 1), "kind")
    a.err(a.send("countdown", "c", y), "kind")
    a.err(a.send("await", "c", y), "kind")
    r.expect("UNLOCK %s" % y, "OK 0")
    a.call("ping", "c")
    if a.call("countdown", "c", x, n=1) != [1] or a.call("countdown", "c", x, n=1) != [0]:
        raise Fail("two countdowns of a latch at 2 did not answer ok 1, ok 0")


# ---- many tasks on one client (tagged requests, issue 38) ----
# One client's tasks wait at once on its one connection: each is answered
# when its own name comes free, and nothing of one task waits behind
# another's wait. The blocking clients serve one call at a time and skip
# these. The runner's own connection (B) holds the names, so that a
# release is one UNLOCK whose answer the runner has before it looks for
# the grant it makes.

TAGGED = "the client does not tag: one call at a time per client"


def prompt(a, rid, what, guard=PROMPT_GUARD):
    """The answer to rid, due within guard: a Fail saying what was due
    otherwise."""
    try:
        return a.answer(rid, guard)
    except Fail as e:
        raise Fail("%s: %s" % (what, e))


def prompt_ok(a, rid, n, what, guard=PROMPT_GUARD):
    got = prompt(a, rid, what, guard)
    if got[0] != "ok" or len(got) != n + 1:
        raise Fail("%s: %r answered %r, expected ok and %d words"
                   % (what, a.sent[rid], " ".join(got), n))
    return [int(w) if w.isdigit() else w for w in got[1:]]


def list_until(t, pattern, pred, what):
    """The runner's LIST of pattern, polled until pred(entries) holds;
    a Fail with what and the last listing otherwise."""
    deadline = time.monotonic() + GUARD
    with Raw(t.sock) as r:
        while True:
            entries = r.list(pattern)
            if pred(entries):
                return entries
            if time.monotonic() >= deadline:
                raise Fail("%s within %ss (dlockd's LIST %s: %s)" % (what, GUARD, pattern,
                                                                    listed_briefly(entries)))
            time.sleep(0.01)    # poll interval, bounded by the guard


def listed_briefly(entries):
    """A LIST's holders and waiters in a few words: names by their last
    '-' part (a Waits task's number)."""
    if not entries:
        return "nothing"

    def tell(key):
        counts = {}
        for n, e in entries.items():
            counts.setdefault(e[key], []).append(n.rsplit("-", 1)[-1])
        return "; ".join("%d on %s" % (k, " ".join(sorted(v, key=lambda x: (len(x), x))))
                         for k, v in sorted(counts.items()))
    return "%d names; holders: %s; waiters: %s" % (len(entries), tell("holders"),
                                                  tell("waiters"))


class Waits(object):
    """count names held by B (the runner's connection), and one lock task
    of client A (cid) waiting for each: names[i] is task i's, hid h<i>."""

    def __init__(self, t, count, cid="ca"):
        self.t, self.a, self.cid = t, t.a, cid
        self.base = t.name(check=False)
        self.pattern = self.base + "-*"
        self.names = ["%s-%d" % (self.base, i) for i in range(count)]
        t.free_checks += [(t.sock, n, "lock") for n in self.names]
        self.b = t.raw()
        self.bfence = {}
        for n in self.names:
            self.bfence[n] = int(self.b.expect("LOCK %s" % n, "OK ").split()[1])
        self.a.call("connect", cid, t.sock)
        self.rid, self.hid, self.released = {}, {}, {}
        self.cancelled = set()
        for i, n in enumerate(self.names):
            self.hid[n] = "h%d" % i
            self.rid[n] = self.a.send("lock", cid, self.hid[n], n, 0)

    def task(self, name):
        return "task %d (%s)" % (self.names.index(name), self.a.sent[self.rid[name]])

    def all_waiting(self, names=None):
        """Until dlockd has one waiter on each of names (default all)."""
        names = self.names if names is None else names
        list_until(self.t, self.pattern,
                   lambda es: all(es.get(n, {}).get("waiters") == 1 for n in names),
                   "dlockd did not have client %s's %d lock requests waiting, one on each "
                   "name" % (self.cid, len(names)))

    def none_answered(self, when):
        """No task still waiting (its name B's, its wait not cancelled) is
        answered."""
        for n in self.names:
            if n not in self.released and n not in self.cancelled and \
                    self.a.answered(self.rid[n]):
                raise Fail("%s was answered %r %s, while B still held %s"
                           % (self.task(n), " ".join(self.a.answer(self.rid[n])), when, n))

    def release(self, name):
        """B releases name: its task is granted right after, with a fence
        above B's, and no other waiting task is answered."""
        self.none_answered("before %s's release" % name)
        self.released[name] = time.monotonic()
        self.b.expect("UNLOCK %s" % name, "OK 0")
        # Its answer, or a wrong one (another task's) if that comes first.
        rids = [self.rid[name]] + [self.rid[n] for n in self.names if n not in self.released
                                   and n not in self.cancelled]
        try:
            self.a.first_of(rids, PROMPT_GUARD)
        except Fail:
            raise Fail("%s not granted (nor any other) within %ss of its name's release "
                       "(released so far, in order: %s)%s" % (
                           self.task(name), PROMPT_GUARD,
                           " ".join(str(self.names.index(n)) for n in self.released),
                           self.a.stderr_tail()))
        self.none_answered("once %s was released" % name)
        fence, holds = self.a.ok(self.rid[name], 2)
        if holds != 1 or fence <= self.bfence[name]:
            raise Fail("%s granted fence %s holds %s: expected a fence above B's %s, 1 hold"
                       % (self.task(name), fence, holds, self.bfence[name]))
        self.none_answered("once %s was granted" % name)

    def release_all(self, order):
        for n in order:
            self.release(n)
        # Nothing came before its own release (an answer the checks above
        # could have missed by a hair).
        for n in order:
            if self.a.answer_time[self.rid[n]] < self.released[n]:
                raise Fail("%s was answered before its name's release" % self.task(n))
        for n in order:
            if self.a.call("unlock", self.hid[n], n=1) != [0]:
                raise Fail("unlock %s did not answer 0 holds left" % self.hid[n])


@for_clients(TAGGING, TAGGED)
def concurrent_waits(t):
    """20 tasks of one client wait for 20 names B holds; B releases them
    one at a time in a random order, and each task is granted right
    after its own release."""
    w = Waits(t, 20)
    w.all_waiting()
    order = list(w.names)
    t.rng.shuffle(order)
    w.release_all(order)


@for_clients(TAGGING, TAGGED)
def cancel_one_of_many(t):
    """One of 20 waiting tasks is cancelled: it holds nothing and leaves
    no wait; the other 19 are granted right after their releases."""
    w = Waits(t, 20)
    a = t.a
    a.call("connect", "cc", t.sock)
    w.all_waiting()
    gone = t.rng.choice(w.names)
    c0 = time.monotonic()
    w.cancelled.add(gone)
    a.call("cancel", w.rid[gone])
    got = prompt(a, w.rid[gone], "the cancelled %s not answered within %ss"
                 % (w.task(gone), PROMPT_GUARD))
    if got[:2] != ["err", "cancelled"]:
        raise Fail("the cancelled %s answered %r, expected err cancelled"
                   % (w.task(gone), " ".join(got)))
    if a.answer_time[w.rid[gone]] < c0:
        raise Fail("%s was answered before its cancel" % w.task(gone))
    rest = [n for n in w.names if n != gone]
    w.none_answered("once %s was cancelled" % gone)
    # No wait of it is left in dlockd, and the other 19 still wait.
    list_until(t, w.pattern,
               lambda es: es.get(gone, {}).get("waiters") == 0 and
               all(es.get(n, {}).get("waiters") == 1 for n in rest),
               "after the cancel of %s, dlockd did not have 0 waiters on %s and 1 on each "
               "of the other 19 names" % (w.task(gone), gone))
    # It holds nothing: the name is still B's...
    st = w.b.req("STATUS %s" % gone)
    if not st.startswith("OK MINE 1 "):
        raise Fail("B's STATUS %s after the cancel: %r, expected OK MINE 1 ..." % (gone, st))
    st = a.call("status", w.cid, gone)
    if st[:1] != ["TAKEN"]:
        raise Fail("client %s's status of %s after the cancel: %r, expected TAKEN"
                   % (w.cid, gone, st))
    # ...and once B releases it, a third client takes it at once.
    w.b.expect("UNLOCK %s" % gone, "OK 0")
    got = prompt(a, a.send("trylock", "cc", "hc", gone, 0, 0), "a third client's trylock of "
                 "%s (wait 0) after B released it not answered within %ss"
                 % (gone, PROMPT_GUARD))
    if got[0] != "ok":
        raise Fail("a third client's trylock of %s (wait 0) after B released it answered "
                   "%r: the cancelled wait lived on" % (gone, " ".join(got)))
    if a.call("unlock", "hc", n=1) != [0]:
        raise Fail("the third client's unlock of %s did not answer 0" % gone)
    if [j for j in a.junk if j.split(" ")[0] == w.rid[gone]]:
        raise Fail("the cancelled %s was answered again: %s" % (w.task(gone), a.junk))
    order = list(rest)
    t.rng.shuffle(order)
    w.release_all(order)


@for_clients(TAGGING, TAGGED)
def same_name_order(t):
    """Two tasks of one client locking one name queue in the client (a
    held lock is reentrant only through its handle); and an unlock of x
    is answered at once while another task of the client waits for y."""
    a, x, y = t.a, t.name(), t.name()
    a.call("connect", "c", t.sock)
    rids = {a.send("lock", "c", "h1", x, 0): "h1", a.send("lock", "c", "h2", x, 0): "h2"}
    first = a.first_of(list(rids))
    second = next(r for r in rids if r != first)
    f1, holds = a.ok(first, 2)
    if holds != 1:
        raise Fail("the first of two tasks locking %s got %s holds, expected 1" % (x, holds))
    # The second waits in the client: it made no reentry.
    a.call("ping", "c")
    st = a.call("status", "c", x)
    if st[:2] != ["MINE", 1] or st[-1] != f1:
        raise Fail("status of %s while the first task holds it and the second waits: %r, "
                   "expected MINE 1 <ttl> %s (the second's lock no reentry)" % (x, st, f1))
    if a.answered(second):
        raise Fail("the second task's lock of %s answered %r while the first held it"
                   % (x, " ".join(a.answer(second))))
    u0 = time.monotonic()
    if a.call("unlock", rids[first], n=1) != [0]:
        raise Fail("the first task's unlock of %s did not answer 0" % x)
    f2, holds = prompt_ok(a, second, 2, "the second task's lock of %s not granted within %ss "
                          "of the first's unlock" % (x, PROMPT_GUARD))
    if holds != 1 or f2 <= f1 or a.answer_time[second] < u0:
        raise Fail("the second task's grant of %s: fence %s holds %s (after the unlock: %s), "
                   "expected a fence above the first's %s, 1 hold, after the unlock"
                   % (x, f2, holds, a.answer_time[second] >= u0, f1))
    if a.call("unlock", rids[second], n=1) != [0]:
        raise Fail("the second task's unlock of %s did not answer 0" % x)

    # No head-of-line blocking: an unlock while another task waits.
    b = t.raw()
    fy = int(b.expect("LOCK %s" % y, "OK ").split()[1])
    a.call("lock", "c", "hx", x, 0, n=2)
    ry = a.send("lock", "c", "hy", y, 0)
    list_until(t, y, lambda es: es.get(y, {}).get("waiters") == 1,
               "dlockd did not have the client's lock of %s waiting" % y)
    got = prompt_ok(a, a.send("unlock", "hx"), 1, "the unlock of %s not answered within %ss "
                    "while another task of the client waited for %s (head-of-line blocking)"
                    % (x, PROMPT_GUARD, y))
    if got != [0]:
        raise Fail("the unlock of %s answered %s, expected 0" % (x, got))
    # Released at once, not only answered.
    b.expect("TRYLOCK %s" % x, "OK ")
    b.expect("UNLOCK %s" % x, "OK 0")
    if a.answered(ry):
        raise Fail("the lock of %s answered %r while B held it" % (y, " ".join(a.answer(ry))))
    b.expect("UNLOCK %s" % y, "OK 0")
    fence, holds = prompt_ok(a, ry, 2, "the lock of %s not granted within %ss of its release"
                             % (y, PROMPT_GUARD))
    if holds != 1 or fence <= fy:
        raise Fail("the lock of %s granted fence %s holds %s: expected a fence above B's %s, "
                   "1 hold" % (y, fence, holds, fy))
    if a.call("unlock", "hy", n=1) != [0]:
        raise Fail("the unlock of %s did not answer 0" % y)


@for_clients(TAGGING, TAGGED)
def list_while_waiting(t):
    """While 10 tasks of client A wait for names B holds, a list on A is
    answered at once, telling the names and their holders; the waits are
    granted after the releases."""
    w = Waits(t, 10)
    a = t.a

    def listed(when):
        rid = a.send("list", w.cid, w.pattern, "-")
        got = prompt(a, rid, "the list on client %s not answered within %ss %s"
                     % (w.cid, PROMPT_GUARD, when))
        words = [int(x) if x.isdigit() else x for x in got[1:]]
        if got[0] != "ok" or words[:2] != [len(w.names), 0] or len(words) != 2 + 4 * len(w.names):
            raise Fail("the list %s answered %r, expected ok %d 0 and %d entries"
                       % (when, " ".join(got), len(w.names), len(w.names)))
        entries = {words[i]: words[i + 1:i + 4] for i in range(2, len(words), 4)}
        want = {n: ["lock", w.bfence[n], 1] for n in w.names}
        if entries != want:
            raise Fail("the list %s told %r, expected each name a lock with B's fence and one "
                       "holder: %r" % (when, entries, want))
        w.none_answered("by the time the list %s was answered" % when)

    # As soon as a wait is in dlockd, the client is waiting: the list
    # must not wait behind it.
    list_until(t, w.pattern, lambda es: sum(e["waiters"] for e in es.values()) >= 1,
               "dlockd had none of client %s's lock requests waiting" % w.cid)
    listed("while a task waited")
    w.all_waiting()
    listed("while all 10 tasks waited")
    order = list(w.names)
    t.rng.shuffle(order)
    w.release_all(order)


SCENARIOS = [grant_rising_fences, trylock_timeout, reentry, lease_expiry_loss,
             force_unlock_loss, closed_client_frees, contend_100, cancel_wait,
             dlockd_killed_during_wait, socket_missing, rwlock_once, semaphore_once,
             fairlock_once, bad_input, sub_ms_lease, bad_name_shown, election_handover,
             election_leader_closed, election_cancel, election_observe_none,
             election_lease_expiry, election_two_daemons, election_bad_input,
             mlock_all_or_nothing, mlock_reentry_and_unlock, mlock_opposite_orders,
             mlock_closed_frees, mlock_cancel, mlock_trymlock_timeout, mlock_bad_input,
             mlock_lost_one, list_every_kind, latch_many_waiters, latch_tryawait_cancel,
             latch_bad_input, concurrent_waits, cancel_one_of_many,
             same_name_order, list_while_waiting]


# ---- the run ------------------------------------------------------------------

def run_one(world, client, argv, fn):
    """None if the scenario passed, else what failed."""
    logpath = os.path.join(world.tmp, "adapter-%s-%s.log" % (client, fn.__name__))
    a = None
    t = None
    try:
        a = Adapter(argv, logpath)
        t = T(world, client, fn.__name__, a)
        fn(t)
        a.finish()
        t.check_free()
        return None
    except Fail as e:
        return str(e)
    except Exception as e:
        return "%s: %s%s" % (type(e).__name__, e, a.stderr_tail() if a else "")
    finally:
        if t is not None:
            t.cleanup()
        if a is not None:
            a.kill()


def adapter_argv(client):
    env = "CONFORMANCE_ADAPTER_" + client.upper().replace("-", "_")
    if os.environ.get(env):
        return shlex.split(os.environ[env]), lambda: True
    return ADAPTERS[client]


def main(argv):
    verbose = os.environ.get("CONFORMANCE_VERBOSE") == "1"
    scenarios = SCENARIOS
    if argv:
        byname = {f.__name__: f for f in SCENARIOS}
        unknown = [n for n in argv if n not in byname]
        if unknown:
            print("conformance: no scenario %s (have: %s)" % (
                ", ".join(unknown), " ".join(byname)), file=sys.stderr)
            return 2
        scenarios = [byname[n] for n in argv]

    wanted = os.environ.get("CONFORMANCE_CLIENTS", "").strip()
    clients, failed = [], False
    if wanted:
        for c in wanted.split(","):
            if c not in ADAPTERS:
                print("conformance: no client %r (have: %s)" % (c, ",".join(ADAPTERS)),
                      file=sys.stderr)
                return 2
            ok = adapter_argv(c)[1]()
            if ok is not True:
                print("conformance %s: adapter missing: %s" % (c, ok))
                failed = True
            else:
                clients.append(c)
        skipped = [c for c in ADAPTERS if c not in wanted.split(",")]
        if skipped:
            print("conformance: skipped %s (not in CONFORMANCE_CLIENTS)" % ", ".join(skipped))
    else:
        why = []
        for c in ADAPTERS:
            ok = adapter_argv(c)[1]()
            if ok is True:
                clients.append(c)
            else:
                why.append("%s (%s)" % (c, ok))
        if why:
            print("conformance: skipped %s" % ", ".join(why))

    world = World()
    t0 = time.monotonic()
    print("conformance: seed %d (CONFORMANCE_SEED=%d repeats the random choices)"
          % (world.seed, world.seed), flush=True)
    try:
        world.start()
        for c in clients:
            argv_c = adapter_argv(c)[0]
            passed, fails, skips = 0, [], {}
            for fn in scenarios:
                if c not in getattr(fn, "clients", (c,)):
                    skips.setdefault(fn.skip_why, []).append(fn.__name__)
                    if verbose:
                        print("  %s %s skipped (%s)" % (c, fn.__name__, fn.skip_why), flush=True)
                    continue
                s0 = time.monotonic()
                err = run_one(world, c, argv_c, fn)
                if verbose:
                    print("  %s %s %s (%.2f s)" % (c, fn.__name__, "FAIL" if err else "ok",
                                                   time.monotonic() - s0), flush=True)
                if err is None:
                    passed += 1
                else:
                    fails.append((fn.__name__, err))
            nskip = sum(len(v) for v in skips.values())
            print("conformance %s: %d passed, %d failed%s" % (
                c, passed, len(fails), ", %d skipped" % nskip if nskip else ""), flush=True)
            for why, names in skips.items():
                print("  skipped (%s): %s" % (why, " ".join(names)))
            for name, err in fails:
                print("  %s: %s" % (name, err.replace("\n", "\n    ")))
            failed = failed or bool(fails)
    except RuntimeError as e:
        print("conformance: %s" % e, file=sys.stderr)
        return 2
    finally:
        world.stop()
    if verbose:
        print("conformance: %.1f s" % (time.monotonic() - t0))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
