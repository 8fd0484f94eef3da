"""The chaos suite's election stage: candidates churning under faults, observers on every daemon.

One redis-server (Unix socket) and two dlockd (lease EL_LEASE_MS) serve one
election, EL_NAME. EL_WORKERS candidate processes (this file run as
`worker`), half on each daemon, loop: ELECT (EL_LEASE_PCT of the time with a
lease of EL_SHORT_LEASE_MS that they let run out, waiting for
`!LOST <name> expired`; otherwise kept by the watchdog), report the grant
(fence, when the request was sent, when the answer came, the lease) on
their stdout, lead 2-30 ms, report the end, RESIGN. The orchestrator reads
the reports, keeps one observer connection (OBSERVE) on each daemon in a
thread, and injects faults: candidates SIGKILLed while they lead (the
leader's connection closes: the next candidate leads at once), and one
dlockd SIGKILLed while one of its candidates leads, then started again
(its leader is replaced when the lease ends).

Invariants:
  - at most one leader at a time: the tracked leaderships never overlap.
    A leadership is tracked from its grant's answer until its end's report,
    a killed candidate's until its SIGKILL, a leased one's at most until
    (request sent) + lease - EL_TOL_MS, a dead daemon's candidate's until
    the daemon's SIGKILL: each lies inside the real hold in Redis, so an
    overlap is a double grant (the fence would tell its holders apart, but
    none may happen without a fault of Redis, and Redis has none here);
  - the fences of grants rise in the order of the grants;
  - every observer's fences rise strictly (the same one again only after a
    NONE), on each connection and across its reconnects;
  - after every fault a leader is granted within its bound (a killed
    leader: EL_HANDOVER_S; an expired or dead daemon's: its lease plus
    EL_HANDOVER_S);
  - at the end, after the candidates stop, one last leader is elected and
    every observer is told it, and LEADER on every daemon says it.

Every dlockd exits 0 on SIGTERM; the suite scans their logs
(dlockd-elect<N>.log) for sanitizer reports.
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

EL_NAME = "chaos-election"
EL_DAEMONS = 2
EL_WORKERS = 6
EL_LEASE_MS = 1000
EL_SHORT_LEASE_MS = 300
EL_LEASE_PCT = 10
EL_TOL_MS = 50
EL_HANDOVER_S = 3.0
EL_STOP_S = 10.0


def _wait(fn, timeout, interval=0.01):
    end = time.monotonic() + timeout
    while True:
        if fn():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(interval)


def _call(path, line, timeout=2.0):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(path)
        s.sendall((line + "\n").encode())
        f = s.makefile("rb")
        r = f.readline().decode().strip()
        s.close()
        return r
    except OSError as e:
        return "(%s)" % e


def _info_up(path):
    r = _call(path, "INFO", 1.0)
    return " redis=up " in " %s " % r


# ---- the candidate process ------------------------------------------------------------

def worker(wid, inc, dsock, seed):
    rnd = random.Random(seed)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(dsock)
    f = s.makefile("rb")

    def say(text):
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def line():
        r = f.readline()
        if not r:
            raise EOFError
        return r.decode().strip()

    value = "w%d.%d" % (wid, inc)
    while True:
        leased = rnd.randrange(100) < EL_LEASE_PCT
        lease = EL_SHORT_LEASE_MS if leased else 0
        t_req = time.monotonic()
        s.sendall(("ELECT %s %s%s\n" % (EL_NAME, value, " %d" % lease if lease else "")).encode())
        r = line()
        if not r.startswith("OK "):
            say("X %s" % r)
            time.sleep(0.05)
            continue
        say("G %s %.6f %.6f %d" % (r.split()[1], t_req, time.monotonic(), lease))
        if leased:
            r = line()
            say("L %.6f %s" % (time.monotonic(), r))
            s.sendall(("RESIGN %s\n" % EL_NAME).encode())
            say("R %s" % line())
        else:
            time.sleep(rnd.uniform(0.002, 0.030))
            say("E %.6f" % time.monotonic())
            s.sendall(("RESIGN %s\n" % EL_NAME).encode())
            say("R %s" % line())
        time.sleep(rnd.uniform(0.0, 0.02))


# ---- observers ------------------------------------------------------------------------

class Observer(object):
    """One OBSERVE connection to a daemon, reconnecting while the stage runs;
    everything told, in order: (t, fence) with 0 for NONE, and the
    reconnects (t, -1)."""

    def __init__(self, path, hist=None, proc=None):
        self.path = path
        self.hist = hist
        self.proc = proc
        self.told = []
        self.lock = threading.Lock()
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _note(self, fence):
        with self.lock:
            self.told.append((time.monotonic(), fence))
            if self.hist:
                self.hist.record(proc=self.proc, name=EL_NAME, op="observe", t0=self.told[-1][0],
                                 t1=self.told[-1][0], res="", fence=fence)

    def _run(self):
        while self.running:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(0.5)
                s.connect(self.path)
                s.sendall(("OBSERVE %s\n" % EL_NAME).encode())
                f = s.makefile("rb")
                first = True
                self._note(-1)
                while self.running:
                    try:
                        raw = f.readline()
                    except socket.timeout:
                        continue
                    if not raw:
                        break
                    w = raw.decode().split()
                    if first and w and w[0] == "OK":
                        first = False
                        self._note(0 if w[1] == "NONE" else int(w[1]))
                    elif len(w) >= 3 and w[0] == "!LEADER":
                        self._note(0 if w[2] == "NONE" else int(w[2]))
                s.close()
            except OSError:
                pass
            time.sleep(0.05)

    def last(self):
        with self.lock:
            for t, f in reversed(self.told):
                if f >= 0:
                    return f
        return None

    def stop(self):
        self.running = False
        self.thread.join(2.0)


# ---- the stage ------------------------------------------------------------------------

class Stage(object):
    def __init__(self, c, spawn, short):
        self.c = c
        self.spawn = spawn
        self.short = short
        self.tmp = os.path.join(c.tmp, "elect")
        os.makedirs(self.tmp, exist_ok=True)
        self.rsock = os.path.join(self.tmp, "redis.sock")
        self.dsock = [os.path.join(self.tmp, "d%d.sock" % i) for i in range(EL_DAEMONS)]
        self.daemons = [None] * EL_DAEMONS
        self.workers = {}        # wid -> process
        self.winc = {}           # wid -> incarnation
        self.rnd = random.Random(c.args.seed + 23)
        self.lock = threading.Lock()
        # leaderships: dict(inc, d, fence, t_req, t_ok, lease, t_end, how)
        self.leads = []
        self.open = {}           # inc -> its open leadership
        self.bad_lines = []
        self.faults = []         # (label, t, bound_s)
        self.observers = []
        self.hist = history.History(os.path.join(c.tmp, "history-elect.jsonl"))

    def start_dlockd(self, i):
        conf = os.path.join(self.tmp, "d%d.conf" % i)
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n%s[redis]\nurl = unix://%s\n[lock]\nlease_ms = %d\n"
                    % (self.dsock[i], self.c.log_level(), self.rsock, EL_LEASE_MS))
        os.chmod(conf, 0o600)
        self.daemons[i] = self.spawn([self.c.dlockd_bin, "-c", conf], "dlockd-elect%d.log" % i)
        if not _wait(lambda: _info_up(self.dsock[i]), 10.0):
            raise RuntimeError("elect stage: dlockd %d did not come up" % i)

    def start_worker(self, wid):
        d = wid % EL_DAEMONS
        inc = self.winc[wid] = max(self.winc.values(), default=-1) + 1
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "worker", str(wid),
                              str(inc), self.dsock[d], str(self.rnd.randrange(1 << 30))],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.workers[wid] = p
        p.reader = threading.Thread(target=self._read, args=(p, inc, d), daemon=True)
        p.reader.start()

    def _reap(self, wids, t, how):
        """SIGKILLs the workers wids, reads what each printed before it died
        (a grant may still sit unread in its pipe), and ends each one's open
        leadership at t, the moment the kill was decided: a grant read only
        now was answered before t, so it is ended there too instead of
        staying open for ever."""
        for wid in wids:
            self.workers[wid].send_signal(signal.SIGKILL)
        for wid in wids:
            p = self.workers[wid]
            p.wait()
            p.reader.join(5.0)
            if p.reader.is_alive():
                self.c.problem("elect: w%d's output still unread 5 s after its SIGKILL"
                               % self.winc[wid])
        with self.lock:
            for wid in wids:
                self._end(self.winc[wid], t, how)

    def _read(self, p, inc, d):
        for raw in p.stdout:
            w = raw.decode().split()
            with self.lock:
                if not w:
                    continue
                if w[0] == "G":
                    rec = dict(inc=inc, d=d, fence=int(w[1]), t_req=float(w[2]),
                               t_ok=float(w[3]), lease=int(w[4]), t_end=None, how=None)
                    self.leads.append(rec)
                    self.open[inc] = rec
                    self.hist.record(proc="w%d" % inc, name=EL_NAME, op="elect",
                                     t0=rec["t_req"], t1=rec["t_ok"], res="ok",
                                     fence=rec["fence"], lease=rec["lease"])
                elif w[0] == "E" and inc in self.open:
                    self._end(inc, float(w[1]), "resigned")
                elif w[0] == "L" and inc in self.open:
                    if "expired" not in raw.decode():
                        self.bad_lines.append("w%d: %s" % (inc, raw.decode().strip()))
                    self._end(inc, None, "expired")
                elif w[0] == "X":
                    self.bad_lines.append("w%d: %s" % (inc, raw.decode().strip()))

    def _end(self, inc, t, how):
        rec = self.open.pop(inc, None)
        if rec is None or rec["t_end"] is not None:
            return
        if t is not None and t < rec["t_ok"]:
            t = rec["t_ok"]    # a grant read after its daemon's kill: it ended no earlier
        if rec["lease"]:
            cap = rec["t_req"] + (rec["lease"] - EL_TOL_MS) / 1000.0
            t = cap if t is None else min(t, cap)
        rec["t_end"] = t
        rec["how"] = how
        # the end as the model takes it: an UNLOCK sent then (sorted after its grant)
        self.hist.record(proc="w%d" % inc, name=EL_NAME, op="resign", t0=t,
                         t1=max(t, rec["t_ok"]), res=how)

    def kill_worker(self, wid, how="killed"):
        self._reap([wid], time.monotonic(), how)

    def leader_now(self):
        """A worker that leads now (its grant reported, no end), or None."""
        with self.lock:
            by_inc = dict((self.winc[w], w) for w in self.workers)
            for inc, rec in self.open.items():
                if inc in by_inc and not rec["lease"]:
                    return by_inc[inc], rec
        return None, None

    def granted_since(self, t):
        with self.lock:
            return any(r["t_ok"] > t for r in self.leads)

    def fault_kill_leader(self):
        wid, rec = None, None
        _wait(lambda: self.leader_now()[0] is not None, 2.0, 0.001)
        wid, rec = self.leader_now()
        if wid is None:
            self.c.problem("elect: no watchdog leader to kill within 2 s")
            return
        t = time.monotonic()
        self.kill_worker(wid)
        self.faults.append(("leader w%d (fence %d) SIGKILL" % (self.winc[wid], rec["fence"]), t,
                            EL_HANDOVER_S))
        self.start_worker(wid)

    def fault_kill_dlockd(self):
        """SIGKILLs the dlockd of a leader; its workers' leaderships end at
        the kill (Redis keeps the leader's until its lease ends); starts it
        and its workers again."""
        _wait(lambda: self.leader_now()[0] is not None, 2.0, 0.001)
        wid, rec = self.leader_now()
        d = rec["d"] if rec else 0
        t = time.monotonic()
        self.daemons[d].send_signal(signal.SIGKILL)
        self.daemons[d].wait()
        self.faults.append(("dlockd %d SIGKILL%s" % (d, " (its candidate leads)" if rec else ""),
                            t, EL_LEASE_MS / 1000.0 + EL_HANDOVER_S))
        self._reap([w for w in self.workers if w % EL_DAEMONS == d], t, "its dlockd killed")
        self.start_dlockd(d)
        for w in list(self.workers):
            if w % EL_DAEMONS == d:
                self.start_worker(w)

    def run(self):
        c = self.c
        self.redis = self.spawn(["redis-server", "--port", "0", "--unixsocket", self.rsock,
                                 "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                                 "--dir", self.tmp], "elect-redis.log")
        if not _wait(lambda: os.path.exists(self.rsock), 10.0):
            raise RuntimeError("elect stage: redis-server did not start")
        for i in range(EL_DAEMONS):
            self.start_dlockd(i)
        self.observers = [Observer(p, self.hist, "observer%d" % i)
                          for i, p in enumerate(self.dsock)]
        for wid in range(EL_WORKERS):
            self.start_worker(wid)
        c.say("elect: redis-server, %d dlockd (lease %d ms), %d candidates on %s, an observer "
              "on each daemon" % (EL_DAEMONS, EL_LEASE_MS, EL_WORKERS, EL_NAME))
        t0 = time.monotonic()
        churn = 1.0 if self.short else 3.0
        time.sleep(churn)
        for _ in range(2 if self.short else 5):
            self.fault_kill_leader()
            time.sleep(churn / 2)
        self.fault_kill_dlockd()
        time.sleep(EL_LEASE_MS / 1000.0 + churn)
        # the end: candidates stop, one last leader, everyone agrees
        for wid in list(self.workers):
            self.kill_worker(wid, "stopped")
        time.sleep(EL_LEASE_MS / 1000.0 + 0.2)
        fs = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # leads while open
        fs.settimeout(EL_LEASE_MS / 1000.0 + 5)
        fs.connect(self.dsock[0])
        t_req = time.monotonic()
        fs.sendall(("ELECT %s final\n" % EL_NAME).encode())
        try:
            final = fs.makefile("rb").readline().decode().strip()
        except OSError as e:
            final = "(%s)" % e
        if final.startswith("OK "):
            self.hist.record(proc="final", name=EL_NAME, op="elect", t0=t_req,
                             t1=time.monotonic(), res="ok", fence=int(final.split()[1]))
        self.final = final
        fence = int(final.split()[1]) if final.startswith("OK ") else None
        agree = fence is not None and _wait(
            lambda: all(o.last() == fence for o in self.observers), EL_HANDOVER_S)
        leaders = [_call(p, "LEADER %s" % EL_NAME) for p in self.dsock]
        fs.close()
        for o in self.observers:
            o.stop()
        stops = []
        for i, p in enumerate(self.daemons):
            alive = p.poll() is None
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(EL_STOP_S)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "no exit within %.0f s" % EL_STOP_S
            c.daemon_stops.append(("elect dlockd %d" % i, alive, rc))
            stops.append(rc)
        self.redis.terminate()
        self.redis.wait()
        self.analyse(fence, agree, leaders, time.monotonic() - t0)

    def analyse(self, fence, agree, leaders, took):
        c = self.c
        with self.lock:
            leads = sorted(self.leads, key=lambda r: r["t_ok"])
        # at most one leader at a time
        overlaps = []
        for a, b in zip(leads, leads[1:]):
            end = a["t_end"] if a["t_end"] is not None else float("inf")
            if b["t_ok"] < end:
                overlaps.append("fence %d (w%d, %s) until %.3f, fence %d (w%d) from %.3f"
                                % (a["fence"], a["inc"], a["how"], end, b["fence"], b["inc"],
                                   b["t_ok"]))
        c.check("elect: at most one leader at a time (%d leaderships)" % len(leads),
                leads and not overlaps, "%d overlaps%s" % (len(overlaps), "".join(
                    "\n      " + o for o in overlaps[:5])))
        down = [(a["fence"], b["fence"]) for a, b in zip(leads, leads[1:])
                if b["fence"] <= a["fence"]]
        c.check("elect: grants' fences rise in grant order", not down,
                "%d falls: %s" % (len(down), down[:5]))
        # observers
        bad = []
        for i, o in enumerate(self.observers):
            last, none = 0, True
            for t, f in o.told:
                if f == -1:
                    none = True      # a new connection: its answer may repeat the last
                    continue
                if f == 0:
                    none = True
                    continue
                if f < last or (f == last and not none):
                    bad.append("observer %d: %d after %d" % (i, f, last))
                last, none = f, False
        told = sum(len([x for x in o.told if x[1] > 0]) for o in self.observers)
        c.check("elect: observers' fences rise strictly (%d leaders told)" % told,
                told > 0 and not bad, "; ".join(bad[:5]) or "none told")
        # progress after every fault
        slow = []
        for label, t, bound in self.faults:
            if not _wait(lambda: self.granted_since(t), 0.0):
                slow.append("%s: no leader within %.1f s" % (label, bound))
                continue
            with self.lock:
                first = min(r["t_ok"] for r in self.leads if r["t_ok"] > t)
            if first - t > bound:
                slow.append("%s: the next leader after %.2f s (bound %.1f)" % (label, first - t,
                                                                           bound))
        c.check("elect: a leader after every fault within its bound (%d faults)"
                % len(self.faults), self.faults and not slow, "; ".join(slow) or
                ", ".join("%s" % f[0] for f in self.faults))
        expired = len([r for r in leads if r["how"] == "expired"])
        c.check("elect: leased leaders hear !LOST expired, every RESIGN answers",
                not self.bad_lines, "%d expired; %s" % (expired, "; ".join(self.bad_lines[:5])))
        want = "OK %d final" % fence if fence else None
        c.check("elect: every observer and LEADER agree on the last leader at the end",
                fence and agree and all(l == want for l in leaders),
                "ELECT: %s; observers' last: %s; LEADER: %s"
                % (self.final, [o.last() for o in self.observers], leaders))
        self.hist.close()
        r = history.check_election(history.load(self.hist.path))
        c.check("elect: the history checker: one leader at a time, fences unique and rising, "
                "observers' fences rising (the same only after NONE)",
                not r.violations and r.sections and r.told,
                "%d ops, %d names, %d leaderships, %d fences told%s"
                % (r.ops, r.names, r.sections, r.told,
                   "; first violation: " + r.first() if r.violations else ""))
        c.say("elect: %d leaderships (%d expired), %d faults, %.1f s"
              % (len(leads), expired, len(self.faults), took))


def run_stage(c, spawn, short):
    Stage(c, spawn, short).run()


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "worker":
        try:
            worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
        except (KeyboardInterrupt, BrokenPipeError, ConnectionResetError, EOFError, OSError):
            pass
        sys.exit(0)
    sys.exit("usage: elect.py worker <id> <incarnation> <dlockd-socket> <seed>")
