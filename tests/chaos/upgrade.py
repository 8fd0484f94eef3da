"""The chaos suite's live-restore stage (issue 39): one dlockd handed over
to a new process of itself (SIGUSR2) again and again while its workers
contend, judged by the history checker.

One redis-server (Unix socket) and one dlockd (watchdog mode, lease
UP_LEASE_MS). UP_WORKERS threads, each on ONE connection for the whole
stage (the hand-over must keep it), loop: take a name -> write the fenced
store with the fence -> stay 1-5 ms -> UNLOCK; every operation, event and
store verdict goes to history-upgrade.jsonl. How a worker takes its name:
LOCK of one of UP_NAMES (UP_TRY_PCT of the time TRYLOCK with a wait of
UP_TRY_WAIT_MS: a wait's time left rides the hand-over too), or, for the
last UP_FAIR_WORKERS workers, FAIRLOCK of UP_FAIR_NAME (a place in Redis's
queue). Every release of a name thus has local waiters queued behind it. A
keeper connection holds UP_KEEP_NAME from start to end, and a contender's
LOCK of it waits all that time: granted before the keeper's UNLOCK at the
end, it is a second holder (a hold the hand-over lost, or let run out in
Redis); not granted right after it, the wait was lost. Both go to the
history too.

The fault: every UP_GAP_S (at random within it), SIGUSR2 to the daemon's
pid as INFO tells it, then INFO polled (on an admin connection that stays
open too) until upgrades went up by one, within UP_HANDOVER_S (the daemon's
own 10 s bound on a new process, and slack); upgrade_failures going up is a
failure of the stage, as is a hand-over not awaited. The old process must
exit 0 and the new one serve (pid changed); before the next signal a worker
must be granted again. The stage makes this process a child subreaper
(prctl PR_SET_CHILD_SUBREAPER) so that each new daemon, a child of the old
one, becomes its child when the old one exits: its exit status is read
like any other's, and the stage ends it however it ends.

Judged: the history checker (no two holders at once, fences unique and
rising in grant order, the store takes only the highest) over the whole
stage, hand-overs included; every hand-over done (none failed, the old
process exits 0, the log has one "upgrade: took over from pid" per
hand-over and no "upgrade failed"); no worker's, the keeper's or the admin's
connection closed, no !LOST or any other event, no ERR, every request
answered within UP_REPLY_S, every worker granted; the keeper's STATUS at
the end shows the fence it was granted, and the contender is granted once
the keeper lets go, with a greater fence; INFO's counters carried over
(grants at least the grants the workers saw, connections_total at least
the stage's connections); the last daemon exits 0 on SIGTERM (with the
suite's log checks). The short run (make test) hands over for UP_SHORT_S,
the full run (make chaos) for UP_FULL_S.
"""
# SPDX-License-Identifier: MIT

import ctypes
import os
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kinds import _wait  # noqa: E402
from netfaults import Conn  # noqa: E402
import history  # noqa: E402

UP_WORKERS = 8
UP_FAIR_WORKERS = 2          # the last ones: FAIRLOCK of UP_FAIR_NAME
UP_NAMES = ("chaos-up-a", "chaos-up-b")
UP_FAIR_NAME = "chaos-up-fair"
UP_KEEP_NAME = "chaos-up-keep"
UP_TRY_PCT = 20
UP_TRY_WAIT_MS = 3000
UP_LEASE_MS = 5000
UP_GAP_S = (0.5, 1.0)        # between one hand-over done and the next signal
UP_SHORT_S = 9.0             # hand-overs for this long (make test)
UP_FULL_S = 30.0             # (make chaos)
UP_HANDOVER_S = 20.0         # signal -> INFO upgrades went up (the daemon gives up at 10 s)
UP_EXIT_S = 10.0             # upgrades went up -> the old process exited
UP_PROGRESS_S = 10.0         # a hand-over done -> a worker granted
UP_REPLY_S = 30.0            # a request's reply awaited at most this long
UP_DRAIN_S = 15.0            # stop -> every worker's last request answered
UP_INFO_EVERY_S = 0.02
UP_STOP_S = 10.0             # the last daemon ends within this of SIGTERM
PR_SET_CHILD_SUBREAPER = 36


def subreaper(on):
    """This process adopts the orphans among its descendants (on) or not."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) != 0:
        raise RuntimeError("upgrade stage: prctl(PR_SET_CHILD_SUBREAPER): %s"
                           % os.strerror(ctypes.get_errno()))


class Adopted(object):
    """A daemon a hand-over started: a child of the old process, ours (the
    subreaper's) once that one exits. As much of Popen as the stage uses
    (poll, wait, send_signal, kill, returncode, pid)."""

    def __init__(self, pid, logname):
        self.pid = pid
        self.logname = logname
        self.returncode = None

    def poll(self):
        if self.returncode is not None:
            return self.returncode
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            # Not ours yet (its parent runs), or reaped by someone else.
            if os.path.exists("/proc/%d" % self.pid):
                return None
            self.returncode = "unknown (not our child)"
            return self.returncode
        if pid == 0:
            return None
        self.returncode = (os.WEXITSTATUS(status) if os.WIFEXITED(status)
                           else -os.WTERMSIG(status))
        return self.returncode

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise TimeoutError("pid %d still runs" % self.pid)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self):
        self.send_signal(signal.SIGKILL)


def info_of(line):
    if line is None or not line.startswith("OK "):
        return None
    return dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)


class Stage(object):
    def __init__(self, c, spawn, short):
        self.c = c
        self.spawn = spawn
        self.short = short
        self.label = "upgrade"
        self.tmp = os.path.join(c.tmp, self.label)
        os.makedirs(self.tmp, exist_ok=True)
        self.rnd = random.Random(c.args.seed + 39)
        self.rsock = os.path.join(self.tmp, "redis.sock")
        self.dsock = os.path.join(self.tmp, "d.sock")
        self.logname = "dlockd-%s.log" % self.label
        self.hist = history.History(os.path.join(c.tmp, "history-%s.jsonl" % self.label))
        self.store = history.FencedStore(self.hist)
        self.stop = threading.Event()
        self.mu = threading.Lock()
        self.daemon = None                    # the process serving now (Popen or Adopted)
        self.redis = None
        self.conns = {}                       # proc -> Conn: must never close
        self.threads = []
        self.grants = []                      # (t, proc) of every worker grant
        self.bad = []                         # (proc, what): ERR, closed, unanswered, events
        self.longest = (0.0, None)            # the slowest reply a worker saw: (s, what)
        self.handovers = []                   # dict(t0, t1, old, new, ms, bytes, rc)
        self.failures = []                    # what went wrong with a hand-over
        self.keep_fence = None
        self.keep_status = None
        self.contender = None                 # (its grant's reply, when) once it came
        self.final_info = None
        self.adopted = []                     # every Adopted: ended however the stage ends

    # -- processes --

    def start_redis(self):
        self.redis = self.spawn(["redis-server", "--port", "0", "--unixsocket", self.rsock,
                                 "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                                 "--dir", self.tmp], "%s-redis.log" % self.label)
        if not _wait(lambda: os.path.exists(self.rsock), 10.0):
            raise RuntimeError("upgrade stage: redis-server did not start")

    def start_dlockd(self):
        conf = os.path.join(self.tmp, "d.conf")
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n%s[redis]\nurl = unix://%s\n[lock]\nlease_ms = %d\n"
                    % (self.dsock, self.c.log_level(), self.rsock, UP_LEASE_MS))
        os.chmod(conf, 0o600)
        self.daemon = self.spawn([self.c.dlockd_bin, "-c", conf], self.logname)
        if not _wait(self.up, 10.0):
            raise RuntimeError("upgrade stage: dlockd did not come up")

    def up(self):
        try:
            c = Conn(self.dsock)
        except OSError:
            return False
        try:
            x = info_of(c.call("INFO", 2.0))
        except OSError:
            return False
        finally:
            c.close()
        return x is not None and x.get("redis") == "up"

    # -- the workload --

    def connect(self, proc):
        c = Conn(self.dsock, self.hist, proc)
        self.conns[proc] = c
        return c

    def note(self, proc, what):
        with self.mu:
            self.bad.append((proc, what))

    def call(self, c, proc, line):
        """line's reply, timed; None (noted) if the connection broke or no
        reply came within UP_REPLY_S."""
        t0 = time.monotonic()
        try:
            r = c.call(line, UP_REPLY_S)
        except OSError as e:
            self.note(proc, "%s: the connection broke: %s" % (line, e))
            return None
        dt = time.monotonic() - t0
        if r is None:
            self.note(proc, "%s: no reply within %.0f s" % (line, UP_REPLY_S))
        with self.mu:
            if dt > self.longest[0]:
                self.longest = (dt, "%s %s" % (proc, line))
        return r

    def worker(self, wid, c):
        proc = "w%d" % wid
        rnd = random.Random(self.rnd.randrange(1 << 30))
        fair = wid >= UP_WORKERS - UP_FAIR_WORKERS
        while not self.stop.is_set():
            if fair:
                name, line = UP_FAIR_NAME, "FAIRLOCK %s" % UP_FAIR_NAME
            else:
                name = rnd.choice(UP_NAMES)
                line = ("TRYLOCK %s %d" % (name, UP_TRY_WAIT_MS)
                        if rnd.randrange(100) < UP_TRY_PCT else "LOCK %s" % name)
            op = self.hist.invoke(proc, name, "lock")
            r = self.call(c, proc, line)
            if r is None:
                self.hist.complete(op, "info")
                return
            if r.startswith("TIMEOUT"):
                self.hist.complete(op, "timeout")
                continue
            if not r.startswith("OK "):
                self.hist.complete(op, r)
                self.note(proc, "%s: %s" % (line, r))
                time.sleep(0.05)
                continue
            fence = int(r.split()[1])
            self.hist.complete(op, "ok", fence=fence)
            with self.mu:
                self.grants.append((time.monotonic(), proc))
            try:
                c.poll()
                self.store.write(proc, name, fence)
                c.poll(rnd.uniform(0.001, 0.005))
            except OSError as e:
                self.note(proc, "in its section on %s: %s" % (name, e))
                self.hist.event(proc, name, "closed", str(e))
                return
            op = self.hist.invoke(proc, name, "unlock")
            r = self.call(c, proc, "UNLOCK %s" % name)
            self.hist.complete(op, "info" if r is None else r)
            if r is None:
                return
            if r != "OK 0":
                self.note(proc, "UNLOCK %s: %s" % (name, r))

    def contend(self, c, op):
        """The contender's LOCK of UP_KEEP_NAME (sent): its reply, whenever
        it comes, recorded as it arrives."""
        try:
            r = c.reply(UP_FULL_S + UP_DRAIN_S + 2 * UP_REPLY_S)
        except OSError as e:
            self.note("contender", "LOCK %s: the connection broke: %s" % (UP_KEEP_NAME, e))
            r = None
        if r is None:
            self.hist.complete(op, "info")
            return
        self.contender = (r, time.monotonic())
        if r.startswith("OK "):
            self.hist.complete(op, "ok", fence=int(r.split()[1]))
        else:
            self.hist.complete(op, r)

    def start_workers(self):
        for wid in range(UP_WORKERS):
            c = self.connect("w%d" % wid)
            t = threading.Thread(target=self.worker, args=(wid, c), daemon=True)
            t.start()
            self.threads.append((t, "w%d" % wid))

    def granted_since(self, t):
        with self.mu:
            return any(g >= t for g, _ in self.grants)

    # -- the fault --

    def info(self):
        x = info_of(self.call(self.admin, "admin", "INFO"))
        if x is None:
            raise RuntimeError("upgrade stage: INFO failed (see the stage's notes: %s)"
                               % (self.bad[-1:] or "none"))
        return x

    def handover(self):
        """One SIGUSR2, awaited. Returns False when the stage cannot go on."""
        x = self.info()
        if not all(k in x for k in ("pid", "upgrades", "upgrade_failures")):
            self.failures.append("INFO has no pid, upgrades or upgrade_failures: %s"
                                 % " ".join("%s=%s" % kv for kv in sorted(x.items())))
            return False
        pid, u0, f0 = int(x["pid"]), int(x["upgrades"]), int(x["upgrade_failures"])
        if pid != self.daemon.pid:
            self.failures.append("INFO says pid %d, the daemon is pid %d" % (pid, self.daemon.pid))
            return False
        t0 = time.monotonic()
        os.kill(pid, signal.SIGUSR2)
        end = t0 + UP_HANDOVER_S
        while True:
            x = self.info()
            if int(x["upgrade_failures"]) > f0:
                self.failures.append("hand-over %d: upgrade_failures %s -> %s (pid %s serves on)"
                                     % (len(self.handovers) + 1, f0, x["upgrade_failures"],
                                        x["pid"]))
                return False
            if int(x["upgrades"]) > u0:
                break
            if time.monotonic() > end:
                self.failures.append("hand-over %d: upgrades stayed %d for %.0f s after SIGUSR2 "
                                     "to pid %d" % (len(self.handovers) + 1, u0, UP_HANDOVER_S,
                                                    pid))
                return False
            time.sleep(UP_INFO_EVERY_S)
        t1 = time.monotonic()
        new = int(x["pid"])
        rec = dict(t0=t0, t1=t1, old=pid, new=new, ms=int(x.get("upgrade_ms", -1)),
                   bytes=int(x.get("upgrade_state_bytes", -1)), rc=None, ups=int(x["upgrades"]))
        self.handovers.append(rec)
        if rec["ups"] != u0 + 1:
            self.failures.append("hand-over %d: upgrades %d -> %d" % (len(self.handovers), u0,
                                                                       rec["ups"]))
        if new == pid:
            self.failures.append("hand-over %d: upgrades went up, the pid (%d) did not change"
                                 % (len(self.handovers), pid))
            return False
        old = self.daemon
        self.daemon = Adopted(new, self.logname)
        self.adopted.append(self.daemon)
        try:
            rec["rc"] = old.wait(UP_EXIT_S)
        except Exception:
            rec["rc"] = "still running %.0f s later" % UP_EXIT_S
        if rec["rc"] != 0:
            self.failures.append("hand-over %d: the old process (pid %d) %s"
                                 % (len(self.handovers), pid,
                                    "exited %s" % rec["rc"] if isinstance(rec["rc"], int)
                                    else rec["rc"]))
            return False
        if not _wait(lambda: self.granted_since(t1), UP_PROGRESS_S, 0.005):
            self.failures.append("hand-over %d: no worker granted within %.0f s after it"
                                 % (len(self.handovers), UP_PROGRESS_S))
            return False
        return True

    # -- the run --

    def run(self):
        subreaper(True)
        try:
            self._run()
        finally:
            for p in self.adopted:        # a stage cut short: none outlives the suite
                if p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                    p.kill()
                    try:
                        p.wait(5.0)
                    except TimeoutError:
                        pass
            subreaper(False)

    def _run(self):
        c = self.c
        self.start_redis()
        self.start_dlockd()
        self.admin = self.connect("admin")
        keeper = self.connect("keeper")
        op = self.hist.invoke("keeper", UP_KEEP_NAME, "lock")
        r = self.call(keeper, "keeper", "LOCK %s" % UP_KEEP_NAME)
        if r is None or not r.startswith("OK "):
            raise RuntimeError("upgrade stage: the keeper's LOCK %s: %s" % (UP_KEEP_NAME, r))
        self.keep_fence = int(r.split()[1])
        self.hist.complete(op, "ok", fence=self.keep_fence)
        contender = self.connect("contender")
        cop = self.hist.invoke("contender", UP_KEEP_NAME, "lock")
        contender.s.sendall(("LOCK %s\n" % UP_KEEP_NAME).encode())
        ct = threading.Thread(target=self.contend, args=(contender, cop), daemon=True)
        ct.start()
        self.start_workers()
        c.say("%s: redis-server, one dlockd, %d workers on %s and (%d by FAIRLOCK) %s, a "
              "keeper on %s" % (self.label, UP_WORKERS, " ".join(UP_NAMES), UP_FAIR_WORKERS,
                                UP_FAIR_NAME, UP_KEEP_NAME))
        t0 = time.monotonic()
        if not _wait(lambda: self.granted_since(t0), UP_PROGRESS_S, 0.005):
            self.failures.append("no worker granted within %.0f s of the start" % UP_PROGRESS_S)
        until = t0 + (UP_SHORT_S if self.short else UP_FULL_S)
        while not self.failures and time.monotonic() < until:
            time.sleep(self.rnd.uniform(*UP_GAP_S))
            if not self.handover():
                break
        t_stop = time.monotonic()
        c.say("%s: %d hand-overs in %.1f s%s" % (self.label, len(self.handovers), t_stop - t0,
                                                "; " + self.failures[0] if self.failures else ""))
        self.stop.set()
        stuck = []
        for t, proc in self.threads:
            t.join(max(0.0, t_stop + UP_DRAIN_S - time.monotonic()))
            if t.is_alive():
                stuck.append(proc)
        r = self.call(keeper, "keeper", "STATUS %s" % UP_KEEP_NAME)
        self.keep_status = r
        op = self.hist.invoke("keeper", UP_KEEP_NAME, "unlock")
        r = self.call(keeper, "keeper", "UNLOCK %s" % UP_KEEP_NAME)
        self.hist.complete(op, "info" if r is None else r)
        ct.join(UP_REPLY_S)
        if self.contender is not None and self.contender[0].startswith("OK "):
            op = self.hist.invoke("contender", UP_KEEP_NAME, "unlock")
            r = self.call(contender, "contender", "UNLOCK %s" % UP_KEEP_NAME)
            self.hist.complete(op, "info" if r is None else r)
        try:
            self.final_info = self.info()
        except RuntimeError:
            self.final_info = None
        for proc, cn in self.conns.items():
            try:
                cn.poll()          # the last events, if any
            except OSError as e:
                self.note(proc, "at the end: %s" % e)
            if cn.events:
                self.note(proc, "events: %s" % "; ".join(l for _, l in cn.events[:3]))
            cn.close()
        self.stop_daemon()
        self.hist.close()
        self.analyse(stuck, time.monotonic() - t0)

    def stop_daemon(self):
        p = self.daemon
        alive = p.poll() is None
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(UP_STOP_S)
        except Exception:
            p.kill()
            rc = "no exit within %.0f s" % UP_STOP_S
        self.c.daemon_stops.append(("%s dlockd (pid %d, after %d hand-overs)"
                                    % (self.label, p.pid, len(self.handovers)), alive, rc))
        self.redis.terminate()
        self.redis.wait()

    # -- the judgement --

    def log_lines(self):
        try:
            with open(os.path.join(self.c.tmp, self.logname), "rb") as f:
                return f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return []

    def analyse(self, stuck, seconds):
        c = self.c
        ops = history.load(self.hist.path)
        r = history.check(ops)
        n = len(self.handovers)
        per = {}
        for _, proc in self.grants:
            per[proc] = per.get(proc, 0) + 1
        c.check("%s: the history checker across %d hand-overs: no two holders at once, fences "
                "unique and rising, the store takes only the highest (%d workers on %d names, a "
                "keeper and its contender on another)"
                % (self.label, n, UP_WORKERS, len(UP_NAMES) + 1),
                not r.violations and r.sections > 0,
                "%d ops, %d sections in %.1f s, %d indeterminate%s"
                % (r.ops, r.sections, seconds, r.indeterminate,
                   "; first violation: " + r.violations[0] if r.violations else ""))

        lines = self.log_lines()
        took = [l for l in lines if "upgrade: took over from pid" in l]
        failed = [l for l in lines if "upgrade failed" in l]
        ms = sorted(h["ms"] for h in self.handovers)
        want_n = 3 if self.short else 10
        c.check("%s: every hand-over done: SIGUSR2 -> INFO upgrades up by one within %.0f s, "
                "upgrade_failures unchanged, a new pid, the old one exits 0, a worker granted "
                "after it; the log: one 'took over' per hand-over, no 'upgrade failed' "
                "(at least %d hand-overs)" % (self.label, UP_HANDOVER_S, want_n),
                not self.failures and n >= want_n and len(took) == n and not failed,
                "%d hand-overs%s; upgrade_ms min/median/max %s; state %s bytes; %d 'took over' "
                "lines%s%s"
                % (n, ", each awaited %.0f-%.0f ms" % (
                    min(h["t1"] - h["t0"] for h in self.handovers) * 1000,
                    max(h["t1"] - h["t0"] for h in self.handovers) * 1000) if n else "",
                   "%d/%d/%d" % (ms[0], ms[len(ms) // 2], ms[-1]) if ms else "-",
                   "/".join(str(h["bytes"]) for h in self.handovers[:3]) or "-",
                   len(took), "; " + "; ".join(self.failures[:3]) if self.failures else "",
                   "; " + "; ".join(l.strip()[:200] for l in failed[:2]) if failed else ""))

        fin = self.final_info or {}
        seen_grants = len(self.grants) + 1 + (self.contender is not None)
        ks = (self.keep_status or "").split()
        keep_ok = (len(ks) == 5 and ks[:3] == ["OK", "MINE", "1"] and
                   ks[4] == str(self.keep_fence))
        cr = (self.contender or ("none", 0))[0].split()
        cont_ok = (len(cr) == 3 and cr[0] == "OK" and cr[1].isdigit() and
                   int(cr[1]) > (self.keep_fence or 0))
        counters_ok = (int(fin.get("grants", -1)) >= seen_grants and
                       int(fin.get("connections_total", -1)) >= len(self.conns))
        workers_ok = all(per.get("w%d" % w, 0) > 0 for w in range(UP_WORKERS))
        c.check("%s: no connection closed, no !LOST or other event, no ERR, every request "
                "answered within %.0f s, every worker granted; the keeper's hold kept its fence, "
                "its contender granted after it; INFO's counters carried over"
                % (self.label, UP_REPLY_S),
                not self.bad and not stuck and keep_ok and cont_ok and counters_ok and workers_ok,
                "grants by worker %s; the slowest reply %.0f ms (%s); the keeper's STATUS %r "
                "(its grant's fence %s), the contender's LOCK %r; INFO grants=%s (the workload "
                "saw %d) connections_total=%s%s%s"
                % ("/".join(str(per.get("w%d" % w, 0)) for w in range(UP_WORKERS)),
                   self.longest[0] * 1000, self.longest[1], self.keep_status, self.keep_fence,
                   (self.contender or ("none",))[0],
                   fin.get("grants"), seen_grants, fin.get("connections_total"),
                   "; stuck at the stop: " + " ".join(stuck) if stuck else "",
                   "; " + "; ".join("%s %s" % b for b in self.bad[:4]) if self.bad else ""))


def run_stage(c, spawn, short):
    Stage(c, spawn, short).run()
