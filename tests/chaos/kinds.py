"""The chaos suite's lock-kinds stage: a read/write lock under contention
and faults, and the invariant that no writer ever holds it alongside anyone.

One redis-server (Unix socket) and two dlockd (watchdog mode, lease
KI_LEASE_MS); KI_WORKERS worker processes (this file run as `worker`), half
on each daemon, loop on one name: RLOCK or (KI_WRITE_PCT of the time) WLOCK,
report the grant to the tracker, stay 1-4 ms, report the end, RUNLOCK or
WUNLOCK. The tracker (a thread of the orchestrator, on a Unix socket) keeps
who is inside and records a violation when a writer enters while anyone is
inside, or anyone enters while a writer is. A section is reported after its
grant's reply and ended before its unlock is sent, so a tracked section lies
inside the real hold: an overlap of tracked sections is an overlap of holds.

Faults: workers SIGKILLed (the orchestrator ends their section just before
the kill: their hold lasts until the connection closes, after it, and what
they still send is ignored), and one dlockd SIGKILLed and restarted (its
workers' sections end just before the kill: their holds die with the
daemon's connections, as the docs say, and the keys it left in Redis keep
the others out until their lease runs out).

Checks: no overlap; write fences rise strictly in grant order and a read's
fence is at least that of every write that ended before it was granted;
readers did share (two or more inside at once); both kinds were granted
after every fault; and, with every stage's daemons, each exits 0 on
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

KI_NAME = "chaos-rw"
KI_DAEMONS = 2
KI_WORKERS = 8
KI_WRITE_PCT = 25
KI_LEASE_MS = 1000
KI_PROGRESS_S = 5.0          # both kinds granted within this after a fault (short run: x2)
KI_STOP_S = 10.0             # workers and daemons end within this


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
            d.write("%s %s\n" % ("WLOCK" if write else "RLOCK", KI_NAME))
            d.flush()
            r = _line(d)
            if not r.startswith("OK "):
                raise EOFError
            tell("G %d %s %s" % (inc, "W" if write else "R", r.split()[1]))
            time.sleep(rnd.uniform(0.001, 0.004))
            tell("E %d" % inc)
            d.write("%s %s\n" % ("WUNLOCK" if write else "RUNLOCK", KI_NAME))
            d.flush()
            _line(d)
        except (EOFError, OSError):
            d = None
            time.sleep(0.02)


# ---- the tracker ------------------------------------------------------------------

class Tracker(object):
    def __init__(self, path):
        self.path = path
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
                        self.enter(t, int(w[1]), w[2], int(w[3]))
                    else:
                        self.leave(t, int(w[1]))
                f.write("OK\n")
                f.flush()
        except (OSError, ValueError, IndexError):
            pass

    def enter(self, t, inc, mode, fence):
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

    def progress(self, since):
        """Both kinds granted since `since`, within the bound."""
        bound = KI_PROGRESS_S * (2 if self.short else 1)

        def both():
            with self.tracker.lock:
                kinds = set(m for t, _, m, _ in self.tracker.grants if t >= since)
            return kinds == {"R", "W"}
        return _wait(both, bound)

    def run(self):
        c = self.c
        self.redis = self.spawn(["redis-server", "--port", "0", "--unixsocket", self.rsock,
                                 "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                                 "--dir", self.tmp], "kinds-redis.log")
        self.tracker = Tracker(os.path.join(self.tmp, "tracker.sock"))
        if not _wait(lambda: os.path.exists(self.rsock), 10.0):
            raise RuntimeError("kinds stage: redis-server did not start")
        for i in range(KI_DAEMONS):
            self.start_dlockd(i)
        for wid in range(KI_WORKERS):
            self.start_worker(wid)
        c.say("kinds: redis-server, %d dlockd, %d workers on %s (%d%% writes)"
              % (KI_DAEMONS, KI_WORKERS, KI_NAME, KI_WRITE_PCT))
        t0 = time.monotonic()
        ok_start = self.progress(t0)
        time.sleep(1.0 if self.short else 3.0)
        kills = 3 if self.short else 9
        for k in range(kills):
            wid = self.rnd.randrange(KI_WORKERS)
            self.kill_worker(wid)
            t = time.monotonic()
            self.faults.append(("worker %d SIGKILL" % wid, t, self.progress(t)))
            self.start_worker(wid)
        d = 1
        self.tracker.kill([self.winc[w] for w, x in self.wdaemon.items() if x == d], dead=False)
        self.daemons[d].send_signal(signal.SIGKILL)
        self.daemons[d].wait()
        t = time.monotonic()
        self.start_dlockd(d)
        self.faults.append(("dlockd %d SIGKILL and restart" % d, t, self.progress(t)))
        time.sleep(1.0 if self.short else 3.0)
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
        self.analyse(ok_start, time.monotonic() - t0)

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


def run_stage(c, spawn, short):
    Stage(c, spawn, short).run()


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "worker":
        try:
            worker(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]))
        except (KeyboardInterrupt, BrokenPipeError, ConnectionResetError):
            pass
        sys.exit(0)
    sys.exit("usage: kinds.py worker <incarnation> <dlockd-socket> <tracker-socket> <seed>")
