"""The chaos suite's lock-kinds stage: a read/write lock and a counting
semaphore under contention and faults, and the invariants that no writer ever
holds the lock alongside anyone and that no more permits are ever held than
the semaphore has.

One redis-server (Unix socket) and two dlockd (watchdog mode, lease
KI_LEASE_MS) serve both names.

The read/write lock: KI_WORKERS worker processes (this file run as
`worker`), half on each daemon, loop on one name: RLOCK or (KI_WRITE_PCT of
the time) WLOCK, report the grant to the tracker, stay 1-4 ms, report the
end, RUNLOCK or WUNLOCK. The tracker (a thread of the orchestrator, on a Unix
socket) keeps who is inside and records a violation when a writer enters
while anyone is inside, or anyone enters while a writer is. A section is
reported after its grant's reply and ended before its unlock is sent, so a
tracked section lies inside the real hold: an overlap of tracked sections is
an overlap of holds.

The semaphore: KS_NAME, set to KS_PERMITS permits by SEMINIT at the start.
KS_WORKERS workers (`semworker`), half on each daemon, loop: ACQUIRE 1 or
(KS_TWO_PCT of the time) 2 permits, mostly in watchdog mode, KS_LEASE_PCT of
the time with a lease of KS_LEASE_MS, KS_TRY_PCT of the time as TRYACQUIRE
with a wait of 0, 20 or 100 ms; report the grant (permits, when the request
was sent, the lease), stay 1-4 ms, report the end, RELEASE them, report how
the RELEASE went. Of 2 permits, KS_SPLIT_PCT of the time the worker takes 1
and then 1 more (TRYACQUIRE with a wait of 0 or 20 ms: holders waiting for
each other's permits would wait forever), and as often gives back 1
(reported first) and then the other. Once per worker process, at a random
moment of its first KS_OVERSTAY_S, it asks for a lease of KS_SHORT_LEASE_MS
and stays past it: it must hear `!LOST <name> expired` and get ERR NOTHELD
from its RELEASE.

The semaphore's tracker counts the permits of every holding it can prove
alive and records a violation when a grant makes them more than KS_PERMITS.
A holding is provably alive:

  - from its grant's report until its end's report (a partial release's
    report takes those permits off), and no longer than its lease could
    last: (request sent) + lease - KS_TOL_MS, since the daemon and Redis
    count a lease from later than the request was sent;
  - a killed worker's until just before its SIGKILL (the tracker ends it,
    then kills; a killed incarnation's messages get no answer, so it cannot
    release first, and what it sent late is ignored); the daemon gives its
    permits back when the connection closes, which may be at once;
  - a SIGKILLed dlockd's workers' holdings (those inside, and grants of
    that daemon reported late: request sent before the kill) become
    "ghosts": nobody releases them and Redis keeps their permit ids until
    their lease ends, so they count until (request sent) + lease -
    KS_TOL_MS, with KI_LEASE_MS for watchdog mode. From just before the
    kill until the daemon is reaped the tracker answers none of that
    daemon's workers, so none of them releases in between; what they
    report later of those holdings is ignored.

The worker reports after its grant's reply and before sending RELEASE (whose
reply comes before Redis has the release), so every counted holding lies
inside the permits' real life in Redis: a sum above the size is a real
over-grant. Holdings the tracker does not know of (a grant not reported yet)
only make the count smaller.

Faults: workers SIGKILLed (the orchestrator ends their section just before
the kill: their hold lasts until the connection closes, after it, and what
they still send is ignored): read/write workers at random, semaphore workers
while they hold permits (those must be granted again at once: others hold
more than KS_PERMITS minus the victim's permits within KS_BACK_MS, or
KS_BACK_MS after an overstayed lease in the way has ended); and one dlockd
SIGKILLed, while one of its semaphore workers holds permits, and restarted
(its read/write workers' sections end just before the kill: their holds die
with the daemon's connections, as the docs say, and the keys it left in
Redis keep the others out until their lease runs out; its semaphore holdings
become ghosts, and live holders must hold all KS_PERMITS again within
KS_LEASE_MS + KS_DEAD_SLACK_MS of the kill).

Checks: no overlap; write fences rise strictly in grant order and a read's
fence is at least that of every write that ended before it was granted;
readers did share (two or more inside at once); both kinds were granted
after every fault; never more permits held than KS_PERMITS, and KS_PERMITS
held at once (the semaphore is shared); 1- and 2-permit grants after every
fault (after the dlockd kill, on the restarted daemon too), a killed
holder's permits back at once, a dead daemon's after their lease; no
acquisition waiting longer than KS_STALL_MS but across the dlockd kill (and
its lease) or an overstayed lease; every RELEASE answered OK <left>, or
!LOST expired and ERR NOTHELD after an overstayed lease, and connections
broken only to the killed dlockd; at the end, once every semaphore worker
released and quit, STATUS says `OK SEM KS_PERMITS 0` on both daemons and in
Redis the permits available plus the permit ids left (expired) are
KS_PERMITS, none alive; and, with every stage's daemons, each exits 0 on
SIGTERM without a sanitizer report in its log (logs dlockd-kinds<N>.log).
"""
# SPDX-License-Identifier: MIT

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import history

KI_NAME = "chaos-rw"
KI_DAEMONS = 2
KI_WORKERS = 8
KI_WRITE_PCT = 25
KI_LEASE_MS = 1000
KI_PROGRESS_S = 5.0          # both kinds granted within this after a fault (short run: x2)
KI_STOP_S = 10.0             # workers and daemons end within this

KS_NAME = "chaos-sem"
KS_KEY = "dlock:" + KS_NAME  # in Redis (dlockd's default key_prefix)
KS_PERMITS = 3               # the semaphore's size (SEMINIT)
KS_WORKERS = 8
KS_TWO_PCT = 40              # acquisitions of 2 permits (else 1)
KS_LEASE_PCT = 20            # with a lease of KS_LEASE_MS (else watchdog mode)
KS_LEASE_MS = 1500
KS_SPLIT_PCT = 25            # of 2-permit holdings: taken 1 + 1, or given back 1 + 1
KS_TRY_PCT = 15              # TRYACQUIRE with a wait of 0, 20 or 100 ms (else ACQUIRE)
KS_OVERSTAY_S = 20.0         # once, at random in its first this many s: a lease of
                             # KS_SHORT_LEASE_MS, and stay past it
KS_SHORT_LEASE_MS = 200
KS_TOL_MS = 30               # the daemon's and Redis's clocks against ours (coarse loop time)
KS_BACK_MS = 150             # a killed holder's permits granted again (short run: x4)
KS_DEAD_SLACK_MS = 500       # a dead dlockd's: within KS_LEASE_MS + this (short run: x3)
KS_STALL_MS = 500            # longest wait for a grant outside the dlockd kill (short: x2)
KS_END_S = 3.0               # STATUS says every permit is free within this at the end


# ---- the worker (a separate process) ------------------------------------------

def _line(f):
    while True:
        l = f.readline()
        if not l:
            raise EOFError
        if not l.startswith("!"):
            return l.strip()


def worker(inc, dsock, tsock, seed):
    rnd = random.Random(seed)
    tr = socket.socket(socket.AF_UNIX)
    tr.connect(tsock)
    tf = tr.makefile("rw", buffering=1)

    def tell(text):
        tf.write(text + "\n")
        tf.flush()
        if tf.readline().strip() != "OK":
            raise SystemExit(0)

    d = None
    while True:
        try:
            if d is None:
                s = socket.socket(socket.AF_UNIX)
                s.connect(dsock)
                d = s.makefile("rw", buffering=1)
            write = rnd.randrange(100) < KI_WRITE_PCT
            t_req = time.monotonic()
            d.write("%s %s\n" % ("WLOCK" if write else "RLOCK", KI_NAME))
            d.flush()
            r = _line(d)
            if not r.startswith("OK "):
                raise EOFError
            tell("G %d %s %s %r" % (inc, "W" if write else "R", r.split()[1], t_req))
            time.sleep(rnd.uniform(0.001, 0.004))
            tell("E %d" % inc)
            d.write("%s %s\n" % ("WUNLOCK" if write else "RUNLOCK", KI_NAME))
            d.flush()
            _line(d)
        except (EOFError, OSError):
            d = None
            time.sleep(0.02)


def sem_worker(inc, daemon, dsock, tsock, seed):
    """A semaphore worker: see the module's docstring. It stops (RELEASE,
    QUIT, exit 0) when the tracker answers Q to the end of a section."""
    rnd = random.Random(seed)
    tr = socket.socket(socket.AF_UNIX)
    tr.connect(tsock)
    tf = tr.makefile("rw", buffering=1)

    def tell(text):
        tf.write(text + "\n")
        tf.flush()
        r = tf.readline().strip()
        if r not in ("OK", "Q"):
            raise SystemExit(0)         # the orchestrator is gone
        return r

    tell("H %d %d" % (inc, daemon))
    d = None
    events = []                         # the ! lines read since the last report

    def reply():
        while True:
            l = d.readline()
            if not l:
                raise EOFError
            if l.startswith("!"):
                events.append(l.strip())
            else:
                return l.strip()

    def release(n, held, over):
        """RELEASE n of held: "ok", "expired" (an overstayed lease: told) or
        what else came."""
        d.write("RELEASE %s %d\n" % (KS_NAME, n))
        d.flush()
        r = reply()
        if r == "OK %d" % (held - n) and not events:
            out = "ok"
        elif over and r.startswith("ERR NOTHELD") and events == ["!LOST %s expired" % KS_NAME]:
            out = "expired"
        else:
            out = "odd:%s" % "|".join(events + [r]).replace(" ", "_")
        del events[:]
        return out

    over_at = time.monotonic() + rnd.uniform(0.3, KS_OVERSTAY_S)
    pending = 0                         # when the request waiting for its reply was sent
    while True:
        try:
            if d is None:
                s = socket.socket(socket.AF_UNIX)
                s.connect(dsock)
                d = s.makefile("rw", buffering=1)
                del events[:]
            k = 2 if rnd.randrange(100) < KS_TWO_PCT else 1
            over = over_at is not None and time.monotonic() >= over_at
            if over:
                over_at = None
            lease = (KS_SHORT_LEASE_MS if over else
                     KS_LEASE_MS if rnd.randrange(100) < KS_LEASE_PCT else 0)
            tail = " %d" % lease if lease else ""
            split = rnd.randrange(100) if k == 2 and not over else 100
            ups = [1, 1] if split < KS_SPLIT_PCT else [k]
            downs = [1, 1] if KS_SPLIT_PCT <= split < 2 * KS_SPLIT_PCT else [k]
            try_wait = rnd.choice((0, 20, 100)) if rnd.randrange(100) < KS_TRY_PCT else None
            if events:
                tell("X %d 0 odd:%s" % (inc, "|".join(events).replace(" ", "_")))
                del events[:]
            held = 0
            for i, n in enumerate(ups):
                if i:
                    time.sleep(rnd.uniform(0.001, 0.002))
                if i:
                    # more while holding: a bounded wait, or holders waiting for
                    # each other's permits would wait forever (the daemon is right)
                    req = "TRYACQUIRE %s %d %d%s" % (KS_NAME, n, rnd.choice((0, 20)), tail)
                elif try_wait is None:
                    req = "ACQUIRE %s %d%s" % (KS_NAME, n, tail)
                else:
                    req = "TRYACQUIRE %s %d %d%s" % (KS_NAME, n, try_wait, tail)
                t_req = pending = time.monotonic()
                d.write(req + "\n")
                d.flush()
                r = reply()
                pending = 0
                if r.startswith("TIMEOUT ") and req.startswith("TRY"):
                    tell("T %d" % inc)
                    break
                if r != "OK %d" % (held + n):
                    tell("X %d 0 grant:%s:%s" % (inc, req.replace(" ", "_"),
                                                  r.replace(" ", "_")))
                    raise EOFError
                held += n
                tell("G %d %d %d %r %d" % (inc, daemon, n, t_req, lease))
            if held == 0:
                continue
            if held < k:
                downs = [held]
            time.sleep(rnd.uniform(0.1, 0.15) + lease / 1000.0 if over
                       else rnd.uniform(0.001, 0.004))
            outcome = "ok"
            for i, n in enumerate(downs):
                if i:
                    time.sleep(rnd.uniform(0.001, 0.002))
                if i < len(downs) - 1:
                    tell("P %d %d" % (inc, n))    # holds fewer from now on
                else:
                    stop = tell("E %d" % inc) == "Q"
                outcome = release(n, held, over)
                held -= n
                if outcome != "ok":
                    break
            if outcome != "ok" and held:
                stop = tell("E %d" % inc) == "Q"
                tell("X %d %d %s" % (inc, 1 if over else 0, outcome))
                raise EOFError              # a new connection: nothing held
            tell("X %d %d %s" % (inc, 1 if over else 0, outcome))
            if stop:
                d.write("QUIT\n")
                d.flush()
                return
        except (EOFError, OSError):
            if d is not None:
                # the connection broke (its daemon was killed), maybe while waiting
                tell("C %d %r" % (inc, pending))
            d, pending = None, 0
            time.sleep(0.02)


# ---- the tracker ------------------------------------------------------------------

class Tracker(object):
    def __init__(self, path, hist=None):
        self.path = path
        self.hist = hist            # a history.History: every grant and end
        self.lock = threading.Lock()
        self.inside = {}            # incarnation -> (mode, fence, t)
        self.dead = set()           # killed incarnations: what they still send is late
        self.grants = []            # (t, incarnation, mode, fence)
        self.ends = []              # (t, incarnation, mode, fence)
        self.violations = []
        self.max_readers = 0
        self.srv = socket.socket(socket.AF_UNIX)
        self.srv.bind(path)
        self.srv.listen(64)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        f = conn.makefile("rw", buffering=1)
        try:
            for l in f:
                w = l.split()
                t = time.monotonic()
                with self.lock:
                    if int(w[1]) in self.dead:
                        pass        # sent before its kill, read after: its hold died with it
                    elif w[0] == "G":
                        self.enter(t, int(w[1]), w[2], int(w[3]), float(w[4]))
                    else:
                        self.leave(t, int(w[1]))
                f.write("OK\n")
                f.flush()
        except (OSError, ValueError, IndexError):
            pass

    def enter(self, t, inc, mode, fence, t_req):
        if self.hist:
            self.hist.record(proc=inc, name=KI_NAME, op=mode.lower() + "lock", t0=t_req, t1=t,
                             res="ok", fence=fence)
        others = [(o, m) for o, (m, _, _) in self.inside.items() if o != inc]
        if any(mode == "W" or m == "W" for _, m in others):
            self.violations.append((t, inc, mode, sorted(others)))
        self.inside[inc] = (mode, fence, t)
        self.grants.append((t, inc, mode, fence))
        readers = sum(1 for m, _, _ in self.inside.values() if m == "R")
        self.max_readers = max(self.max_readers, readers)

    def leave(self, t, inc):
        x = self.inside.pop(inc, None)
        if x is not None:
            self.ends.append((t, inc, x[0], x[1]))
            if self.hist:
                self.hist.record(proc=inc, name=KI_NAME, op=x[0].lower() + "unlock", t0=t, t1=t,
                                 res="")

    def kill(self, incs, dead=True):
        """Their sections end now: they were killed, or their daemon was (then
        they go on, with new grants)."""
        with self.lock:
            for inc in incs:
                self.leave(time.monotonic(), inc)
                if dead:
                    self.dead.add(inc)

    def close(self):
        self.closed = True
        self.srv.close()


INF = float("inf")


class SemTracker(object):
    """The semaphore's holdings, from its workers' reports (see the module's
    docstring for when one is provably alive)."""

    def __init__(self, path, hist=None):
        self.path = path
        self.hist = hist            # a history.History: grants, releases, kills, orphans
        self.cond = threading.Condition()
        self.daemon_of = {}         # incarnation -> its daemon
        self.held = {}              # incarnation -> its holding (a dict)
        self.ghosts = []            # holdings of a killed daemon, alive until their lease
        self.dead = set()           # killed incarnations: never answered again
        self.killing = set()        # daemons between begin_kill and end_kill
        self.killed_at = {}         # daemon -> when its last incarnation was reaped
        self.grants = []            # (t, incarnation, daemon, permits, lease, ghost, t_req)
        self.levels = []            # (t, permits counted) after each grant
        self.violations = []
        self.max_sum = 0
        self.outcomes = {}          # outcome -> count (RELEASE, as the workers saw it)
        self.odd = []               # (t, incarnation, daemon, outcome) unexpected
        self.overstays = 0
        self.timeouts = 0
        self.broken = []            # (t, incarnation, daemon, request pending since or 0):
                                    # a connection that broke
        self.late_ghosts = 0        # grants of a killed daemon reported after the kill
        self.ghost_violations = 0   # over-grants only counting a killed daemon's permits
        self.extended = 0           # holdings that took more permits
        self.partial = 0            # holdings that gave back some of theirs first
        self.stopping = False
        self.srv = socket.socket(socket.AF_UNIX)
        self.srv.bind(path)
        self.srv.listen(64)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        f = conn.makefile("rw", buffering=1)
        try:
            for l in f:
                w = l.split()
                t = time.monotonic()
                with self.cond:
                    inc = int(w[1])
                    if inc in self.dead:
                        continue    # killed (or being killed): no answer, no release
                    answer = self.note(t, inc, w)
                    d = self.daemon_of.get(inc)
                    while d in self.killing:
                        self.cond.wait()    # its daemon is being killed: no release before
                f.write(answer + "\n")
                f.flush()
        except (OSError, ValueError, IndexError):
            pass

    def rec(self, inc, op, t, **kw):
        if self.hist:
            self.hist.record(proc=inc, name=KS_NAME, op=op, t0=kw.pop("t0", t), t1=t, res="ok",
                             **kw)

    def note(self, t, inc, w):
        if w[0] == "H":
            self.daemon_of[inc] = int(w[2])
        elif w[0] == "G":
            self.enter(t, inc, int(w[2]), int(w[3]), float(w[4]), int(w[5]))
        elif w[0] == "P":
            x = self.held.get(inc)      # gives some back: holds fewer from now on
            if x is not None:
                x["k"] -= int(w[2])
                self.partial += 1
                self.rec(inc, "release", t, permits=int(w[2]))
        elif w[0] == "E":
            if self.held.pop(inc, None) is not None:    # none: a ghost now, alive until its lease
                self.rec(inc, "release", t, permits=None)
            if self.stopping:
                return "Q"
        elif w[0] == "X":
            outcome, over = w[3], w[2] == "1"
            self.overstays += over
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            if outcome != ("expired" if over else "ok"):
                self.odd.append((t, inc, self.daemon_of.get(inc), " ".join(w[2:])))
        elif w[0] == "T":
            self.timeouts += 1
        elif w[0] == "C":
            self.broken.append((t, inc, self.daemon_of.get(inc), float(w[2])))
        return "OK"

    def counted(self, t):
        """The permits of every holding alive at t, and those of ghosts."""
        live = sum(x["k"] for x in self.held.values() if x["until"] > t)
        return live, sum(g["k"] for g in self.ghosts if g["until"] > t)

    def enter(self, t, inc, d, k, t_req, lease):
        until = t_req + ((lease or KI_LEASE_MS) - KS_TOL_MS) / 1000.0
        ghost = d in self.killing or (d in self.killed_at and t_req < self.killed_at[d])
        x = dict(inc=inc, d=d, k=k, t=t, t_req=t_req, lease=lease,
                 until=until if (lease or ghost) else INF)
        self.rec(inc, "acquire", t, t0=t_req, permits=k, lease=lease, wlease=KI_LEASE_MS)
        if ghost:
            self.rec(inc, "orphaned", t)
        if ghost:
            self.ghosts.append(x)       # a grant of the killed daemon, reported late
            self.late_ghosts += 1
        elif inc in self.held:
            # more permits join the holding; the acquire leased them all anew
            y = self.held[inc]
            y["k"] += k
            y["until"] = max(y["until"], x["until"])
            self.extended += 1
        else:
            self.held[inc] = x
        live, gh = self.counted(t)
        if live + gh > KS_PERMITS:
            self.ghost_violations += live <= KS_PERMITS
            self.violations.append(
                "%.3f: %d permit(s) to incarnation %d (dlockd %d) made %d held: %s"
                % (t, k, inc, d, live + gh, "; ".join(
                    "inc %d dlockd %d %d since %.3f%s" % (
                        y["inc"], y["d"], y["k"], y["t"],
                        "" if y["until"] == INF else " until %.3f" % y["until"])
                    + (" (ghost)" if y in self.ghosts else "")
                    for y in sorted(list(self.held.values()) + self.ghosts,
                                    key=lambda y: y["t"]) if y["until"] > t)))
        self.max_sum = max(self.max_sum, live + gh)
        self.grants.append((t, inc, d, k, lease, ghost, t_req))
        self.levels.append((t, live, gh))

    def full_since(self, t):
        """True once live holders held every permit after time t."""
        with self.cond:
            return any(x[0] > t and x[1] == KS_PERMITS for x in self.levels)

    def inside(self):
        with self.cond:
            return [(inc, x["k"], x["d"]) for inc, x in self.held.items()
                    if x["until"] > time.monotonic()]

    def kill(self, incs):
        """They are about to be SIGKILLed: their holdings end now. Returns
        the permits that ended."""
        with self.cond:
            ended = 0
            for inc in incs:
                x = self.held.pop(inc, None)
                if x is not None and x["until"] > time.monotonic():
                    ended += x["k"]
                if x is not None:
                    self.rec(inc, "closed", time.monotonic())
                self.dead.add(inc)
            return ended

    def begin_kill(self, d):
        """Daemon d is about to be SIGKILLed: its workers' holdings become
        ghosts, and none of its workers is answered until end_kill.
        Returns the ghosts' permits."""
        with self.cond:
            self.killing.add(d)
            n = 0
            for inc, x in list(self.held.items()):
                if x["d"] == d:
                    del self.held[inc]
                    self.rec(inc, "orphaned", time.monotonic())
                    x["until"] = x["t_req"] + ((x["lease"] or KI_LEASE_MS) - KS_TOL_MS) / 1000.0
                    self.ghosts.append(x)
                    n += x["k"] if x["until"] > time.monotonic() else 0
            return n

    def end_kill(self, d, t):
        with self.cond:
            self.killed_at[d] = t
            self.killing.discard(d)
            self.cond.notify_all()

    def stop(self):
        with self.cond:
            self.stopping = True

    def close(self):
        self.closed = True
        with self.cond:
            self.killing.clear()
            self.cond.notify_all()
        self.srv.close()


# ---- the stage -------------------------------------------------------------------

def _wait(fn, timeout, interval=0.01):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if fn():
            return True
        time.sleep(interval)
    return fn()


def _ping(path):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(1.0)
        s.connect(path)
        s.sendall(b"PING\n")
        ok = s.recv(64).startswith(b"OK PONG")
        s.close()
        return ok
    except OSError:
        return False


def _info_up(path):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(1.0)
        s.connect(path)
        s.sendall(b"INFO\n")
        line = s.makefile().readline()
        s.close()
        return " redis=up " in line
    except OSError:
        return False


def _call(path, line):
    """One request on a connection of its own; the reply line (events skipped)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2.0)
    try:
        s.connect(path)
        f = s.makefile("rw", buffering=1)
        f.write(line + "\n")
        f.flush()
        return _line(f)
    except EOFError:
        raise OSError("dlockd closed the connection")
    finally:
        s.close()


# What Redis keeps of the semaphore: {available, permit ids, ids not expired}.
_SEM_KEYS_LUA = ("local t = redis.call('time')\n"
                 "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
                 "return {tonumber(redis.call('get', KEYS[1]) or '-1'),\n"
                 "        redis.call('zcard', KEYS[2]),\n"
                 "        redis.call('zcount', KEYS[2], '(' .. now, '+inf')}\n")


def _redis_ints(path, *args):
    """A RESP command whose reply is an array of integers."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2.0)
    try:
        s.connect(path)
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(req)
        f = s.makefile("rb")
        head = f.readline().decode().strip()
        if not head.startswith("*"):
            raise OSError("redis: %s" % head)
        return [int(f.readline().decode().strip()[1:]) for _ in range(int(head[1:]))]
    finally:
        s.close()


class Stage(object):
    def __init__(self, c, spawn, short):
        self.c = c
        self.spawn = spawn
        self.short = short
        self.tmp = os.path.join(c.tmp, "kinds")
        os.makedirs(self.tmp, exist_ok=True)
        self.rsock = os.path.join(self.tmp, "redis.sock")
        self.dsock = [os.path.join(self.tmp, "d%d.sock" % i) for i in range(KI_DAEMONS)]
        self.daemons = [None] * KI_DAEMONS
        self.workers = {}           # wid -> its process
        self.winc = {}              # wid -> its incarnation (unique per process)
        self.wdaemon = {}
        self.rnd = random.Random(c.args.seed + 13)
        self.faults = []            # (label, t)
        self.redis = None
        self.tracker = None
        # the semaphore
        self.srnd = random.Random(c.args.seed + 17)
        self.sworkers = {}          # semaphore worker id -> its process
        self.sinc = {}              # semaphore worker id -> its incarnation
        self.sfaults = []           # dict(label, t, kind, permits, ok)
        self.stracker = None
        self.sinit = None           # SEMINIT's reply
        self.sem_end = {}           # the end: STATUS per daemon, Redis's keys, trouble

    def start_dlockd(self, i):
        conf = os.path.join(self.tmp, "d%d.conf" % i)
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n[redis]\nurl = unix://%s\n[lock]\nlease_ms = %d\n"
                    % (self.dsock[i], self.rsock, KI_LEASE_MS))
        os.chmod(conf, 0o600)
        self.daemons[i] = self.spawn([self.c.dlockd_bin, "-c", conf], "dlockd-kinds%d.log" % i)
        if not _wait(lambda: _info_up(self.dsock[i]), 10.0):
            raise RuntimeError("kinds stage: dlockd %d did not come up" % i)

    def start_worker(self, wid):
        d = wid % KI_DAEMONS
        inc = self.winc[wid] = max(self.winc.values(), default=-1) + 1
        self.workers[wid] = self.spawn(
            [sys.executable, os.path.abspath(__file__), "worker", str(inc), self.dsock[d],
             self.tracker.path, str(self.rnd.randrange(1 << 30))], "kinds-w%d.log" % wid)
        self.wdaemon[wid] = d

    def kill_worker(self, wid):
        """Its section ends in the tracker first: the hold it may have lasts
        until its connection closes, after the kill, so no conflicting grant
        can come in between."""
        self.tracker.kill([self.winc[wid]])
        self.workers[wid].send_signal(signal.SIGKILL)
        self.workers[wid].wait()

    def start_sem_worker(self, swid):
        d = swid % KI_DAEMONS
        inc = self.sinc[swid] = max(self.sinc.values(), default=-1) + 1
        self.sworkers[swid] = self.spawn(
            [sys.executable, os.path.abspath(__file__), "semworker", str(inc), str(d),
             self.dsock[d], self.stracker.path, str(self.srnd.randrange(1 << 30))],
            "kinds-s%d.log" % swid)

    def kill_sem_holder(self):
        """SIGKILLs a semaphore worker that holds permits (any, if none does
        within a second) and starts another; the fault's record."""
        inside = []
        end = time.monotonic() + 1.0
        while not inside and time.monotonic() < end:
            by_inc = dict((self.sinc[w], w) for w in self.sworkers)
            inside = sorted(inc for inc, _, _ in self.stracker.inside() if inc in by_inc)
            if not inside:
                time.sleep(0.002)
        swid = (by_inc[self.srnd.choice(inside)] if inside
                else self.srnd.randrange(KS_WORKERS))
        k = self.stracker.kill([self.sinc[swid]])
        t = time.monotonic()
        self.sworkers[swid].send_signal(signal.SIGKILL)
        self.sworkers[swid].wait()
        f = dict(label="semaphore worker %d SIGKILL (holding %d)" % (swid, k), t=t,
                 kind="worker", permits=k, ok=self.sem_progress(t))
        self.start_sem_worker(swid)
        return f

    def progress(self, since):
        """Both kinds granted since `since`, within the bound."""
        bound = KI_PROGRESS_S * (2 if self.short else 1)

        def both():
            with self.tracker.lock:
                kinds = set(m for t, _, m, _ in self.tracker.grants if t >= since)
            return kinds == {"R", "W"}
        return _wait(both, bound)

    def sem_progress(self, since, daemon=None):
        """1- and 2-permit grants since `since` (and one by `daemon`'s
        workers), within the bound."""
        bound = KI_PROGRESS_S * (2 if self.short else 1)

        def both():
            with self.stracker.cond:
                g = [x for x in self.stracker.grants if x[0] >= since and not x[5]]
            return (set(x[3] for x in g) == {1, 2} and
                    (daemon is None or any(x[2] == daemon for x in g)))
        return _wait(both, bound)

    def run(self):
        c = self.c
        self.redis = self.spawn(["redis-server", "--port", "0", "--unixsocket", self.rsock,
                                 "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                                 "--dir", self.tmp], "kinds-redis.log")
        self.hist = [history.History(os.path.join(self.c.tmp, "history-kinds-%s.jsonl" % k))
                     for k in ("rw", "sem")]
        self.tracker = Tracker(os.path.join(self.tmp, "tracker.sock"), self.hist[0])
        self.stracker = SemTracker(os.path.join(self.tmp, "semtracker.sock"), self.hist[1])
        if not _wait(lambda: os.path.exists(self.rsock), 10.0):
            raise RuntimeError("kinds stage: redis-server did not start")
        for i in range(KI_DAEMONS):
            self.start_dlockd(i)
        self.sinit = _call(self.dsock[0], "SEMINIT %s %d" % (KS_NAME, KS_PERMITS))
        for wid in range(KI_WORKERS):
            self.start_worker(wid)
        for swid in range(KS_WORKERS):
            self.start_sem_worker(swid)
        c.say("kinds: redis-server, %d dlockd, %d workers on %s (%d%% writes), %d on the "
              "semaphore %s of %d permits (SEMINIT: %s)"
              % (KI_DAEMONS, KI_WORKERS, KI_NAME, KI_WRITE_PCT, KS_WORKERS, KS_NAME,
                 KS_PERMITS, self.sinit))
        t0 = time.monotonic()
        ok_start = self.progress(t0)
        ok_sem_start = self.sem_progress(t0)
        time.sleep(1.0 if self.short else 3.0)
        kills = 3 if self.short else 9
        for k in range(kills):
            wid = self.rnd.randrange(KI_WORKERS)
            self.kill_worker(wid)
            t = time.monotonic()
            self.faults.append(("worker %d SIGKILL" % wid, t, self.progress(t)))
            self.start_worker(wid)
            self.sfaults.append(self.kill_sem_holder())
        d = 1
        # with a semaphore worker of it holding permits, if one does within 2 s
        _wait(lambda: any(x[2] == d for x in self.stracker.inside()), 2.0, 0.002)
        self.tracker.kill([self.winc[w] for w, x in self.wdaemon.items() if x == d], dead=False)
        ghosts = self.stracker.begin_kill(d)
        t_kill = time.monotonic()
        self.daemons[d].send_signal(signal.SIGKILL)
        self.daemons[d].wait()
        t = time.monotonic()
        self.stracker.end_kill(d, t)
        self.start_dlockd(d)
        t_up = time.monotonic()
        self.faults.append(("dlockd %d SIGKILL and restart" % d, t, self.progress(t)))
        self.sfaults.append(dict(label="dlockd %d SIGKILL and restart (its workers holding %d)"
                                 % (d, ghosts), t=t_kill, t_up=t_up, kind="dlockd", daemon=d,
                                 permits=ghosts, ok=self.sem_progress(t, daemon=d)))
        # The dead daemon's permits come back when their lease ends, up to
        # KS_LEASE_MS after the kill: the run goes on until live holders hold
        # them all again (or the check's bound passes), then as long again
        # as every other fault gets.
        dead_s = (KS_LEASE_MS + KS_DEAD_SLACK_MS * (3 if self.short else 1)) / 1000.0
        _wait(lambda: self.stracker.full_since(t_kill), max(0.0, t_kill + dead_s - time.monotonic()),
              0.01)
        time.sleep(1.0 if self.short else 3.0)
        self.stop_sem_workers()
        for wid in self.workers:
            self.kill_worker(wid)
        for i, p in enumerate(self.daemons):
            alive = p.poll() is None
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(KI_STOP_S)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "no exit within %.0f s" % KI_STOP_S
            # with every stage's: "each exits 0 on SIGTERM", and the log scan
            c.daemon_stops.append(("kinds dlockd %d" % i, alive, rc))
        self.redis.terminate()
        self.redis.wait()
        self.tracker.close()
        self.stracker.close()
        self.analyse(ok_start, time.monotonic() - t0)
        self.analyse_sem(ok_sem_start, time.monotonic() - t0)
        self.check_histories()

    def check_histories(self):
        """history.py's read/write lock and semaphore models over what the
        trackers recorded (history-kinds-rw.jsonl, -sem.jsonl)."""
        for h in self.hist:
            h.close()
        rw = history.check_rwlock(history.load(self.hist[0].path))
        sem = history.check_semaphore(history.load(self.hist[1].path), KS_PERMITS,
                                      KS_TOL_MS / 1000.0)
        self.c.check("kinds: the history checker: a writer alone, write fences unique and "
                     "rising, reads between; never more than %d permits" % KS_PERMITS,
                     not rw.violations and not sem.violations and rw.sections and sem.sections,
                     "read/write lock: %d ops, %d names, %d sections; semaphore: %d ops, %d "
                     "holdings, up to %d permits at once%s"
                     % (rw.ops, rw.names, rw.sections, sem.ops, sem.sections,
                        max(sem.peak.values() or [0]),
                        "; first violation: " + (rw.violations + sem.violations)[0]
                        if rw.violations or sem.violations else ""))

    def stop_sem_workers(self):
        """Every semaphore worker ends its section, releases, quits and exits
        0; then STATUS on every daemon, and Redis's keys, must say that every
        permit is free."""
        trouble = self.sem_end["trouble"] = []
        self.stracker.stop()
        deadline = time.monotonic() + KI_STOP_S
        for swid, p in sorted(self.sworkers.items()):
            try:
                rc = p.wait(max(0.1, deadline - time.monotonic()))
                if rc != 0:
                    trouble.append("semaphore worker %d exited with %s" % (swid, rc))
            except subprocess.TimeoutExpired:
                trouble.append("semaphore worker %d did not stop within %.0f s; killed"
                               % (swid, KI_STOP_S))
                self.stracker.kill([self.sinc[swid]])
                p.kill()
                p.wait()
        t = time.monotonic()
        want = "OK SEM %d 0" % KS_PERMITS
        status = self.sem_end["status"] = {}
        for i in range(KI_DAEMONS):
            last = [None]

            def free():
                try:
                    last[0] = _call(self.dsock[i], "STATUS %s" % KS_NAME)
                except OSError as e:
                    last[0] = str(e)
                return last[0] == want
            ok = _wait(free, KS_END_S, 0.005)
            status[i] = (ok, last[0], time.monotonic() - t)
        try:
            self.sem_end["redis"] = _redis_ints(
                self.rsock, "EVAL", _SEM_KEYS_LUA, "2", KS_KEY, "{%s}:timeout" % KS_KEY)
        except OSError as e:
            self.sem_end["redis"] = str(e)

    def analyse(self, ok_start, seconds):
        c, tr = self.c, self.tracker
        reads = sum(1 for g in tr.grants if g[2] == "R")
        writes = len(tr.grants) - reads
        c.check("kinds: never a writer alongside anyone on a read/write lock (%d readers and "
                "writers over %d dlockd, %d worker kills, a dlockd kill)"
                % (KI_WORKERS, KI_DAEMONS, len(self.faults) - 1),
                not tr.violations and reads > 0 and writes > 0,
                "%d read and %d write grants in %.1f s, up to %d readers inside at once; %s"
                % (reads, writes, seconds, tr.max_readers,
                   "no overlap" if not tr.violations else "overlaps: %s" % tr.violations[:5]))
        bad = []
        last_w = 0
        for t, _, mode, fence in tr.grants:
            if mode == "W":
                if fence <= last_w:
                    bad.append("write fence %d after %d" % (fence, last_w))
                last_w = fence
        for t, _, mode, fence in tr.grants:
            if mode != "R":
                continue
            before = [f for te, _, m, f in tr.ends if m == "W" and te < t]
            if before and fence < max(before):
                bad.append("read fence %d below the write %d that ended before it"
                           % (fence, max(before)))
        c.check("kinds: write fences rise strictly; a read's fence is at least every write's "
                "that ended before it", not bad and writes > 0,
                "%d writes, %d reads; %s" % (writes, reads, "; ".join(bad[:5]) or "ok"))
        c.check("kinds: readers share (two or more inside at once)", tr.max_readers >= 2,
                "up to %d readers inside at once" % tr.max_readers)
        late = [f[0] for f in self.faults if not f[2]]
        c.check("kinds: reads and writes are granted again after every fault",
                ok_start and not late,
                "%d faults; %s" % (len(self.faults),
                                   "late: %s" % late if late or not ok_start else "ok"))

    def dump_sem(self):
        """The semaphore's record, for a look after a failure (kinds/sem-trace.txt
        in the kept temp dir): faults, then every grant with the permits
        counted after it, and the broken connections."""
        st = self.stracker
        with open(os.path.join(self.tmp, "sem-trace.txt"), "w") as f:
            for x in self.sfaults:
                f.write("fault %.3f %s ok=%s\n" % (x["t"], x["label"], x["ok"]))
            f.write("# grant: t incarnation dlockd permits lease ghost t_req live ghosts\n")
            for g, (_, live, gh) in zip(st.grants, st.levels):
                f.write("grant %.4f %d %d %d %d %d %.4f %d %d\n" % (g + (live, gh)))
            for t, inc, d, since in st.broken:
                f.write("broken %.4f %d %s %.4f\n" % (t, inc, d, since))
            for t, inc, d, o in st.odd:
                f.write("odd %.4f %d %s %s\n" % (t, inc, d, o))
            for v in st.violations:
                f.write("violation %s\n" % v)

    def analyse_sem(self, ok_start, seconds):
        c, st = self.c, self.stracker
        self.dump_sem()
        P = KS_PERMITS
        grants = [g for g in st.grants if not g[5]]
        ones = sum(1 for g in grants if g[3] == 1)
        leased = sum(1 for g in grants if g[4])
        holder_kills = sum(1 for f in self.sfaults if f["kind"] == "worker")
        c.check("kinds: never more than %d permits held of a semaphore of %d (%d workers over "
                "%d dlockd, %d holder kills, a dlockd kill)"
                % (P, P, KS_WORKERS, KI_DAEMONS, holder_kills),
                self.sinit == "OK 1" and not st.violations and ones and len(grants) - ones,
                "SEMINIT %s; %d grants in %.1f s (%d of 1 permit, %d of 2; %d with a lease, "
                "%d overstayed it; %d TRYACQUIRE timeouts; %d holdings took more, %d gave back "
                "part first); %d ghost holding(s) of the killed dlockd (%d reported late); %s"
                % (self.sinit, len(grants), seconds, ones, len(grants) - ones, leased,
                   st.overstays, st.timeouts, st.extended, st.partial, len(st.ghosts),
                   st.late_ghosts,
                   "never above %d" % P if not st.violations else
                   "%d over-grants (%d of them only counting the killed dlockd's "
                   "permits):%s" % (len(st.violations), st.ghost_violations,
                                    "".join("\n      " + v for v in st.violations[:5]))))
        at_p = sum(1 for _, live, gh in st.levels if live + gh == P)
        c.check("kinds: the semaphore's permits are shared (%d held at once)" % P,
                st.max_sum >= P,
                "up to %d permits held at once; %d of %d grants made it %d"
                % (st.max_sum, at_p, len(st.levels), P))
        back_ms = KS_BACK_MS * (4 if self.short else 1)
        dead_ms = KS_LEASE_MS + KS_DEAD_SLACK_MS * (3 if self.short else 1)
        # an overstayed lease keeps its permits until it ends: a 2-permit head
        # (first come, first served) may have to wait for it, whatever came back
        overs = [(g[0], g[6] + g[4] / 1000.0 + 0.1) for g in st.grants
                 if g[4] == KS_SHORT_LEASE_MS]
        late, rows = [], []
        for f in self.sfaults:
            if f["kind"] == "worker":
                # held by others beyond what the victim's permits left them
                bound, need = back_ms, P - f["permits"]
                for _ in overs:
                    end = f["t"] + bound / 1000.0
                    o_end = max([o1 for o0, o1 in overs if o0 < end and o1 > f["t"]] or [0])
                    if o_end + back_ms / 1000.0 <= end:
                        break
                    bound = (o_end - f["t"]) * 1000 + back_ms
                hit = next((t for t, live, gh in st.levels
                            if t > f["t"] and live + gh > need), None) if f["permits"] else None
                if bound > back_ms:
                    f["label"] += " (an overstayed lease in the way: within %.0f ms)" % bound
            else:
                # every permit held by live holders: the dead daemon's are all back
                bound = dead_ms
                hit = next((t for t, live, gh in st.levels if t > f["t"] and live == P), None)
            ms = None if hit is None else (hit - f["t"]) * 1000
            rows.append("%s: %s%s" % (f["label"], "granted on" if f["ok"] else "NO PROGRESS",
                                      "" if not f["permits"] and f["kind"] == "worker" else
                                      ", permits back in %s ms" % (
                                          "(never)" if ms is None else "%.0f" % ms)))
            if not f["ok"] or (f["permits"] or f["kind"] != "worker") and (ms is None or
                                                                              ms > bound):
                late.append(f["label"])
        c.check("kinds: 1- and 2-permit grants after every fault (and on the restarted dlockd); "
                "a killed holder's permits granted again within %d ms, a dead dlockd's within "
                "%d ms" % (back_ms, dead_ms),
                ok_start and not late,
                "%s%s" % ("" if ok_start else "NO GRANTS AT THE START; ",
                          "\n      ".join(rows)))
        kd = [f for f in self.sfaults if f["kind"] == "dlockd"]
        stall_ms = KS_STALL_MS * (2 if self.short else 1)
        # Waits are excused while a dlockd kill (until its permits' lease
        # ends) or an overstayed lease keeps permits taken: what counts of a
        # wait is its longest stretch outside those. A wait cut short by the
        # dlockd kill (its connection broke) counts until the kill.
        excused = sorted([(f["t"], f["t"] + (KS_LEASE_MS + KS_DEAD_SLACK_MS) / 1000.0)
                          for f in kd] + overs)

        def unexcused(a, b):
            longest, at = 0.0, a
            for w0, w1 in excused:
                if w1 <= at or w0 >= b:
                    continue
                longest = max(longest, w0 - at)
                at = max(at, w1)
            return max(longest, b - at) * 1000
        waits = sorted((unexcused(g[6], g[0]), g[0] - g[6], g[2], g[3], g[6], g[4])
                       for g in grants)
        waits += [(unexcused(since, t), t - since, d, 0, since, 0)
                  for t, _, d, since in st.broken if since]
        waits.sort()
        long_waits = [x for x in waits if x[0] > stall_ms]
        c.check("kinds: no acquisition waits longer than %d ms (but while the dlockd kill or an "
                "overstayed lease keeps permits taken)" % stall_ms,
                waits and not long_waits,
                "%d waits (%d wholly while excused); their longest stretches outside those: "
                "median %.1f ms, 99th percentile %.1f ms, longest %.1f ms%s"
                % (len(waits), sum(1 for x in waits if x[0] <= 0),
                   waits[len(waits) // 2][0] if waits else 0,
                   waits[len(waits) * 99 // 100][0] if waits else 0,
                   waits[-1][0] if waits else 0,
                   "".join("\n      %.0f ms (of %.0f) for %s by dlockd %d, asked at %.3f%s"
                           % (ms, all_s * 1000, "%d permit(s)" % k if k else
                              "permits (cut off by the kill)", d, t_req,
                              ", lease %d" % lease if lease else "")
                           for ms, all_s, d, k, t_req, lease in long_waits[-8:])))
        stray = [b for b in st.broken
                 if not any(b[2] == f["daemon"] and b[0] >= f["t"] for f in kd)]
        # a restarted dlockd answers ERR BACKEND until its Redis connection is up
        # (the stage waits for INFO redis=up; a worker may ask before)
        early = [o for o in st.odd if "ERR_BACKEND" in o[3] and
                 any(o[2] == f["daemon"] and f["t"] <= o[0] <= f["t_up"] + 0.5 for f in kd)]
        odd = [o for o in st.odd if o not in early]
        c.check("kinds: every RELEASE answered OK <permits left> (after an overstayed lease: "
                "!LOST expired and ERR NOTHELD); connections broke only to the killed dlockd",
                not odd and not stray and st.outcomes,
                "%s; %d broken connection(s)%s%s%s"
                % (", ".join("%s %d" % kv for kv in sorted(st.outcomes.items())) or "no release",
                   len(st.broken),
                   "; %d ERR BACKEND from the restarted dlockd before its Redis was up"
                   % len(early) if early else "",
                   "".join("\n      odd: incarnation %d (dlockd %s) at %.3f: %s"
                           % (inc, d, t, o) for t, inc, d, o in odd[:5]),
                   "".join("\n      broke: incarnation %d (dlockd %s) at %.3f" % (inc, d, t)
                           for t, inc, d, _ in stray[:5])))
        status = self.sem_end.get("status", {})
        rd = self.sem_end.get("redis")
        ok_redis = isinstance(rd, list) and rd[0] + rd[1] == P and rd[2] == 0
        c.check("kinds: once every semaphore worker released and quit, STATUS says OK SEM %d 0 "
                "on every dlockd; in Redis available plus (expired) permit ids is %d, none alive"
                % (P, P),
                not self.sem_end.get("trouble") and len(status) == KI_DAEMONS and
                all(x[0] for x in status.values()) and ok_redis,
                "%s; Redis: %s%s"
                % ("; ".join("dlockd %d: %s after %.0f ms" % (i, x[1], x[2] * 1000)
                             for i, x in sorted(status.items())) or "no STATUS",
                   "%d available, %d permit ids, %d alive" % tuple(rd)
                   if isinstance(rd, list) and len(rd) == 3 else rd,
                   "".join("\n      " + x for x in self.sem_end.get("trouble", []))))


def run_stage(c, spawn, short):
    Stage(c, spawn, short).run()


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "worker":
        try:
            worker(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
        except (KeyboardInterrupt, BrokenPipeError, ConnectionResetError):
            pass
        sys.exit(0)
    if len(sys.argv) == 7 and sys.argv[1] == "semworker":
        try:
            sem_worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5],
                       int(sys.argv[6]))
        except (KeyboardInterrupt, BrokenPipeError, ConnectionResetError):
            pass
        sys.exit(0)
    sys.exit("usage: kinds.py worker <incarnation> <dlockd-socket> <tracker-socket> <seed>\n"
             "       kinds.py semworker <incarnation> <daemon> <dlockd-socket> "
             "<tracker-socket> <seed>")
