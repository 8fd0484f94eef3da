"""The chaos suite's multi-name lock stage: MLOCK sets of overlapping names
under contention and faults, and the invariants that no name is ever held by
two sets (or a set and a plain LOCK) at once and that each name's fences rise
strictly in grant order.

One redis-server (Unix socket) and two dlockd (watchdog mode, lease
ML_LEASE_MS) serve ML_NAMES names. ML_WORKERS worker processes (this file
run as `worker`), half on each daemon, loop: pick 2 or 3 of the names in a
random order, MLOCK them (ML_TRY_PCT of the time TRYMLOCK with a wait of 0,
20 or 100 ms; ML_LEASE_PCT of the time with a lease of ML_LEASE_MS), report
the grant (each name with its fence) to the tracker, stay 1-4 ms, report the
end, MUNLOCK them (which must answer OK and a 0 per name). ML_SINGLE workers
take one name at a time with LOCK, as single lockers do, reported likewise.
The tracker (a thread of the orchestrator, on a Unix socket) records a
violation when a grant has a name someone else is inside, and when a name's
fence is not above the last fence granted for it. A section is reported
after its grant's reply and ended before its MUNLOCK is sent, so a tracked
section lies inside the real holds.

Faults, as the kinds stage's: workers SIGKILLed at random (the tracker ends
their section just before the kill: their holds last until the connection
closes, after it) and one dlockd SIGKILLed and restarted (its workers'
sections end just before the kill: their holds die with its connections,
and the keys it left in Redis keep the others out until their lease ends).

Each name also has a fenced store (store.py, one per name, named
mlock-<name> for history.check_stores, which judges them with the other
stages' at the end of the run): a worker granted a set reads and writes
each name's store with that name's fence (read-modify-write), and reports
the section's end there once its MUNLOCK or UNLOCK answered.

The stage runs twice: on one redis-server, and on a Redis Cluster of
ML_PRIMARIES primaries (no replicas) with names ML_CNAMES, two of them
sharing a slot (a common {tag}: their sets are one script) and the others
spread over the primaries (sets across slots: one script per slot, in
order, undone when a later slot refuses). On the Cluster, the shared slot
and then another name's slot move to another primary (CLUSTER SETSLOT,
MIGRATE one key at a time) while the workers go on, between the worker
kills and the dlockd kill.

It runs a third time on a quorum of ML_QNODES independent redis-servers
(quorum.py; rejoin_delay_ms ML_QREJOIN_MS) with names ML_QNAMES: each set
is one script per node, granted on a majority of the nodes for the whole
set. One node is SIGSTOPped for ML_QPAUSE_S and resumed, then another
SIGKILLed and restarted empty (it counts again rejoin_delay_ms later),
between the worker kills and the dlockd kill; "no name left" then means on
no node.

Checks: no overlap on any name; fences rise strictly per name; sets were
granted (of 2 and of 3 names) and single LOCKs too, on both daemons, within
ML_PROGRESS_S of every fault (ML_LEASE_MS more after the dlockd kill); at the
end, every worker gone, no name is left in Redis; with every stage's
daemons, each exits 0 on SIGTERM without a sanitizer report (logs
dlockd-mlock<N>.log).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, keyslot  # noqa: E402
from kinds import _info_up, _line, _redis_ints, _wait  # noqa: E402
from quorum import Quorum  # noqa: E402
from redisproc import call  # noqa: E402
import store  # noqa: E402

ML_NAMES = ["chaos-m%d" % i for i in range(5)]
ML_CNAMES = ["{chaos-mc}a", "{chaos-mc}b", "chaos-mc2", "chaos-mc3", "chaos-mc4"]
ML_PRIMARIES = 3
ML_DAEMONS = 2
ML_WORKERS = 8
ML_SINGLE = 2                # of ML_WORKERS: single-name LOCK workers
ML_LEASE_MS = 1000
ML_LEASE_PCT = 20
ML_TRY_PCT = 20
ML_PROGRESS_S = 5.0          # sets granted within this after a fault (short run: x2)
ML_STOP_S = 10.0             # daemons end within this
ML_END_S = 3.0               # no name left in Redis within this at the end
ML_WID_BASE = 900            # store worker ids: apart from the other stages'
ML_QNAMES = ["chaos-mq%d" % i for i in range(5)]
ML_QNODES = 3
ML_QREJOIN_MS = 2000         # the quorum's rejoin_delay_ms (>= the lease)
ML_QPAUSE_S = 2.0            # a node SIGSTOPped this long


# ---- the worker (a separate process) ------------------------------------------

def store_path(tmp, name):
    return os.path.join(tmp, "store-%s.sock" % name)


def worker(inc, single, dsock, tsock, seed, wid, daemon, names_arg):
    rnd = random.Random(seed)
    all_names = names_arg.split(",")
    tr = socket.socket(socket.AF_UNIX)
    tr.connect(tsock)
    tf = tr.makefile("rw", buffering=1)
    stores = {}
    for n in all_names:
        stores[n] = store.connect(store_path(os.path.dirname(tsock), n)).makefile(
            "rw", buffering=1)

    def tell(text, f=tf):
        f.write(text + "\n")
        f.flush()
        r = f.readline().strip()
        if f is tf and r != "OK":
            raise SystemExit(0)
        return r

    for n in all_names:
        tell("H %d %d %d %d" % (wid, inc, os.getpid(), daemon), stores[n])
    it = 0

    d = None
    while True:
        try:
            if d is None:
                s = socket.socket(socket.AF_UNIX)
                s.connect(dsock)
                d = s.makefile("rw", buffering=1)
            names = rnd.sample(all_names, 1 if single else rnd.choice((2, 3)))
            lease = " %d" % ML_LEASE_MS if rnd.randrange(100) < ML_LEASE_PCT else ""
            if single:
                d.write("LOCK %s%s\n" % (names[0], lease))
            elif rnd.randrange(100) < ML_TRY_PCT:
                d.write("TRYMLOCK %d %s %d%s\n" % (len(names), " ".join(names),
                                                    rnd.choice((0, 20, 100)), lease))
            else:
                d.write("MLOCK %d %s%s\n" % (len(names), " ".join(names), lease))
            t_req = time.monotonic()
            d.flush()
            r = _line(d)
            if r.startswith("TIMEOUT"):
                continue
            w = r.split()
            if w[0] != "OK" or len(w) != (3 if single else len(names) + 1):
                raise EOFError
            t_grant = time.monotonic()
            fences = w[1:2] if single else w[1:]
            it += 1
            tell("G %d %s" % (inc, " ".join("%s:%s" % x for x in zip(names, fences))))
            for n, f in zip(names, fences):
                v = tell("R %d %d %d %d %s %.6f %.6f" % (wid, inc, it, daemon, f, t_grant, t_req),
                         stores[n])
                if v == "Q":
                    raise SystemExit(0)
                v = int(v.split()[1])
                tell("W %d %d %d %s %d %d" % (wid, inc, it, f, v, v + 1), stores[n])
            time.sleep(rnd.uniform(0.001, 0.004))
            tell("E %d" % inc)
            t_end = time.monotonic()
            if single:
                d.write("UNLOCK %s\n" % names[0])
            else:
                d.write("MUNLOCK %d %s\n" % (len(names), " ".join(names)))
            d.flush()
            r = _line(d)
            want = "OK 0" if single else "OK" + " 0" * len(names)
            outcome = "ok" if r == want else r.split()[0] if r.split() else "closed"
            for n in names:
                tell("E %d %d %d %.6f %s %.6f" % (wid, inc, it, t_end, outcome,
                                                  time.monotonic()), stores[n])
            if r != want:
                tell("X %d %s" % (inc, r.replace(" ", "_")))
        except (EOFError, OSError):
            d = None
            time.sleep(0.02)


# ---- the tracker ----------------------------------------------------------------

class Tracker(object):
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.inside = {}            # incarnation -> [(name, fence)], t
        self.dead = set()
        self.grants = []            # (t, incarnation, [(name, fence)])
        self.last_fence = {}        # name -> the last fence granted
        self.violations = []
        self.bad_unlocks = []
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
                    inc = int(w[1])
                    if inc in self.dead:
                        pass
                    elif w[0] == "G":
                        self.enter(t, inc, [(x.split(":")[0], int(x.split(":")[1]))
                                            for x in w[2:]])
                    elif w[0] == "X":
                        self.bad_unlocks.append((t, inc, " ".join(w[2:])))
                    else:
                        self.inside.pop(inc, None)
                f.write("OK\n")
                f.flush()
        except (OSError, ValueError, IndexError):
            pass

    def enter(self, t, inc, held):
        names = set(n for n, _ in held)
        for o, (oheld, _) in self.inside.items():
            both = names & set(n for n, _ in oheld)
            if o != inc and both:
                self.violations.append("at %.3f: %d granted %s while %d holds %s"
                                       % (t, inc, sorted(both), o, sorted(oheld)))
        for n, f in held:
            last = self.last_fence.get(n, 0)
            if f <= last:
                self.violations.append("at %.3f: %s fence %d after %d" % (t, n, f, last))
            self.last_fence[n] = max(last, f)
        self.inside[inc] = (held, t)
        self.grants.append((t, inc, held))

    def kill(self, incs, dead=True):
        with self.lock:
            for inc in incs:
                self.inside.pop(inc, None)
                if dead:
                    self.dead.add(inc)

    def since(self, t0):
        with self.lock:
            return [g for g in self.grants if g[0] >= t0]

    def close(self):
        self.closed = True
        self.srv.close()


# ---- the stage ----------------------------------------------------------------------

class Stage(object):
    def __init__(self, c, spawn, short, cluster=False, quorum=False):
        self.c = c
        self.spawn = spawn
        self.short = short
        self.cluster = None
        self.on_cluster = cluster
        self.qu = None
        self.on_quorum = quorum
        self.label = ("mlock-cluster" if cluster else "mlock-quorum" if quorum else "mlock")
        self.names = ML_CNAMES if cluster else ML_QNAMES if quorum else ML_NAMES
        self.tmp = os.path.join(c.tmp, self.label)
        os.makedirs(self.tmp, exist_ok=True)
        self.rsock = os.path.join(self.tmp, "redis.sock")
        self.dsock = [os.path.join(self.tmp, "d%d.sock" % i) for i in range(ML_DAEMONS)]
        self.daemons = [None] * ML_DAEMONS
        self.workers = {}
        self.winc = {}
        self.wdaemon = {}
        self.rnd = random.Random(c.args.seed + 26)
        self.faults = []            # (label, t, ok)
        self.tracker = None

    def start_dlockd(self, i):
        conf = os.path.join(self.tmp, "d%d.conf" % i)
        if self.cluster:
            redis = "cluster = %s\ncommand_timeout_ms = 2000\n" % self.cluster.addrs()
        elif self.qu:
            redis = ("quorum = %s\ncommand_timeout_ms = 2000\nrejoin_delay_ms = %d\n"
                     % (self.qu.urls(), ML_QREJOIN_MS))
        else:
            redis = "url = unix://%s\n" % self.rsock
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n[redis]\n%s[lock]\nlease_ms = %d\n"
                    % (self.dsock[i], redis, ML_LEASE_MS))
        os.chmod(conf, 0o600)
        self.daemons[i] = self.spawn([self.c.dlockd_bin, "-c", conf],
                                     "dlockd-%s%d.log" % (self.label, i))
        if not _wait(lambda: _info_up(self.dsock[i]), 10.0):
            raise RuntimeError("%s stage: dlockd %d did not come up" % (self.label, i))

    def start_worker(self, wid):
        d = wid % ML_DAEMONS
        inc = self.winc[wid] = max(self.winc.values(), default=-1) + 1
        single = 1 if wid < ML_SINGLE else 0
        self.workers[wid] = self.spawn(
            [sys.executable, os.path.abspath(__file__), "worker", str(inc), str(single),
             self.dsock[d], self.tracker.path, str(self.rnd.randrange(1 << 30)),
             str(ML_WID_BASE + wid), str(d), ",".join(self.names)],
            "%s-w%d.log" % (self.label, wid))
        self.wdaemon[wid] = d

    def kill_worker(self, wid):
        self.tracker.kill([self.winc[wid]])
        self.workers[wid].send_signal(signal.SIGKILL)
        self.workers[wid].wait()
        self.c.killed[(ML_WID_BASE + wid, self.winc[wid])] = time.monotonic()

    def progress(self, since, extra_s=0.0):
        """Sets of 2 and of 3 names and single LOCKs granted since `since`."""
        bound = ML_PROGRESS_S * (2 if self.short else 1) + extra_s

        def enough():
            sizes = set(len(g[2]) for g in self.tracker.since(since))
            return {1, 2, 3} <= sizes
        return _wait(enough, max(0.0, since + bound - time.monotonic()), 0.01)

    def exists(self, key):
        if self.qu is not None:
            return sum(call(self.qu.port(i), "EXISTS", key, timeout=2.0)
                       for i in range(ML_QNODES) if self.qu.running(i))
        if self.cluster is None:
            return _redis_ints(self.rsock, "EVAL", "return {redis.call('exists', KEYS[1])}",
                               "1", key)[0]
        return call(self.cluster.owner(keyslot(key)), "EXISTS", key, timeout=2.0)

    def migrate(self, name):
        """name's slot to the next primary, a key at a time, as a fault."""
        slot = keyslot("dlock:" + name)
        prims = self.cluster.primaries()
        src = self.cluster.owner(slot)
        dst = prims[(prims.index(src) + 1) % len(prims)]
        t = time.monotonic()
        rec = self.cluster.migrate(slot, dst, batch=1, between_s=0.01)
        self.c.say("%s: slot %d of %s :%d -> :%d, %d keys, %.0f ms"
                   % (self.label, slot, name, src, dst, rec["keys"],
                      (rec["t_agreed"] - t) * 1e3))
        self.faults.append(("slot of %s migrated" % name, t, self.progress(t)))

    def quorum_faults(self):
        """Node 0 paused and resumed, then node 1 killed and restarted."""
        t = self.qu.pause(0)
        time.sleep(ML_QPAUSE_S)
        self.faults.append(("quorum node 0 SIGSTOP %.0f s" % ML_QPAUSE_S, t, self.progress(t)))
        t = self.qu.resume(0)
        self.faults.append(("quorum node 0 SIGCONT", t, self.progress(t)))
        t = self.qu.kill(1)
        self.faults.append(("quorum node 1 SIGKILL", t, self.progress(t)))
        t = time.monotonic()
        self.qu.restart(1)
        self.faults.append(("quorum node 1 restarted empty", t, self.progress(t)))

    def run(self):
        c = self.c
        if self.on_quorum:
            self.qu = Quorum(self.tmp, ML_QNODES, spawn=self.spawn, say=c.say)
            self.qu.start()
        elif self.on_cluster:
            self.cluster = Cluster(self.tmp, primaries=ML_PRIMARIES, replicas=0,
                                   spawn=self.spawn, say=c.say)
            self.cluster.start()
        else:
            self.redis = self.spawn(["redis-server", "--port", "0", "--unixsocket", self.rsock,
                                     "--unixsocketperm", "700", "--save", "", "--appendonly",
                                     "no", "--dir", self.tmp], "mlock-redis.log")
        self.tracker = Tracker(os.path.join(self.tmp, "tracker.sock"))
        for n in self.names:
            st = store.FencedStore(store_path(self.tmp, n))
            st.lock_name = "%s-%s" % (self.label, n)
            c.stores.append(st)
        if (not self.on_cluster and not self.on_quorum
                and not _wait(lambda: os.path.exists(self.rsock), 10.0)):
            raise RuntimeError("mlock stage: redis-server did not start")
        for i in range(ML_DAEMONS):
            self.start_dlockd(i)
        for wid in range(ML_WORKERS):
            self.start_worker(wid)
        c.say("%s: %s, %d dlockd, %d workers (%d single-name) on %d names"
              % (self.label, "a %d-primary cluster" % ML_PRIMARIES if self.on_cluster
                 else "a quorum of %d nodes" % ML_QNODES if self.on_quorum
                 else "redis-server", ML_DAEMONS, ML_WORKERS, ML_SINGLE, len(self.names)))
        t0 = time.monotonic()
        ok_start = self.progress(t0)
        time.sleep(1.0 if self.short else 3.0)
        for k in range(3 if self.short else 9):
            wid = self.rnd.randrange(ML_WORKERS)
            self.kill_worker(wid)
            t = time.monotonic()
            self.faults.append(("worker %d SIGKILL" % wid, t, self.progress(t)))
            self.start_worker(wid)
            time.sleep(0.2)
            if self.on_cluster and k in (0, 2):
                self.migrate(self.names[0] if k == 0 else self.names[2])
            if self.on_quorum and k == 1:
                self.quorum_faults()
        d = 1
        self.tracker.kill([self.winc[w] for w, x in self.wdaemon.items() if x == d], dead=False)
        self.daemons[d].send_signal(signal.SIGKILL)
        self.daemons[d].wait()
        self.start_dlockd(d)
        t = time.monotonic()
        self.faults.append(("dlockd %d SIGKILL and restart" % d, t,
                            self.progress(t, ML_LEASE_MS / 1000.0)))
        time.sleep(1.0 if self.short else 3.0)
        for wid in list(self.workers):
            self.kill_worker(wid)
        keys = ["dlock:" + n for n in self.names]
        left = []

        def none_left():
            left[:] = [k for k in keys if self.exists(k)]
            return not left
        end_ok = _wait(none_left, ML_END_S)
        for i, p in enumerate(self.daemons):
            alive = p.poll() is None
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(ML_STOP_S)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "no exit within %.0f s" % ML_STOP_S
            c.daemon_stops.append(("%s dlockd %d" % (self.label, i), alive, rc))
        if self.cluster is not None:
            self.cluster.stop()
        elif self.qu is not None:
            self.qu.stop()
        else:
            self.redis.terminate()
            self.redis.wait()
        self.tracker.close()
        self.analyse(ok_start, time.monotonic() - t0, end_ok, left)

    def fault_summary(self):
        kills = sum(1 for f in self.faults if f[0].startswith("worker"))
        moves = sum(1 for f in self.faults if f[0].startswith("slot"))
        nodes = sum(1 for f in self.faults if f[0].startswith("quorum node"))
        return "%d worker kills, a dlockd kill%s%s" % (
            kills, ", %d slot migrations" % moves if moves else "",
            ", a node paused and one killed and restarted" if nodes else "")

    def analyse(self, ok_start, seconds, end_ok, left):
        c, tr = self.c, self.tracker
        by_size = {}
        for g in tr.grants:
            by_size[len(g[2])] = by_size.get(len(g[2]), 0) + 1
        c.check(self.label + ": no name held by two at once, fences rise strictly per name "
                "(%d workers over %d dlockd, faults: %s)"
                % (ML_WORKERS, ML_DAEMONS, self.fault_summary()),
                not tr.violations and by_size.get(2, 0) > 0 and by_size.get(3, 0) > 0,
                "grants by names: %s in %.1f s; %s"
                % (", ".join("%d: %d" % x for x in sorted(by_size.items())), seconds,
                   "no overlap" if not tr.violations else "; ".join(tr.violations[:5])))
        late = [f[0] for f in self.faults if not f[2]]
        c.check(self.label + ": sets of 2 and 3 names and single LOCKs granted at the start "
                "and after every fault", ok_start and not late,
                "late: %s" % (", ".join(late) or "none") +
                ("" if ok_start else "; none at the start"))
        c.check(self.label + ": every MUNLOCK and UNLOCK answered OK and 0 per name",
                not tr.bad_unlocks,
                "; ".join("%d: %s" % (x[1], x[2]) for x in tr.bad_unlocks[:5]) or "ok")
        c.check(self.label + ": no name left in Redis once every worker is gone", end_ok,
                "left: %s" % (", ".join(left) or "none"))


def run_stage(c, spawn, short):
    Stage(c, spawn, short).run()
    Stage(c, spawn, short, cluster=True).run()
    Stage(c, spawn, short, quorum=True).run()


if __name__ == "__main__":
    if len(sys.argv) == 10 and sys.argv[1] == "worker":
        try:
            worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5],
                   int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8]), sys.argv[9])
        except (KeyboardInterrupt, BrokenPipeError, ConnectionResetError):
            pass
        sys.exit(0)
    sys.exit("usage: mlock.py worker <incarnation> <single> <dlockd-socket> <tracker-socket> "
             "<seed> <store-wid> <daemon> <names,...>")
