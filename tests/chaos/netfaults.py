#!/usr/bin/env python3
"""The chaos suite's network faults: every dlockd reaches every Redis node
through its own link of faultproxy.py, so that one daemon can be cut off
while the other is not (an asymmetric partition), and the history checker
(history.py) reads every stage's history.

Topologies (each its own redis-servers on private TCP ports and two dlockd,
A and B, lease NF_LEASE_MS in watchdog mode, command_timeout_ms
NF_CMD_TIMEOUT_MS):

  standalone  one redis-server; A and B each through their own link
  sentinel    a primary, a replica, three Sentinels; B reaches everything
              directly, A the Sentinels through links that rewrite the node
              addresses they give out into A's own links to the nodes
              (faultproxy port rewriting): a fault cuts A from the primary
              while A still reaches the Sentinels
  cluster     three primaries; B direct, A through a link per node that
              rewrites the addresses in CLUSTER SHARDS/SLOTS and MOVED into
              A's links; a fault cuts A from the primary of nf-held's slot
  quorum      five redis-servers; A and B each through their own five links;
              a fault on A cuts A from NF_Q_CUT (a majority) of them

Workload per topology: two workers (threads) per daemon, one per name
(nf-a, nf-b), loop LOCK -> write the fenced store with the fence -> stay
1-20 ms -> UNLOCK, recording every operation, !LOST and store verdict in
<stage>.history; a third per daemon does the same on nf-keep (under
Cluster a name of the shard a fault cuts) but keeps its connection through
errors; a probe per daemon loops TRYLOCK <fresh> 0 / UNLOCK timing every
request. Before the workload, two phases for the checker: twins
(NF_TWINS connections on A hold a name each, NF_TWINS on B try them all:
none is granted) and cancels (LOCK nf-cancel with CANCEL right behind it on
A, then LOCK on B: B waits no longer than NF_FREE_WAIT_MS while the name is
free).

Faults, each on A's links only, for NF_FAULT_S, then healed (short run: the
first of them; full run: all):

  blackhole   every byte dropped both ways, connections kept (no FIN, no RST)
  drop-up     A -> Redis dropped (requests vanish)
  drop-down   Redis -> A dropped (Redis acts, A never hears)
  latency     NF_LAT_MS each way +- jitter, below command_timeout_ms
  reset       every connection RST, then new ones refused for NF_FAULT_S

Invariants per fault:
  - no request (probe TRYLOCK/UNLOCK, worker UNLOCK) waits longer than
    command_timeout_ms + NF_SLACK_MS;
  - a holder on A (nf-held, taken just before the fault) whose daemon is cut
    off hears `!LOST nf-held backend` before B's waiter is granted it, and
    its late write with the old fence is rejected by the store;
  - B goes on granting during the fault (an asymmetric partition leaves B
    alone);
  - after the heal, A says redis=up and grants again within NF_RECOVER_S.

And per stage the history checker: no two holders at once (a !LOST counts
until it arrived), fences unique and rising in grant order, the store
accepting only the highest fence.

Before the workload, the detection of a silent link (short run: standalone
only): an idle A (no locks, no requests) is black-holed and the time until
INFO says so (redis=down, or redis_nodes_up below redis_nodes) is measured,
then healed.

    DLOCKD_BIN=$PWD/build/dlockd python3 tests/chaos/netfaults.py [--short]
        [--topology all|standalone|sentinel|cluster|quorum] [--faults a,b]
        [--keep] [--seed N] [--dlockd PATH]

Exit 0 only if every invariant held.
"""
# SPDX-License-Identifier: MIT

import argparse
import os
import random
import select
import shutil
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster  # noqa: E402
import faultproxy  # noqa: E402
import history  # noqa: E402
import sentinel  # noqa: E402
from faultproxy import DOWN, UP, FaultProxy  # noqa: E402
from quorum import Quorum  # noqa: E402
from redisproc import Spawner  # noqa: E402

NF_LEASE_MS = 2000
NF_CMD_TIMEOUT_MS = 500
NF_CONNECT_TIMEOUT_MS = 500
NF_SLACK_MS = 1000            # over command_timeout_ms: a request's longest wait
NF_FAULT_S = 2.5              # > the lease's loss deadline (0.9 x lease)
NF_LAT_MS = 150               # latency each way (< command_timeout_ms / 2)
NF_LAT_JITTER_MS = 50
NF_RECOVER_S = 10.0           # heal -> redis=up and a grant on A
NF_DETECT_BOUND_S = 5.0       # an idle black-holed link found out within this
NF_Q_NODES = 5
NF_Q_CUT = 3                  # a majority: A loses the quorum
NF_NAMES = ("nf-a", "nf-b")
NF_KEY_PREFIX = "dlock:"      # dlockd's default key_prefix
NF_MASTER = "nf-primary"      # Sentinel's name for the primary
NF_REPLICAS_TIMEOUT_MS = 200  # at most half of command_timeout_ms
NF_CL_PRIMARIES = 3
NF_HELD = "nf-held"
NF_KEEP = "nf-keep"           # its workers keep their connection through errors
NF_CANCEL = "nf-cancel"
NF_CANCELS = 5                # LOCK + CANCEL on A, then LOCK on B, this many times
NF_FREE_WAIT_MS = 500         # a LOCK waits no longer while its name is free (no fault)
NF_TWINS = 32                 # connections per daemon in the twins phase
NF_START_S = 10.0
NF_EVENT_S = 10.0
FAULTS_FULL = ("blackhole", "drop-up", "drop-down", "latency", "reset")
FAULTS_SHORT = ("blackhole",)
TOPOLOGIES = ("standalone", "sentinel", "cluster", "quorum")


class Conn(object):
    """A raw line connection to a dlockd: replies in order, !events aside."""

    def __init__(self, path, hist=None, proc=None):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""
        self.events = []          # (t, line)
        self.hist, self.proc = hist, proc

    def _lines(self, timeout):
        r, _, _ = select.select([self.s], [], [], max(0.0, timeout))
        if not r:
            return False
        d = self.s.recv(65536)
        if not d:
            raise OSError("dlockd closed the connection")
        self.buf += d
        return True

    def _take(self):
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            line = line.decode()
            if line.startswith("!"):
                t = time.monotonic()
                self.events.append((t, line))
                if self.hist is not None and line.startswith("!LOST "):
                    w = line.split()
                    self.hist.event(self.proc, w[1], "lost", w[2] if len(w) > 2 else "", t)
                continue
            return line
        return None

    def call(self, line, timeout):
        self.s.sendall(line.encode() + b"\n")
        return self.reply(timeout)

    def reply(self, timeout):
        """The next reply line, or None after timeout s."""
        deadline = time.monotonic() + timeout
        while True:
            out = self._take()
            if out is not None:
                return out
            if not self._lines(deadline - time.monotonic()) and time.monotonic() >= deadline:
                return None

    def poll(self, timeout=0.0):
        """Reads what has come (events), waiting up to timeout."""
        deadline = time.monotonic() + timeout
        while True:
            if self._take() is not None:
                raise OSError("a reply nobody asked for")
            if not self._lines(deadline - time.monotonic()):
                return

    def lost(self, name):
        return [t for t, l in self.events if l.split()[:2] == ["!LOST", name]]

    def close(self):
        self.s.close()


class Stage(object):
    def __init__(self, nf, topology, label=None):
        self.nf = nf
        self.topo = topology
        self.label = label or topology
        self.tmp = os.path.join(nf.tmp, self.label)
        os.makedirs(self.tmp)
        self.hist = history.History(os.path.join(nf.tmp, "%s.history" % self.label))
        self.store = history.FencedStore(self.hist)
        self.px = FaultProxy(nf.rnd.randrange(1 << 30))
        self.stop = threading.Event()
        self.threads = []
        self.probe_lat = {0: [], 1: []}     # (t_start, ms, reply) per daemon
        self.grants = {0: [], 1: []}        # completion times of worker grants per daemon
        self.daemons = [None, None]
        self.links = [[], []]               # per daemon: its links, one per node
        self.fresh = 0

    # -- processes --

    def start(self):
        if self.topo == "sentinel":
            self.qu = sentinel.Topology(self.tmp, name=NF_MASTER, replicas=1, sentinels=3,
                                        spawn=self.spawn_node, say=self.nf.say)
        elif self.topo == "cluster":
            self.qu = cluster.Cluster(self.tmp, primaries=NF_CL_PRIMARIES, replicas=0,
                                      spawn=self.spawn_node, say=self.nf.say)
        else:
            self.qu = Quorum(self.tmp, n=NF_Q_NODES if self.topo == "quorum" else 1,
                             spawn=self.spawn_node, say=self.nf.say)
        self.qu.start()
        ports = [x["port"] for x in self.qu.nodes]
        # A (0) reaches every node through its own link, B (1) too except
        # under Sentinel and Cluster, where B goes straight to the nodes and
        # A's links rewrite the node addresses Sentinel or the Cluster gives
        # out into A's own links.
        for d in range(2):
            if d == 1 and self.topo in ("sentinel", "cluster"):
                self.links[d] = []
                continue
            self.links[d] = [self.px.link(("127.0.0.1", p)) for p in ports]
        self.rewrite = {p: ln.port for p, ln in zip(ports, self.links[0])}
        if self.topo == "cluster":
            for i, ln in enumerate(self.links[0]):
                ln.patterns = faultproxy.port_patterns(self.rewrite)
        self.sen_links = []
        if self.topo == "sentinel":
            self.sen_links = [self.px.link(("127.0.0.1", x["port"]), ports=self.rewrite)
                              for x in self.qu.sentinels]
        for d in range(2):
            self.start_dlockd(d)

    def spawn_node(self, argv, logname, env=None):
        """Starts a Redis process of the topology (clockskew.py: under
        libfaketime)."""
        return self.nf.spawn(argv, logname, env)

    def dsock(self, d):
        return os.path.join(self.tmp, "d%d.sock" % d)

    def start_dlockd(self, d):
        conf = os.path.join(self.tmp, "d%d.conf" % d)
        urls = " ".join("redis://127.0.0.1:%d" % ln.port for ln in self.links[d])
        if self.topo == "sentinel":
            sens = (["127.0.0.1:%d" % ln.port for ln in self.sen_links] if d == 0
                    else self.qu.sentinel_addrs())
            where = ("sentinels = %s\nmaster_name = %s\nreplicas_timeout_ms = %d\n"
                     % (" ".join(sens), NF_MASTER, NF_REPLICAS_TIMEOUT_MS))
        elif self.topo == "cluster":
            where = ("cluster = %s\nreplicas_timeout_ms = %d\n"
                     % (" ".join("127.0.0.1:%d" % ln.port for ln in self.links[0]) if d == 0
                        else self.qu.addrs(), NF_REPLICAS_TIMEOUT_MS))
        elif self.topo == "quorum":
            where = "quorum = %s\nrejoin_delay_ms = %d\n" % (urls, NF_LEASE_MS)
        else:
            where = "url = %s\n" % urls
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\nadmin_uids = 0\n[redis]\n%s"
                    "command_timeout_ms = %d\nconnect_timeout_ms = %d\n"
                    "[lock]\nlease_ms = %d\n"
                    % (self.dsock(d), where, NF_CMD_TIMEOUT_MS, NF_CONNECT_TIMEOUT_MS,
                       NF_LEASE_MS))
        self.daemons[d] = self.nf.spawn([self.nf.dlockd, "-c", conf],
                                        "%s-dlockd%d.log" % (self.label, d))
        if not self.wait_up(d, NF_START_S + (NF_LEASE_MS / 1000.0 if self.topo == "quorum"
                                             else 0)):
            raise RuntimeError("%s dlockd %d: not up" % (self.topo, d))

    def info(self, d):
        c = Conn(self.dsock(d))
        try:
            r = c.call("INFO", 2.0) or ""
        finally:
            c.close()
        return dict(kv.split("=", 1) for kv in r.split()[1:] if "=" in kv)

    def up(self, d):
        try:
            i = self.info(d)
        except OSError:
            return False
        return i.get("redis") == "up" and i.get("redis_nodes_up") == i.get("redis_nodes")

    def down(self, d):
        i = self.info(d)
        return i.get("redis") != "up" or i.get("redis_nodes_up") != i.get("redis_nodes")

    def wait_up(self, d, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.up(d):
                return True
            time.sleep(0.02)
        return False

    # -- faults on daemon d's links --

    def cut_links(self, d):
        if self.topo == "quorum":
            return self.links[d][:NF_Q_CUT]
        if self.topo == "cluster":
            # the primary of nf-held's slot (nf-a, nf-b: wherever they hash)
            port = self.qu.owner(cluster.keyslot(NF_KEY_PREFIX + NF_HELD))
            return [ln for ln in self.links[d] if ln.target[1] == port]
        return self.links[d]

    def inject(self, d, kind):
        for ln in self.cut_links(d):
            if kind == "blackhole":
                ln.blackhole()
            elif kind == "drop-up":
                ln.drop(UP)
            elif kind == "drop-down":
                ln.drop(DOWN)
            elif kind == "latency":
                ln.latency(NF_LAT_MS, NF_LAT_JITTER_MS)
            elif kind == "reset":
                ln.refuse()
                ln.reset()
        return time.monotonic()

    def heal(self, d):
        for ln in self.links[d]:
            ln.heal()
        return time.monotonic()

    # -- the workload --

    def worker(self, d, name, wid, keep=False):
        """LOCK, write, UNLOCK in a loop; a new connection after an error,
        or (keep) the same one: its releases that did not get through and
        its next acquires of the name are then the same owner's."""
        proc = "d%d/w%d" % (d, wid)
        rnd = random.Random(self.nf.rnd.randrange(1 << 30))
        c = None
        while not self.stop.is_set():
            if c is None:
                try:
                    c = Conn(self.dsock(d), self.hist, proc)
                except OSError:
                    time.sleep(0.05)
                    continue
            op = self.hist.invoke(proc, name, "lock")
            try:
                r = c.call("LOCK %s" % name, NF_EVENT_S + NF_FAULT_S)
            except OSError:
                r = None
            if r is None or not r.startswith("OK "):
                self.hist.complete(op, "info" if r is None else r)
                if not (keep and r is not None):
                    c.close()
                    c = None
                time.sleep(0.05)
                continue
            fence = int(r.split()[1])
            self.hist.complete(op, "ok", fence=fence)
            self.grants[d].append(time.monotonic())
            try:
                c.poll()
                self.store.write(proc, name, fence)
                c.poll(rnd.uniform(0.001, 0.02))
                op = self.hist.invoke(proc, name, "unlock")
                r = c.call("UNLOCK %s" % name, NF_CMD_TIMEOUT_MS / 1000.0 + NF_SLACK_MS / 1000.0)
            except OSError:
                r = None
            self.hist.complete(op, "info" if r is None else r)
            if keep and r is not None:
                del c.events[:]
            elif r is None or r.startswith("ERR") or c.events:
                if r is None:
                    self.nf.fail("%s: UNLOCK %s unanswered within command_timeout_ms + slack"
                                 % (proc, name))
                c.close()
                c = None

    def probe(self, d):
        c = None
        while not self.stop.is_set():
            if c is None:
                try:
                    c = Conn(self.dsock(d))
                except OSError:
                    time.sleep(0.05)
                    continue
            self.fresh += 1
            name = "nf-probe-%d-%d" % (d, self.fresh)
            for line in ("TRYLOCK %s 0" % name, "UNLOCK %s" % name):
                t = time.monotonic()
                try:
                    r = c.call(line, 30.0)
                except OSError:
                    r = None
                self.probe_lat[d].append((t, (time.monotonic() - t) * 1000, r, line))
                if r is None or not r.startswith("OK"):
                    c.close()
                    c = None
                    break
            time.sleep(0.02)

    def keep_name(self):
        """NF_KEEP, or under Cluster a name of the same shard as NF_HELD (the
        one a fault cuts A from)."""
        if self.topo != "cluster":
            return NF_KEEP
        port = self.qu.owner(cluster.keyslot(NF_KEY_PREFIX + NF_HELD))
        return next(n for n in ("%s-%d" % (NF_KEEP, i) for i in range(1000))
                    if self.qu.owner(cluster.keyslot(NF_KEY_PREFIX + n)) == port)

    def start_workload(self):
        wid = 0
        keep = self.keep_name()
        for d in range(2):
            for name in NF_NAMES:
                self.threads.append(threading.Thread(target=self.worker, args=(d, name, wid),
                                                     daemon=True))
                wid += 1
            self.threads.append(threading.Thread(target=self.worker,
                                                 args=(d, keep, wid, True), daemon=True))
            wid += 1
            self.threads.append(threading.Thread(target=self.probe, args=(d,), daemon=True))
        for t in self.threads:
            t.start()

    def stop_workload(self):
        self.stop.set()
        for t in self.threads:
            t.join(NF_EVENT_S + NF_FAULT_S)

    # -- phases --

    def detect(self):
        """An idle A's black-holed link: how long until INFO says so."""
        t = self.inject(0, "blackhole")
        t_down = None
        while time.monotonic() - t < NF_DETECT_BOUND_S * 4:
            if self.down(0):
                t_down = time.monotonic()
                break
            time.sleep(0.02)
        self.heal(0)
        ms = None if t_down is None else (t_down - t) * 1000
        self.nf.check("%s: an idle dlockd finds a black-holed link out within %.0f s"
                      % (self.topo, NF_DETECT_BOUND_S),
                      ms is not None and ms <= NF_DETECT_BOUND_S * 1000,
                      "not within %.0f s" % (NF_DETECT_BOUND_S * 4) if ms is None
                      else "after %.0f ms" % ms)
        self.nf.detect[self.topo] = ms
        if not self.wait_up(0, NF_RECOVER_S + NF_LEASE_MS / 1000.0):
            self.nf.fail("%s: dlockd 0 not up again after the detection heal" % self.topo)

    def fault(self, kind):
        """Holder of nf-held on A, waiter on B, the fault on A's links."""
        cut = kind in ("blackhole", "drop-up", "drop-down", "reset")
        a = Conn(self.dsock(0), self.hist, "d0/held-" + kind)
        b = Conn(self.dsock(1), self.hist, "d1/wait-" + kind)
        op = self.hist.invoke(a.proc, NF_HELD, "lock")
        r = a.call("LOCK %s" % NF_HELD, NF_EVENT_S)
        if r is None or not r.startswith("OK "):
            self.hist.complete(op, "info" if r is None else r)
            self.nf.fail("%s %s: LOCK %s on A answered %r" % (self.topo, kind, NF_HELD, r))
            return
        fa = int(r.split()[1])
        self.hist.complete(op, "ok", fence=fa)
        self.store.write(a.proc, NF_HELD, fa)
        g_before = {d: len(self.grants[d]) for d in range(2)}
        t_fault = self.inject(0, kind)
        # B asks for nf-held: it must not get it before A's holder heard !LOST.
        opb = self.hist.invoke(b.proc, NF_HELD, "lock")
        b.s.sendall(("LOCK %s\n" % NF_HELD).encode())
        deadline = t_fault + NF_FAULT_S
        while time.monotonic() < deadline:
            a.poll(0.02)
            b._lines(0.0)
            out = b._take()
            if out is not None:
                t_b = time.monotonic()
                break
        else:
            out = None
        t_heal = self.heal(0)
        b_during = len(self.grants[1]) - g_before[1]
        if kind != "latency":
            self.nf.check("%s %s: B grants during A's fault (asymmetric)" % (self.topo, kind),
                          b_during > 0, "%d grants on B in %.1f s" % (b_during, NF_FAULT_S))
        lost = a.lost(NF_HELD)
        if cut:
            self.nf.check("%s %s: A's holder hears !LOST %s backend" % (self.topo, kind,
                                                                      NF_HELD),
                          bool(lost) and any(l.split()[2:3] == ["backend"]
                                             for _, l in a.events),
                          "%s after %.0f ms" % (a.events, (lost[0] - t_fault) * 1000)
                          if lost else "nothing in %.1f s: %s" % (NF_FAULT_S, a.events))
        # A unlocks (answered in any case) and writes late with its old fence.
        op = self.hist.invoke(a.proc, NF_HELD, "unlock")
        try:
            r = a.call("UNLOCK %s" % NF_HELD, NF_CMD_TIMEOUT_MS / 1000.0 + NF_SLACK_MS / 1000.0)
        except OSError:
            r = None
        self.hist.complete(op, "info" if r is None else r)
        if out is None:
            while time.monotonic() < t_heal + NF_RECOVER_S:
                b._lines(0.05)
                out = b._take()
                if out is not None:
                    t_b = time.monotonic()
                    break
        if out is None or not out.startswith("OK "):
            self.hist.complete(opb, "info" if out is None else out)
            self.nf.fail("%s %s: B's LOCK %s answered %r" % (self.topo, kind, NF_HELD, out))
        else:
            fb = int(out.split()[1])
            self.hist.complete(opb, "ok", t1=t_b, fence=fb)
            self.store.write(b.proc, NF_HELD, fb)
            if cut and lost:
                self.nf.check("%s %s: !LOST reached A's holder before B's grant"
                              % (self.topo, kind), lost[0] < t_b,
                              "!LOST at +%.0f ms, B granted at +%.0f ms"
                              % ((lost[0] - t_fault) * 1000, (t_b - t_fault) * 1000))
            stale_ok = self.store.write(a.proc, NF_HELD, fa)
            self.nf.check("%s %s: the fence stops A's late write" % (self.topo, kind),
                          not stale_ok and fb > fa, "fence A %d, B %d" % (fa, fb))
            op = self.hist.invoke(b.proc, NF_HELD, "unlock")
            self.hist.complete(op, b.call("UNLOCK %s" % NF_HELD, 2.0) or "info")
        a.close()
        b.close()
        ok = self.wait_up(0, NF_RECOVER_S + NF_LEASE_MS / 1000.0)
        t_up = time.monotonic()
        g = len(self.grants[0])
        while ok and len(self.grants[0]) == g and time.monotonic() < t_up + NF_RECOVER_S:
            time.sleep(0.02)
        self.nf.check("%s %s: A up and granting after the heal" % (self.topo, kind),
                      ok and len(self.grants[0]) > g,
                      "redis up %.0f ms after the heal, grant %s"
                      % ((t_up - t_heal) * 1000, "yes" if len(self.grants[0]) > g else "no"))
        self.nf.say("  %s %s: fault %.1f s, !LOST %s, B grants during it %d"
                    % (self.topo, kind, t_heal - t_fault,
                       "+%.0f ms" % ((lost[0] - t_fault) * 1000) if lost else "-", b_during))

    def twins(self):
        """NF_TWINS connections on A each hold a name of their own; then
        NF_TWINS on B each try every one of those names (TRYLOCK 0): none
        may be granted. Each daemon numbers its connections from 1, so
        some on B share their number with one on A: owners differ only by
        their daemon's uuid, and a daemon that took another's holder for
        its own would re-enter its hold (mutants.py: uuid-shared)."""
        names = ["nf-twin-%d" % i for i in range(NF_TWINS)]
        held, tries, granted = [], 0, 0
        try:
            for i, name in enumerate(names):
                c = Conn(self.dsock(0), self.hist, "d0/twin%d" % i)
                op = self.hist.invoke(c.proc, name, "lock")
                r = c.call("LOCK %s" % name, NF_EVENT_S)
                self.hist.complete(op, "info" if r is None else
                                   "ok" if r.startswith("OK ") else r,
                                   **({"fence": int(r.split()[1])} if r and r.startswith("OK ")
                                      else {}))
                held.append((c, name))
            for j in range(NF_TWINS):
                c = Conn(self.dsock(1), self.hist, "d1/twin%d" % j)
                for name in names:
                    op = self.hist.invoke(c.proc, name, "lock")
                    r = c.call("TRYLOCK %s 0" % name, NF_EVENT_S)
                    tries += 1
                    if r is not None and r.startswith("OK "):
                        granted += 1
                        self.hist.complete(op, "ok", fence=int(r.split()[1]))
                        op = self.hist.invoke(c.proc, name, "unlock")
                        self.hist.complete(op, c.call("UNLOCK %s" % name, 2.0) or "info")
                    else:
                        self.hist.complete(op, "info" if r is None else r)
                c.close()
        finally:
            for c, name in held:
                op = self.hist.invoke(c.proc, name, "unlock")
                try:
                    r = c.call("UNLOCK %s" % name, 2.0)
                except OSError:
                    r = None
                self.hist.complete(op, r or "info")
                c.close()
        self.nf.say("  %s twins: %d names held on A, %d TRYLOCKs on B, %d granted"
                    % (self.topo, len(held), tries, granted))

    def cancels(self):
        """NF_CANCELS times: a new connection on A sends LOCK nf-cancel with
        CANCEL right behind it (the acquire is in flight when the CANCEL
        withdraws the wait: dlockd undoes it when it returns), then B LOCKs
        the name: the checker's free-wait rule says how long B may wait
        while the name is free (mutants.py: orphan-kept)."""
        waited = []
        for i in range(NF_CANCELS):
            a = Conn(self.dsock(0), self.hist, "d0/cancel%d" % i)
            op = self.hist.invoke(a.proc, NF_CANCEL, "lock")
            a.s.sendall(("LOCK %s\nCANCEL\n" % NF_CANCEL).encode())
            r = a.reply(NF_EVENT_S)
            c = a.reply(NF_EVENT_S)             # CANCEL's: OK 1 withdrawn, OK 0 too late
            if r is not None and r.startswith("OK "):
                self.hist.complete(op, "ok", fence=int(r.split()[1]))
                op = self.hist.invoke(a.proc, NF_CANCEL, "unlock")
                self.hist.complete(op, a.call("UNLOCK %s" % NF_CANCEL, 2.0) or "info")
            else:
                self.hist.complete(op, "cancelled" if r and r.startswith("ERR CANCELLED") and
                                   c == "OK 1" else "info" if r is None else r)
            b = Conn(self.dsock(1), self.hist, "d1/cancel%d" % i)
            op = self.hist.invoke(b.proc, NF_CANCEL, "lock")
            t = time.monotonic()
            r = b.call("LOCK %s" % NF_CANCEL, NF_EVENT_S)
            waited.append((time.monotonic() - t) * 1000)
            self.hist.complete(op, "ok" if r and r.startswith("OK ") else r or "info",
                               **({"fence": int(r.split()[1])} if r and r.startswith("OK ")
                                  else {}))
            op = self.hist.invoke(b.proc, NF_CANCEL, "unlock")
            self.hist.complete(op, b.call("UNLOCK %s" % NF_CANCEL, 2.0) or "info")
            a.close()
            b.close()
        self.nf.say("  %s cancels: %d LOCK+CANCEL on A, B's LOCK after each waited %s ms"
                    % (self.topo, NF_CANCELS, " ".join("%.0f" % w for w in waited)))

    def run(self, faults, detect=True):
        self.start()
        self.twins()
        self.cancels()
        if detect:
            self.detect()
        self.start_workload()
        time.sleep(0.5)
        for kind in faults:
            self.fault(kind)
        self.stop_workload()
        self.check_latency()
        self.check_history()

    def check_latency(self):
        bound = NF_CMD_TIMEOUT_MS + NF_SLACK_MS
        for d in range(2):
            lat = self.probe_lat[d]
            worst = max(lat, key=lambda x: x[1]) if lat else (0, 0, None, "")
            self.nf.check("%s: every probe request on dlockd %d answered within %d ms"
                          % (self.topo, d, bound),
                          bool(lat) and worst[1] <= bound and worst[2] is not None,
                          "%d requests, longest %.0f ms (%s -> %s)"
                          % (len(lat), worst[1], worst[3], worst[2]))

    def check_history(self):
        self.hist.close()
        r = history.check(history.load(self.hist.path),
                          waits=dict(names={NF_CANCEL}, bound_s=NF_FREE_WAIT_MS / 1000.0,
                                     cancel_s=NF_CMD_TIMEOUT_MS / 1000.0,
                                     lease_s=NF_LEASE_MS / 1000.0))
        self.nf.ops_checked += r.ops
        self.nf.check("%s: the history checker finds no violation" % self.topo,
                      not r.violations,
                      "%d ops, %d names, %d sections, %d indeterminate%s"
                      % (r.ops, r.names, r.sections, r.indeterminate,
                         "; first: " + r.first() if r.violations else ""))

    def close(self):
        self.stop.set()
        for d in range(2):
            p = self.daemons[d]
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    rc = p.wait(NF_EVENT_S)
                except Exception:
                    rc = None
                self.nf.check("%s: dlockd %d exits 0 on SIGTERM" % (self.topo, d), rc == 0,
                              "rc %s" % rc)
        self.px.close()
        self.nf.counts_add(self.px.counts)
        self.qu.stop()


class NetFaults(object):
    def __init__(self, args):
        self.args = args
        self.dlockd = args.dlockd or os.environ.get("DLOCKD_BIN") or "build/dlockd"
        self.tmp = tempfile.mkdtemp(prefix="dlock-netfaults-")
        self.spawner = Spawner(self.tmp)
        self.rnd = random.Random(args.seed)
        self.checks = []
        self.detect = {}
        self.counts = {}
        self.ops_checked = 0

    def spawn(self, argv, logname, env=None):
        return self.spawner(argv, logname, env)

    def say(self, text):
        print(text, flush=True)

    def check(self, name, ok, detail):
        self.checks.append((name, ok, detail))
        print("  %s %s\n      %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)

    def fail(self, text):
        self.check(text, False, "")

    def counts_add(self, counts):
        for k, v in counts.items():
            self.counts[k] = self.counts.get(k, 0) + v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dlockd", default=None)
    ap.add_argument("--topology", choices=("all",) + TOPOLOGIES, default="all")
    ap.add_argument("--faults", default=None, help="comma-separated subset of " +
                    ",".join(FAULTS_FULL))
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    nf = NetFaults(args)
    faults = (args.faults.split(",") if args.faults else
              FAULTS_SHORT if args.short else FAULTS_FULL)
    t0 = time.monotonic()
    print("dlockd network faults (%s, seed %d), temp dir %s"
          % ("short" if args.short else "full", args.seed, nf.tmp), flush=True)
    try:
        for topo in TOPOLOGIES:
            if args.topology not in ("all", topo):
                continue
            nf.say("%s: %s" % (topo, ", ".join(faults)))
            st = Stage(nf, topo)
            try:
                # the short run measures the idle detection on standalone only
                st.run(faults, detect=not args.short or topo == "standalone")
            except (RuntimeError, OSError) as e:
                nf.fail("%s: the stage ran to its end: %s" % (topo, e))
            finally:
                st.close()
    finally:
        nf.spawner.stop()
    failed = sum(1 for _, ok, _ in nf.checks if not ok)
    print("faults injected: %s; operations checked: %d; idle black-hole detection: %s"
          % (", ".join("%s %d" % kv for kv in sorted(nf.counts.items())), nf.ops_checked,
             ", ".join("%s %s" % (k, "%.0f ms" % v if v is not None else "never")
                       for k, v in sorted(nf.detect.items()))))
    if failed or args.keep:
        print("kept %s" % nf.tmp)
    else:
        shutil.rmtree(nf.tmp, ignore_errors=True)
    print("netfaults: %.1f s, %d passed, %d failed"
          % (time.monotonic() - t0, len(nf.checks) - failed, failed), flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
