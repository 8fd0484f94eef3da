#!/usr/bin/env python3
"""dlockd fault-injection suite (`make chaos`; `--short` for `make test`).

Nine stages in one run, fenced stores and one analysis over them all.

Stage 1 (standalone): one redis-server and three dlockd instances sharing
it, all on Unix sockets in a temporary directory, lease 1000 ms. Twelve
worker processes in watchdog mode, round robin over the daemons (a
thirteenth, with an explicit 1000 ms lease, joins in the stall phase), loop:
LOCK chaos -> read the counter of a fenced store -> sleep 1-5 ms -> write
counter+1 with the fence -> UNLOCK. Meanwhile, in phases:

  1 holder-kill    a holder (held inside its critical section) gets SIGKILL
  2 dlockd-kill    the daemon of a holder gets SIGKILL, then is restarted
  3 stall          a holder gets SIGSTOP for longer than the lease, then
                   SIGCONT (a watchdog-mode holder, then the lease-mode one)
  4 redis-restart  redis-server gets SIGKILL and is restarted empty
  5 redis-pause    redis-server gets SIGSTOP for 2 s, then SIGCONT
  6 slow-reader    a raw client pipelines INFO and never reads its replies

Stage 2 (failover): the workers stop, the daemons stop (each must exit 0 on
SIGTERM) and redis-server goes. A Sentinel topology replaces it: a primary
and two replicas (redis-server on private TCP ports of 127.0.0.1, no
persistence, --replicaof) and three redis-sentinel processes (own config
files; quorum 2, down-after-milliseconds 1000, failover-timeout 3000,
parallel-syncs 1; see sentinel.py; `redis-server --sentinel` stands in when
there is no redis-sentinel command). The three daemons start again with
`sentinels`/`master_name`, replicas_ack = auto (WAIT for 1 replica),
lease 5000 ms, command_timeout_ms 1000; the twelve watchdog workers start
again, and one probe thread per daemon loops TRYLOCK <fresh name> 0 /
UNLOCK, timing every request. Then, each time with a holder held inside its
critical section (released once the service is back, or the lock moved on):

  7 failover-kill    the primary gets SIGKILL; Sentinel promotes a replica;
                     the killed one restarts on its port, empty, and Sentinel
                     makes it a replica (full run: twice, each time waiting
                     until Sentinel sees every replica healthy again; short
                     run: once, the stage ends while it is being demoted)
  8 failover-forced  SENTINEL FAILOVER (full run only); the old primary
                     stays a primary until Sentinel demotes it (about 10 s
                     later), and the run waits for that with the workload on

Measured per failover: Sentinel's own time (fault -> +sdown, +odown and
+switch-master on the sentinels' pub/sub), and per daemon fault -> the log
line "primary is now HOST:PORT" naming the new primary and fault -> the
first probe grant requested after it.

Then the invariants are checked from the store's log and printed one by one;
the last line is "N passed, M failed" (invariants passed / failed). Exit 0
only if none failed. The failover stage adds: no request hangs (every probe
request and every worker UNLOCK answered within command_timeout_ms + slack),
every daemon follows Sentinel and grants again within a bound of
+switch-master, and a holder caught by a failover either keeps its lock or
is fenced off. The general invariants (no lost update, overlapping sections
only during faults and then fenced, fences rising with grant order, no loss
outside a fault, no crash) cover both stages.

Stage 3 (cluster): the Sentinel topology and its daemons go. A Redis
Cluster replaces it: three primaries and three replicas (redis-server
--cluster-enabled yes on private ports, own bus ports and nodes.conf, no
persistence, cluster-node-timeout 1000; redis-cli --cluster create; see
cluster.py), and two dlockd with `cluster = <every node>`, lease 5000 ms,
command_timeout_ms 1000, replicas_ack auto. Lock names: two on each primary's
slots and three sharing the hash tag {hot} (one busy slot), each with its own
fenced store and two watchdog-mode workers (one per daemon); one probe per
daemon and shard loops TRYLOCK <fresh name of that shard> 0 / UNLOCK. Then,
per round (full run: two, short run: one):

  9 cl-migrate  the {hot} slot moves to another primary in steps (IMPORTING/
                MIGRATING, half a second of load in the ASK window, MIGRATE
                one key at a time, SETSLOT NODE everywhere) while a holder of
                a {hot} name sits in its critical section: it must keep its
                lock (nobody else granted, its write accepted)
 10 cl-kill     the primary owning {hot} gets SIGKILL with a holder of one of
                its names in its section; the cluster promotes its replica;
                the killed node restarts empty and must become a replica of
                the promoted one (ROLE)
 11 cl-pause    (full run only) another primary gets SIGSTOP until the cluster
                promoted its replica (at least 3 s), then SIGCONT: it must
                come back as a replica

and at the end every daemon must LOCK/UNLOCK a name of every shard and say
redis_nodes_up = redis_nodes, redis_down=-. Measured: kill/stop -> promotion
(the nodes agree), -> each daemon's log "slots changed hands" and first
probe grant on the shard, the gap in the shard's grants, the longest pause
of the other shards' probes, the migration's steps, grants per second. The
cluster stage's invariants are those of the others, per name (each name its
own fenced resource): overlapping sections only in a failover window of the
name's own shard (the same rule as the Sentinel stage: lease + 1.5 s after
the fault), never during a migration, and then fenced; fences rising per
name; no request answered later than command_timeout_ms + slack. An overlap
whose stale grant the promoted primary made itself (granted well after the
old primary died or stopped, before it came back) is one no lost write
explains: it is a violation (--lenient-failover counts it as the window's).

Stage 4 (quorum): the cluster and its daemons go. Five independent
redis-servers replace it (127.0.0.1, private ports, no persistence, no
replication; see quorum.py), and two dlockd with `quorum = redis://... x5`,
lease_ms = rejoin_delay_ms (2000 ms short, 3000 ms full), command_timeout_ms
1000. Fresh servers have uptime 0, so the daemons count them only
rejoin_delay_ms after their start: the stage waits for INFO redis_nodes_up=5
on both (polled with a deadline) before the workers start. Three names (qa qb
qc), each with its own fenced store and two watchdog-mode workers (one per
daemon); one probe per daemon loops TRYLOCK <fresh> 0 / UNLOCK; a thread per
daemon samples INFO every 20 ms (which nodes count, when). Then, each with a
worker held in its critical section (its lock's nodes read from Redis, and
the victims chosen so that it keeps a majority: it must keep its lock):

 12 q-kill2          2 nodes SIGKILLed: the service goes on (probe grants,
                     every name granted, no failed request); INFO redis=up,
                     redis_nodes_up=3, the dead in redis_down. Meanwhile
                     dlockd 0 takes "q-held" (so on the 3 survivors only) and
                     dlockd 1 waits for it. The 2 restart empty and must count
                     again rejoin_delay_ms after their start, not before
 13 q-pause          (full run only) a node (not one of q-held's) SIGSTOPped
                     2 s (< the lease): grants go on, no request hangs, the
                     daemons stop counting it; "q-stale", renewed just before
                     and released once they did, keeps its key on that node:
                     after SIGCONT dlockd 1 must get it at once, with a greater
                     fence
 14 q-restart-empty  a node of q-held's SIGKILLed and restarted empty at once:
                     the held worker (on enough other nodes) keeps its lock;
                     q-held, now on less than a majority, must be told !LOST
                     before dlockd 1's waiter gets it (one select() round reads
                     both connections: the order of arrival), with a greater
                     fence; the node counts again only after rejoin_delay_ms
 15 q-majority       (full run only) 3 nodes SIGKILLed: every probe request
                     answers ERR BACKEND no quorum within command_timeout_ms +
                     slack, INFO redis=down; "q-maj" held on dlockd 1 hears
                     !LOST ... backend before its lease runs out on the
                     survivors (their PTTL); the held worker is told and, once
                     the lock is granted again, fenced off. Restarted empty:
                     no grant before rejoin_delay_ms, every daemon grants again
                     within a bound, fences keep rising

and at the end every daemon LOCKs/UNLOCKs and counts all five. Invariants,
per name: no lost update; sections overlap only when the earlier holder was
told (!LOST) during a fault, and then fenced; fences strictly rising with
grant order and across every fault; losses only in faults, and with a
majority alive only with !LOST (no ERR BACKEND); no request answered later
than command_timeout_ms + slack; a (re)started node counts only after
rejoin_delay_ms. The short run (make test) does q-kill2 and q-restart-empty
in about 10 s.

Stage 5 (kinds, kinds.py): its own redis-server and two dlockd; eight
workers take a read/write lock of one name (a quarter of them as writers),
and eight more 1 or 2 permits of a semaphore of 3 (SEMINIT; mostly watchdog
mode, some with a lease, some by TRYACQUIRE, some 1 + 1 or given back
1 + 1, and once each past a short lease), while workers are SIGKILLed (the
semaphore's while they hold permits) and one dlockd is SIGKILLed and
restarted. A tracker checks that no writer is ever inside alongside anyone,
that write fences rise and reads see the last write's fence, that readers do
share, and that both kinds are granted after every fault. Another counts
the permits of every holding it can prove alive (a dead daemon's until
their lease ends) and checks that they are never more than 3, that they do
reach 3, that 1- and 2-permit grants go on after every fault, a killed
holder's permits at once and a dead daemon's after their lease, that no
acquisition waits long outside those faults, that every RELEASE answers as
it should (an overstayed lease: !LOST expired), and that at the end STATUS
and Redis say all 3 are free (about 5 s short, 10 s full).

Stage 6 (elect, elect.py): an election's candidates churning (resigning,
SIGKILLed while they lead, leases let run out) on two dlockd, one of them
SIGKILLed and restarted; at most one leader at a time, grants' and
observers' fences rising, and every observer agreeing with LEADER at the end.

Stage 7 (mlock, mlock.py): multi-name lock sets under contention and
faults, on one redis-server, a Cluster and a quorum.

Stage 8 (hot, hot.py; issue 40): four dlockd with three workers each
contending on two hot names, daemons SIGSTOPped (longer than the wake-up
bound, shorter than the lease) and SIGKILLed while their workers wait, on
one redis-server and on a Cluster; the history checker judges no two
holders at once, fences rising, and no hot name left free while a live
daemon's worker waited for it longer than the bound (about 10 s short, 25 s
full per topology).

Stage 9 (upgrade, upgrade.py; issue 39): one dlockd handed over to a new
process of itself (SIGUSR2) every 0.5-1 s while eight workers, each on one
connection for the whole stage, take two names by LOCK and TRYLOCK with a
wait and a third by FAIRLOCK, and a keeper holds a fourth; each hand-over
awaited (INFO upgrades up by one, upgrade_failures unchanged, the old
process exits 0). The history checker judges the whole stage; no
connection may close, no !LOST come, the keeper's fence stays, INFO's
counters carry over (about 15 s short, 35 s full, and the checker's time).

Every stage: no dlockd crash, each exits 0 on SIGTERM, and no sanitizer
report or assertion failure in any dlockd log.

What the failover stage can and cannot promise: replication is
asynchronous, and WAIT 1 of 2 replicas does not make a grant durable: a
forced failover, or a promotion of the replica that had not acknowledged,
can lose a grant, and the same lock can be granted twice. The fenced store
rejects the stale holder's write as long as the later grant carries the
larger fence; dlockd's fences are max(counter + 1, Redis TIME in us), so on
one machine (one clock) they rise across a failover. With primaries on hosts
whose clocks disagree by more than the failover takes, a later grant can
carry a smaller fence; the store then refuses the new holder instead (no
lost update, but the fence-order invariant fails). This suite runs on one
machine and does not exercise that case.

    DLOCKD_BIN=$PWD/build/dlockd python3 tests/chaos/chaos.py [--short] [--keep] [--seed N]
        [--stage all|standalone|failover|cluster|quorum|kinds|elect|mlock|hot|upgrade]
        [--log-level debug]
        [--lenient-failover]

Python 3.9+, standard library only.
"""
# SPDX-License-Identifier: MIT

import argparse
import atexit
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

import cluster  # noqa: E402
import dlock  # noqa: E402
import elect  # noqa: E402
import history  # noqa: E402
import hot  # noqa: E402
import kinds  # noqa: E402
import mlock  # noqa: E402
import quorum  # noqa: E402
import sentinel  # noqa: E402
import upgrade  # noqa: E402
from redisproc import RespError, Spawner  # noqa: E402
from store import FencedStore  # noqa: E402

LEASE_MS = 1000
DAEMONS = 3
WATCHDOG_WORKERS = 12
LEASE_WID = WATCHDOG_WORKERS          # the 13th worker holds with an explicit lease
HANDOFF_BOUND_MS = 50                 # SIGKILLed holder -> next local waiter
FREE_BOUND_MS = LEASE_MS + 250        # SIGKILLed dlockd -> another daemon's waiter
RECOVERY_BOUND_S = 5.0                # Redis back -> redis=up and LOCK works (generous)
EVENT_TIMEOUT = 10.0                  # generous bound on any awaited event
START_TIMEOUT = 10.0
STALL_S = 2.0                         # SIGSTOP of a holder (> lease)
PAUSE_S = 2.0                         # SIGSTOP of redis-server (> lease)
REDIS_DOWN_S = 0.8                    # redis-server dead before its restart

# The failover stage (see sentinel.py for the topology).
FO_MASTER = "dlock-chaos"             # Sentinel's name for the primary
FO_LEASE_MS = 5000                    # > Sentinel's failover time: holders can keep locks
FO_CMD_TIMEOUT_MS = 1000              # command_timeout_ms: bound on every request
FO_CONNECT_TIMEOUT_MS = 500
FO_REPLICAS_TIMEOUT_MS = 500          # replicas_timeout_ms (< command_timeout_ms)
FO_DOWN_AFTER_MS = 1000               # Sentinel's down-after-milliseconds
FO_FAILOVER_TIMEOUT_MS = 3000         # Sentinel's failover-timeout
FO_SWITCH_TIMEOUT = 30.0              # fault -> +switch-master (Sentinel's own business)
FO_RESUME_TIMEOUT = 20.0              # +switch-master -> every daemon adopted and granted
FO_HEAL_TIMEOUT = 45.0                # restart -> Sentinel sees every replica healthy
FO_HOLD_S = 2.0                       # a held holder waits this long for the lock to move on
PROBE_SLEEP_S = 0.02                  # between a probe's TRYLOCK/UNLOCK rounds
PROBE_TIMEOUT_S = 30.0                # a probe reply later than this counts as a hang

# The cluster stage (see cluster.py for the topology).
CL_DAEMONS = 2
CL_PRIMARIES = 3
CL_LEASE_MS = 5000                    # > a failover: holders can keep their locks
CL_CMD_TIMEOUT_MS = 1000
CL_CONNECT_TIMEOUT_MS = 500
CL_REPLICAS_TIMEOUT_MS = 500
CL_NAMES_PER_SHARD = 2                # names on each primary's own slots
CL_HOT_NAMES = ("{hot}n1", "{hot}n2", "{hot}n3")   # one slot, the migrated one
CL_WORKERS_PER_NAME = 2               # one per daemon
CL_WID0 = 100                         # the cluster stage's worker ids start here
CL_PROBE_SLEEP_S = 0.03
CL_FAILOVER_TIMEOUT = 30.0            # fault -> promotion agreed (the cluster's own business)
CL_REJOIN_TIMEOUT = 30.0              # restart/SIGCONT -> a replica again, all agree
CL_RESUME_TIMEOUT = 20.0              # promotion -> every daemon granted on the shard
CL_PAUSE_S = 3.0                      # SIGSTOP of a primary: at least this long
CL_MIGRATE_HOLD_S = 0.5               # the workload in the ASK window before any key moves
CL_MIGRATE_STEP_S = 0.05              # between single-key MIGRATEs
CL_HOLD_S = 1.0                       # a held holder waits this long for a wrong regrant
CL_SERVE_TIMEOUT = 10.0               # the final LOCK on every shard
CL_INFLIGHT_S = 0.5                   # a grant reply on its way when a primary dies

# The quorum stage (see quorum.py for the topology).
Q_NODES = 5
Q_MAJORITY = Q_NODES // 2 + 1
Q_DAEMONS = 2
Q_CMD_TIMEOUT_MS = 1000
Q_CONNECT_TIMEOUT_MS = 500
Q_NAMES = ("qa", "qb", "qc")          # each its own fenced store
Q_WORKERS_PER_NAME = 2                # one per daemon
Q_WID0 = 200                          # the quorum stage's worker ids start here
Q_PROBE_SLEEP_S = 0.03
Q_INFO_EVERY_S = 0.02                 # INFO sampling of every daemon during the stage
Q_REJOIN_TOL_MS = 25                  # the daemon's timers against ours (same clock)
Q_HELD = "q-held"                     # held on exactly a majority, then one of it restarts
Q_STALE = "q-stale"                   # released while a node is stopped
Q_MAJ = "q-maj"                       # held when a majority dies

PROFILES = {
    #            holder kills, dlockd kills, restarts, pauses, slow readers, settle s, budget s,
    #            and the timing bounds: make chaos holds the strict ones; make test's short
    #            run, on a CI machine that may be busy, bounds that never flake yet still
    #            tell "at once" from "when the lease runs out" (LEASE_MS).
    #            The failover stage: primary kills, forced failovers, whether to wait
    #            for Sentinel to see the restarted node healthy again (about 20 s, fixed by
    #            Sentinel's 10 s INFO period), the slack over command_timeout_ms for
    #            "no request hangs", and +switch-master -> first grant on every daemon.
    #            The cluster stage: rounds of (migration, primary kill[, primary pause]),
    #            the slack over command_timeout_ms, promotion -> first grant on the
    #            shard on every daemon, and the migration's own bound (its steps take
    #            about a second; the ASK-window hold included).
    #            The quorum stage: lease (= rejoin_delay_ms), how long 2 nodes stay dead,
    #            the node SIGSTOP (0: no q-pause phase), whether q-majority runs and how
    #            long 3 nodes stay dead, the slack over command_timeout_ms, how much
    #            later than rejoin_delay_ms a restarted node may count again, the
    #            first grant after a majority counts again, and the longest a daemon
    #            or a name may go without a grant while a majority counts.
    "full":  dict(kills=9, dkills=3, restarts=3, pauses=3, slow=3, settle=3.0, budget=115,
                  handoff_ms=HANDOFF_BOUND_MS, free_ms=FREE_BOUND_MS,
                  fkills=2, forced=1, heal=True, fo_settle=3.0, fo_budget=130,
                  hang_slack_ms=1000, resume_ms=2000,
                  cl_rounds=2, cl_pause=True, cl_settle=2.0, cl_budget=120,
                  cl_hang_slack_ms=1000, cl_resume_ms=2500, cl_migrate_ms=5000,
                  q_lease_ms=3000, q_down_s=2.0, q_pause_s=2.0, q_majority=True,
                  q_maj_down_s=2.0, q_settle=1.0, q_budget=120, q_hang_slack_ms=1000,
                  q_late_ms=3000, q_resume_ms=2000, q_progress_ms=2000, k_budget=60,
                  h_budget=300, u_budget=120),
    "short": dict(kills=3, dkills=1, restarts=1, pauses=1, slow=1, settle=1.0, budget=60,
                  handoff_ms=LEASE_MS // 2, free_ms=LEASE_MS + 1000,
                  fkills=1, forced=0, heal=False, fo_settle=2.0, fo_budget=60,
                  hang_slack_ms=3000, resume_ms=5000,
                  cl_rounds=1, cl_pause=False, cl_settle=1.5, cl_budget=75,
                  cl_hang_slack_ms=3000, cl_resume_ms=6000, cl_migrate_ms=15000,
                  q_lease_ms=2000, q_down_s=1.0, q_pause_s=0.0, q_majority=False,
                  q_maj_down_s=0.0, q_settle=0.5, q_budget=60, q_hang_slack_ms=3000,
                  q_late_ms=6000, q_resume_ms=6000, q_progress_ms=6000, k_budget=45,
                  h_budget=200, u_budget=60),
}


class SuiteTimeout(Exception):
    pass


# ---- processes -------------------------------------------------------------

_state = {"spawner": None, "tmp": None, "keep": False, "stores": [], "topo": None,
          "cleaned": False}


def spawn(argv, logname, env=None):
    """Starts a child (from the main thread only: PDEATHSIG follows the
    thread that forked) with its output appended to a log in the temp dir;
    cleanup() ends every one, whatever happens."""
    return _state["spawner"](argv, logname, env)


def cleanup():
    if _state["cleaned"]:
        return
    _state["cleaned"] = True
    for st in _state["stores"]:
        st.close()
    if _state["topo"] is not None:
        _state["topo"].events.close()
    if _state["spawner"] is not None:
        _state["spawner"].stop()      # every redis-server, dlockd, worker, redis-cli
    tmp = _state["tmp"]
    if tmp and not _state["keep"]:
        shutil.rmtree(tmp, ignore_errors=True)
    elif tmp:
        print("kept %s" % tmp)


def _on_signal(signum, frame):
    raise SystemExit(128 + signum)


def _on_alarm(signum, frame):
    raise SuiteTimeout("the suite ran out of its time budget")


def log_tail(logname, lines=15):
    try:
        with open(os.path.join(_state["tmp"], logname), "rb") as f:
            data = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    | " + l for l in data[-lines:])


def wait_until(fn, timeout, interval=0.01):
    """Calls fn until it returns something true; returns it, or None after
    timeout seconds. Used only for states nothing announces (INFO fields,
    a socket starting to listen)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = fn()
        except (dlock.DlockError, OSError):
            v = None
        if v:
            return v
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def redis_call(path, *args, timeout=1.0):
    """One command to redis-server over RESP; returns the first reply line."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(req)
        buf = b""
        while b"\r\n" not in buf:
            d = s.recv(4096)
            if not d:
                raise OSError("redis closed the connection")
            buf += d
        return buf.split(b"\r\n", 1)[0].decode()
    finally:
        s.close()


ADOPT_RE = re.compile(r"primary is now (\S+):(\d+)")
MAP_RE = re.compile(r"cluster: (\d+) slots? changed hands \(slot (\d+): (\S+) -> (\S+)\)")
KEY_PREFIX = "dlock:"                  # dlockd's default key_prefix
CRASH_RE = re.compile(r"(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|"
                      r"ThreadSanitizer|MemorySanitizer|runtime error:|SUMMARY: \w+Sanitizer|"
                      r"Assertion .* failed|Segmentation fault|stack smashing)")
LOG_TIME_RE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{3}) ")


class Probe(threading.Thread):
    """Loops TRYLOCK <fresh name> 0 / UNLOCK on one daemon, timing every
    request: recs gets (op, t_sent, t_reply, result, detail), result one of
    ok, backend (ERR BACKEND), timeout (TIMEOUT: should not happen on a fresh
    name), lost, conn (no reply or a broken connection; PROBE_TIMEOUT_S is
    the client's reply timeout), error (any other ERR). A reply that never
    comes is recorded as "conn" about PROBE_TIMEOUT_S after t_sent.
    names(n), if given, makes the n-th fresh name (the cluster stage: names
    of one shard); shard is then that shard's index."""

    def __init__(self, suite, i, names=None, shard=None, sleep=PROBE_SLEEP_S):
        super().__init__(name="probe-%d" % i, daemon=True)
        self.path = suite.dsock[i]
        self.i = i
        self.names = names or (lambda n: "probe-%d-%d" % (i, n))
        self.shard = shard
        self.sleep = sleep
        self.recs = []
        self.stop = threading.Event()

    def _one(self, op, fn, *args):
        t0 = time.monotonic()
        detail = ""
        try:
            fn(*args)
            res = "ok"
        except dlock.BackendError as e:
            res, detail = "backend", e.message
        except dlock.Timeout:
            res = "timeout"
        except dlock.LockLost as e:
            res, detail = "lost", e.reason
        except (dlock.ConnectionClosed, dlock.ProtocolError, OSError) as e:
            res, detail = "conn", str(e)
        except dlock.DlockError as e:
            res, detail = "error", str(e)
        self.recs.append((op, t0, time.monotonic(), res, detail))
        return res

    def run(self):
        c = None
        n = 0
        while not self.stop.is_set():
            if c is None:
                try:
                    c = dlock.Client(self.path, timeout=PROBE_TIMEOUT_S)
                except dlock.ConnectFailed as e:
                    t = time.monotonic()
                    self.recs.append(("CONNECT", t, t, "conn", str(e)))
                    self.stop.wait(self.sleep)
                    continue
            n += 1
            name = self.names(n)
            res = self._one("TRYLOCK", c.trylock, name, 0)
            if res == "ok":
                res = self._one("UNLOCK", c.unlock, name)
            if res in ("conn", "lost", "error", "timeout"):
                c.close()
                c = None
            self.stop.wait(self.sleep)
        if c is not None:
            c.close()

    def first_grant(self, since):
        """The reply time of the first grant requested at or after since, or None."""
        for r in list(self.recs):
            if r[0] == "TRYLOCK" and r[3] == "ok" and r[1] >= since:
                return r[2]
        return None

    def last_grant(self, before):
        out = None
        for r in list(self.recs):
            if r[0] == "TRYLOCK" and r[3] == "ok" and r[2] < before:
                out = r[2]
        return out

    def longest_gap(self, t0, t1):
        """The longest time without a grant reply within [t0, t1], in ms."""
        last, gap = t0, 0.0
        for r in list(self.recs):
            if r[0] == "TRYLOCK" and r[3] == "ok" and t0 <= r[2] <= t1:
                gap = max(gap, r[2] - last)
                last = r[2]
        return max(gap, t1 - last) * 1000


class ShardNames(object):
    """Fresh lock names whose keys fall in a shard's slot ranges (avoiding
    the slots in `avoid`): names(n) is the next one, whatever n is."""

    def __init__(self, prefix, ranges, avoid=()):
        self.prefix = prefix
        self.ranges = list(ranges)
        self.avoid = set(avoid)
        self.k = 0

    def __call__(self, n=None):
        while True:
            self.k += 1
            name = "%s%d" % (self.prefix, self.k)
            slot = cluster.keyslot(KEY_PREFIX + name)
            if slot not in self.avoid and any(a <= slot <= b for a, b in self.ranges):
                return name


class InfoWatch(threading.Thread):
    """Samples one daemon's INFO every Q_INFO_EVERY_S on one connection:
    samples gets (t_sent, t_reply, redis, redis_nodes_up, set of the labels
    in redis_down); a failed request is (t_sent, t_reply, None, None, None).
    What the daemon says, over time: which nodes count, when."""

    def __init__(self, suite, i):
        super().__init__(name="info-%d" % i, daemon=True)
        self.path = suite.dsock[i]
        self.i = i
        self.samples = []
        self.stop = threading.Event()

    def run(self):
        c = None
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                if c is None:
                    c = dlock.Client(self.path, timeout=5.0)
                x = c.info()
                down = x.get("redis_down")
                down = set() if down in (None, "-") else \
                    set(d.split("/")[0] for d in str(down).split(","))
                self.samples.append((t0, time.monotonic(), x.get("redis"),
                                     x.get("redis_nodes_up"), down))
            except (dlock.DlockError, OSError):
                self.samples.append((t0, time.monotonic(), None, None, None))
                if c is not None:
                    c.close()
                c = None
            self.stop.wait(Q_INFO_EVERY_S)
        if c is not None:
            c.close()

    def last(self):
        for r in reversed(self.samples):
            if r[2] is not None:
                return r
        return None

    def counted_again(self, label, t_kill):
        """For a node killed at t_kill: (first sample after t_kill that has it
        down or rejoining, first later sample that counts it), each a sample
        or None."""
        down = up = None
        for r in list(self.samples):
            if r[0] < t_kill or r[4] is None:
                continue
            if down is None:
                if label in r[4]:
                    down = r
            elif label not in r[4]:
                up = r
                break
        return down, up


# ---- the suite ---------------------------------------------------------------

class Chaos(object):
    def __init__(self, args):
        self.args = args
        self.prof = PROFILES["short" if args.short else "full"]
        self.mode = "short" if args.short else "full"
        self.rnd = random.Random(args.seed)
        self.tmp = _state["tmp"]
        self.dlockd_bin = os.path.abspath(os.environ.get("DLOCKD_BIN") or
                                          os.path.join(ROOT, "build", "dlockd"))
        self.redis_bin = shutil.which("redis-server")
        self.rsock = os.path.join(self.tmp, "redis.sock")
        self.dsock = [os.path.join(self.tmp, "d%d.sock" % i) for i in range(DAEMONS)]
        self.dconf = [os.path.join(self.tmp, "d%d.conf" % i) for i in range(DAEMONS)]
        self.notify = []
        self.redis = None
        self.daemons = [None] * DAEMONS
        self.killed_daemons = set()    # Popen objects we SIGKILLed
        self.daemon_deaths = []        # unexpected exits: (daemon, rc, log tail)
        self.workers = {}              # wid -> Popen
        self.inc = {}                  # wid -> incarnation
        self.wdaemon = {}              # wid -> daemon index
        self.killed = {}               # (wid, inc) -> time of SIGKILL
        self.worker_deaths = []
        self.faults = []               # dict(kind, t0, t1, daemon, wid, inc)
        self.phases = []               # dict(name, t0, t1)
        self.checks = []               # (name, ok, detail)
        self.problems = []             # things that went wrong in the phases
        self.m = {"handoff": [], "reaped": [], "free": [], "restart": [], "pause": [],
                  "slow": [], "stall_wd": [], "stall_lease": [], "failover": [],
                  "cl_migrate": [], "cl_fault": [], "cl_serve": None,
                  "q_setup": None, "q_kill2": None, "q_pause": None, "q_restart": None,
                  "q_majority": None, "q_restarts": [], "q_final": None}
        self.store = None              # the fenced store of the lock "chaos"
        self.stores = []               # every fenced store (the cluster stage: one per name)
        self.wstore = {}               # wid -> its store, when not self.store
        self.wname = {}                # wid -> its lock name, when not "chaos"
        self.stage_daemons = DAEMONS   # daemons the current stage runs
        self.t_start = time.monotonic()
        self.stages = []               # the stages that started: "standalone", "failover",
                                       # "cluster"
        self.stage = None
        self.daemon_stops = []         # (label, was alive, exit code) of every SIGTERM stop
        self.topo = None               # the failover stage's Sentinel topology
        self.probes = []
        self.fo_t0 = None              # the failover stage's start
        self.cl = None                 # the cluster stage's Redis Cluster
        self.cl_probes = []            # one per daemon and shard
        self.cl_names = []             # dict(name, slot, shard, hot, store, wids)
        self.cl_shards = []            # the primaries' slot ranges at the start
        self.cl_hot_slot = None
        self.cl_t0 = None
        self.qu = None                 # the quorum stage's independent redis-servers
        self.q_probes = []             # one per daemon
        self.q_names = []              # dict(name, store, wids)
        self.q_watch = []              # an InfoWatch per daemon
        self.q_lines = None            # quorum.Lines: the stage's own raw connections
        self.q_held = None             # Q_HELD's holder and waiter, from q-kill2 on
        self.q_t0 = None
        # log time (wall clock, ms) -> time.monotonic()
        self.wall_offset = time.time() - time.monotonic()

    # -- helpers --

    def check(self, name, ok, detail):
        self.checks.append((name, bool(ok), detail))

    def problem(self, text):
        self.problems.append(text)
        print("  ! %s" % text, flush=True)

    def say(self, text):
        print("[%6.1fs] %s" % (time.monotonic() - self.t_start, text), flush=True)

    def log_level(self):
        """[server] log_level for the daemons' configurations (--log-level)."""
        return "log_level = %s\n" % self.args.log_level if self.args.log_level else ""

    def client(self, i, timeout=2.0):
        return dlock.Client(self.dsock[i], timeout=timeout)

    def info(self, i):
        with self.client(i) as c:
            return c.info()

    def info_all_up(self, i, nodes):
        """Daemon i's INFO once it counts all `nodes` up (redis=up, none
        down), waiting up to EVENT_TIMEOUT; otherwise its last INFO (or the
        error) with "bad" set."""
        def full():
            x = self.info(i)
            ok = (x.get("redis_nodes") == x.get("redis_nodes_up") == nodes and
                  x.get("redis_down") == "-" and x.get("redis") == "up")
            return x if ok else None
        x = wait_until(full, EVENT_TIMEOUT, 0.05)
        if x is None:
            try:
                x = self.info(i)
            except (dlock.DlockError, OSError) as e:
                x = {"redis": str(e)}
            x["bad"] = True
        return x

    # -- redis --

    def start_redis(self):
        if os.path.exists(self.rsock):
            os.unlink(self.rsock)     # so that "listening" means the new one
        self.redis = spawn([self.redis_bin, "--port", "0", "--unixsocket", self.rsock,
                            "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                            "--dir", self.tmp], "redis.log")
        ok = wait_until(lambda: self.redis.poll() is None and
                        redis_call(self.rsock, "PING") == "+PONG", START_TIMEOUT)
        if not ok:
            raise RuntimeError("redis-server did not start\n" + log_tail("redis.log"))
        return time.monotonic()

    # -- dlockd --

    def write_configs(self):
        for i in range(DAEMONS):
            with open(self.dconf[i], "w") as f:
                f.write("[server]\nsocket = %s\nadmin_uids = 0\n%s[redis]\nurl = unix://%s\n"
                        "command_timeout_ms = 500\nconnect_timeout_ms = 500\n"
                        "[lock]\nlease_ms = %d\n" % (self.dsock[i], self.log_level(), self.rsock,
                                                     LEASE_MS))
            if len(self.notify) <= i:
                n = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                n.bind(os.path.join(self.tmp, "notify%d.sock" % i))
                self.notify.append(n)

    def write_failover_configs(self):
        for i in range(DAEMONS):
            with open(self.dconf[i], "w") as f:
                f.write("[server]\nsocket = %s\nadmin_uids = 0\n%s[redis]\nsentinels = %s\n"
                        "master_name = %s\ncommand_timeout_ms = %d\nconnect_timeout_ms = %d\n"
                        "replicas_ack = auto\nreplicas_timeout_ms = %d\n"
                        "[lock]\nlease_ms = %d\n"
                        % (self.dsock[i], self.log_level(), " ".join(self.topo.sentinel_addrs()),
                           FO_MASTER,
                           FO_CMD_TIMEOUT_MS, FO_CONNECT_TIMEOUT_MS, FO_REPLICAS_TIMEOUT_MS,
                           FO_LEASE_MS))

    def start_dlockd(self, i):
        """Starts daemon i and waits for its sd_notify READY=1, then for
        INFO redis=up."""
        n = self.notify[i]
        n.setblocking(False)
        try:
            while True:
                n.recv(4096)          # drop what an earlier incarnation said
        except (BlockingIOError, OSError):
            pass
        env = dict(os.environ, NOTIFY_SOCKET=n.getsockname())
        p = spawn([self.dlockd_bin, "-c", self.dconf[i]], "dlockd%d.log" % i, env=env)
        p.index = i
        self.daemons[i] = p
        deadline = time.monotonic() + START_TIMEOUT
        ready = False
        while not ready and time.monotonic() < deadline:
            r, _, _ = select.select([n], [], [], 0.2)
            if r:
                msg = n.recv(4096).decode("utf-8", "replace")
                ready = "READY=1" in msg.split("\n")
            elif p.poll() is not None:
                break
        if not ready:
            raise RuntimeError("dlockd %d did not become ready (rc %s)\n%s"
                               % (i, p.poll(), log_tail("dlockd%d.log" % i)))
        if not wait_until(lambda: self.info(i).get("redis") == "up", START_TIMEOUT, 0.02):
            raise RuntimeError("dlockd %d: redis not up\n%s" % (i, log_tail("dlockd%d.log" % i)))
        return time.monotonic()

    def check_daemons_alive(self, where):
        for i, p in enumerate(self.daemons):
            if p is not None and p not in self.killed_daemons and p.poll() is not None:
                self.daemon_deaths.append((i, p.returncode, where))
                self.problem("dlockd %d died unexpectedly (rc %s) during %s\n%s"
                             % (i, p.returncode, where, log_tail(p.logname)))
                self.killed_daemons.add(p)   # reported once
                self.start_dlockd(i)

    # -- workers --

    def spawn_worker(self, wid, daemon=None):
        inc = self.inc.get(wid, 0) + 1
        self.inc[wid] = inc
        lease = LEASE_MS if wid == LEASE_WID else 0
        if daemon is not None:
            self.wdaemon[wid] = daemon
        d = self.wdaemon.setdefault(wid, wid % DAEMONS)
        argv = [sys.executable, os.path.join(HERE, "worker.py"), str(wid), str(inc), str(d),
                self.dsock[d], self.wstore.get(wid, self.store).path, str(lease),
                str(self.rnd.randrange(1 << 30))]
        if wid in self.wname:
            argv.append(self.wname[wid])
        p = spawn(argv, "worker%d.log" % wid)
        p.wid, p.inc = wid, inc
        self.workers[wid] = p

    def kill_worker(self, wid):
        """SIGKILL; returns the times of the kill and of reaping the process
        (by then its sockets are closed)."""
        p = self.workers[wid]
        t = time.monotonic()
        p.kill()
        self.killed[(wid, p.inc)] = t
        p.wait()
        return t, time.monotonic()

    def check_workers_alive(self, where):
        for wid, p in list(self.workers.items()):
            if p.poll() is not None:
                self.worker_deaths.append((wid, p.inc, p.returncode, where))
                self.problem("worker %d died unexpectedly (rc %s) during %s\n%s"
                             % (wid, p.returncode, where, log_tail(p.logname)))
                self.killed[(wid, p.inc)] = time.monotonic()
                self.spawn_worker(wid)

    # -- store queries --

    def next_grant(self, after, pred, timeout=EVENT_TIMEOUT, store=None):
        """The first grant recorded after grant `after` (of store, by default
        the lock "chaos"'s) that satisfies pred."""
        st = store or self.store

        def find():
            for g in st.grant_order[after["idx"] + 1:]:
                if pred(g):
                    return g
            return None
        return st.wait_for(find, timeout)

    def wait_progress(self, n, timeout=EVENT_TIMEOUT, since=None):
        """Waits for n accepted writes (after time `since`, or from now)."""
        st = self.store
        if since is None:
            base = len(st.accepted)
            return st.wait_for(lambda: len(st.accepted) >= base + n, timeout)
        return st.wait_for(lambda: sum(1 for w in st.accepted[-n:] if w["t"] > since) >= n,
                           timeout)

    def settle(self, where):
        time.sleep(self.prof["settle"])   # plain workload between fault phases
        if not self.wait_progress(10):
            self.problem("no progress after %s" % where)
        self.check_daemons_alive(where)
        self.check_workers_alive(where)

    def hook_arrival(self, h, what, store=None):
        if h.arrived.wait(EVENT_TIMEOUT):
            return h.grant
        (store or self.store).unhook(h)
        self.problem("%s: no holder reached its critical section within %ss" % (what,
                                                                                EVENT_TIMEOUT))
        return None

    def phase(self, name):
        suite = self

        class P(object):
            def __enter__(self):
                suite.say("phase %s" % name)
                self.rec = {"name": name, "t0": time.monotonic()}
                return self

            def __exit__(self, *exc):
                self.rec["t1"] = time.monotonic()
                suite.phases.append(self.rec)
                return False
        return P()

    # -- phases --

    def phase_holder_kill(self):
        with self.phase("holder-kill"):
            for k in range(self.prof["kills"]):
                # Whoever holds next (dlockd hands a lock to local waiters
                # first, so one daemon's workers may hold it for a long time).
                h = self.store.hook(exclude=(LEASE_WID,))
                g = self.hook_arrival(h, "holder-kill")
                if g is None:
                    continue
                wid, d = g["wid"], g["daemon"]
                # The holder sits in its critical section; a waiter of the
                # same daemon must be queued before the kill.
                queued = wait_until(lambda: self.info(d)["waiters"] >= 1, EVENT_TIMEOUT)
                t_kill, t_reaped = self.kill_worker(wid)
                h.release.set()
                nxt = self.next_grant(g, lambda x: x["daemon"] == d)
                if nxt is None:
                    self.problem("holder-kill: no grant on dlockd %d within %ss of the kill"
                                 % (d, EVENT_TIMEOUT))
                    self.m["handoff"].append(None)
                else:
                    ms = (nxt["t_start"] - t_kill) * 1000
                    self.m["handoff"].append(ms)
                    self.m["reaped"].append((nxt["t_start"] - t_reaped) * 1000)
                    self.say("  killed worker %d (fence %d) on dlockd %d%s: next grant %.2f ms "
                             "after the kill, %.2f ms after reaping it (worker %d)"
                             % (wid, g["fence"], d, "" if queued else " [no waiter queued!]",
                                ms, self.m["reaped"][-1], nxt["wid"]))
                if not queued:
                    self.problem("holder-kill: no waiter queued on dlockd %d before the kill" % d)
                self.faults.append(dict(kind="holder-kill", t0=t_kill, t1=t_kill, daemon=d,
                                        wid=wid, inc=g["inc"]))
                self.spawn_worker(wid)
                if not self.wait_progress(5):
                    self.problem("holder-kill: no progress after killing worker %d" % wid)
            self.settle("holder-kill")

    def phase_dlockd_kill(self):
        with self.phase("dlockd-kill"):
            for k in range(self.prof["dkills"]):
                h = self.store.hook(exclude=(LEASE_WID,))
                g = self.hook_arrival(h, "dlockd-kill")
                if g is None:
                    continue
                d = g["daemon"]
                others = [e for e in range(DAEMONS) if e != d]
                queued = wait_until(lambda: any(self.info(e)["waiters"] >= 1 for e in others),
                                    EVENT_TIMEOUT)
                p = self.daemons[d]
                t_kill = time.monotonic()
                p.kill()
                self.killed_daemons.add(p)
                p.wait()
                nxt = self.next_grant(g, lambda x: x["daemon"] != d)
                # Only now may the old holder go on: its write must be fenced.
                h.release.set()
                if nxt is None:
                    self.problem("dlockd-kill: no grant on another daemon within %ss"
                                 % EVENT_TIMEOUT)
                    self.m["free"].append(None)
                else:
                    ms = (nxt["t_start"] - t_kill) * 1000
                    self.m["free"].append(ms)
                if not queued:
                    self.problem("dlockd-kill: no waiter queued on another daemon")
                t_back = self.start_dlockd(d)
                self.faults.append(dict(kind="dlockd-kill", t0=t_kill, t1=t_back, daemon=d,
                                        wid=g["wid"], inc=g["inc"]))
                done = self.store.wait_for(lambda: g["t_end"] is not None, EVENT_TIMEOUT)
                w = g["write"]
                self.say("  killed dlockd %d holding for worker %d (fence %d): lock free on "
                         "dlockd %s after %s ms; old holder's write %s, unlock %s; restarted in "
                         "%.0f ms" % (d, g["wid"], g["fence"], nxt and nxt["daemon"],
                                      "%.1f" % self.m["free"][-1] if nxt else "-",
                                      "none" if w is None else
                                      ("accepted" if w["accepted"] else "rejected"),
                                      g["outcome"] if done else "(no end)",
                                      (t_back - t_kill) * 1000))
                if not self.wait_progress(5):
                    self.problem("dlockd-kill: no progress after restarting dlockd %d" % d)
            self.settle("dlockd-kill")

    def phase_stall(self):
        with self.phase("stall"):
            # (a) A watchdog-mode holder: its connection lives, so dlockd keeps
            # renewing and nobody else may get the lock while it is stopped.
            h = self.store.hook(exclude=(LEASE_WID,))
            g = self.hook_arrival(h, "stall (watchdog)")
            if g is not None:
                wid = g["wid"]
                p = self.workers[wid]
                t_stop = time.monotonic()
                p.send_signal(signal.SIGSTOP)
                h.release.set()
                time.sleep(STALL_S)              # the fault: stopped past the lease
                during = self.next_grant(g, lambda x: True, timeout=0)
                t_cont = time.monotonic()
                p.send_signal(signal.SIGCONT)
                self.faults.append(dict(kind="stall-watchdog", t0=t_stop, t1=t_cont,
                                        daemon=g["daemon"], wid=wid, inc=g["inc"]))
                done = self.store.wait_for(lambda: g["t_end"] is not None, EVENT_TIMEOUT)
                w = g["write"]
                self.m["stall_wd"].append(dict(
                    other_grant=during is not None, ended=bool(done), outcome=g["outcome"],
                    accepted=w is not None and w["accepted"]))
                self.say("  watchdog holder %d stopped %.1f s: other grants meanwhile: %s; its "
                         "write %s, unlock %s" % (wid, t_cont - t_stop,
                                                  "yes" if during else "none",
                                                  "none" if w is None else
                                                  ("accepted" if w["accepted"] else "rejected"),
                                                  g["outcome"]))
            if not self.wait_progress(5):
                self.problem("stall: no progress after the watchdog stall")
            # (b) A lease-mode holder: its lease runs out while it is stopped,
            # the lock moves on, and its late write must be fenced off. It
            # joins on the daemon that grants now, so that its turn comes.
            h = self.store.hook(wid=LEASE_WID)
            self.spawn_worker(LEASE_WID, daemon=self.store.grant_order[-1]["daemon"])
            g = self.hook_arrival(h, "stall (lease)")
            if g is not None:
                p = self.workers[LEASE_WID]
                t_stop = time.monotonic()
                p.send_signal(signal.SIGSTOP)
                h.release.set()
                nxt = self.next_grant(g, lambda x: True)
                time.sleep(0.2)                   # keep it stopped a little past that
                t_cont = time.monotonic()
                p.send_signal(signal.SIGCONT)
                self.faults.append(dict(kind="stall-lease", t0=t_stop, t1=t_cont,
                                        daemon=g["daemon"], wid=LEASE_WID, inc=g["inc"]))
                done = self.store.wait_for(lambda: g["t_end"] is not None, EVENT_TIMEOUT)
                w = g["write"]
                moved = None if nxt is None else (nxt["t_start"] - g["t_start"]) * 1000
                self.m["stall_lease"].append(dict(
                    moved_ms=moved, ended=bool(done), outcome=g["outcome"],
                    write=None if w is None else w["accepted"]))
                self.say("  lease holder %d stopped %.1f s: lock moved on %s ms after its grant; "
                         "its write %s, unlock %s" % (LEASE_WID, t_cont - t_stop,
                                                      "-" if moved is None else "%.0f" % moved,
                                                      "none" if w is None else
                                                      ("accepted" if w["accepted"]
                                                       else "rejected"), g["outcome"]))
            self.settle("stall")

    def measure_recovery(self, t_ref):
        """Per daemon: ms from t_ref until INFO says redis=up, and until a
        LOCK of a private name is granted."""
        out = [None] * DAEMONS

        def one(i):
            deadline = t_ref + RECOVERY_BOUND_S
            up = wait_until(lambda: self.info(i).get("redis") == "up",
                            max(0.0, deadline - time.monotonic()), 0.01)
            t_up = time.monotonic() if up else None
            t_lock = None
            while t_up is not None and time.monotonic() < deadline:
                try:
                    with self.client(i, timeout=RECOVERY_BOUND_S) as c:
                        c.trylock("probe-%d" % i, wait_ms=int(RECOVERY_BOUND_S * 1000))
                        t_lock = time.monotonic()
                        c.unlock("probe-%d" % i)
                    break
                except (dlock.DlockError, OSError):
                    time.sleep(0.01)
            out[i] = (None if t_up is None else (t_up - t_ref) * 1000,
                      None if t_lock is None else (t_lock - t_ref) * 1000)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(DAEMONS)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return out

    def redis_fault(self, kind):
        """Kills and restarts (empty) or pauses redis-server while a holder
        sits in its critical section; that holder goes on only after the
        lock was granted again, so its write must be fenced off."""
        h = self.store.hook(exclude=(LEASE_WID,))
        g = self.hook_arrival(h, kind)
        t0 = time.monotonic()
        if kind == "redis-restart":
            self.redis.kill()
            self.redis.wait()
            time.sleep(REDIS_DOWN_S)              # the fault: Redis is gone
        else:
            self.redis.send_signal(signal.SIGSTOP)
            time.sleep(PAUSE_S)                   # the fault: Redis hangs
        # dlockd must keep answering while Redis is away.
        said = []
        for i in range(DAEMONS):
            try:
                said.append(self.info(i).get("redis"))
            except (dlock.DlockError, OSError):
                said.append("no answer")
        if kind == "redis-restart":
            t_ref = self.start_redis()
        else:
            t_ref = time.monotonic()
            self.redis.send_signal(signal.SIGCONT)
        rec = self.measure_recovery(t_ref)
        t1 = time.monotonic()
        self.faults.append(dict(kind=kind, t0=t0, t1=t1, daemon=None, wid=None, inc=None))
        stale = None
        if g is not None:
            nxt = self.next_grant(g, lambda x: True)
            h.release.set()
            done = self.store.wait_for(lambda: g["t_end"] is not None, EVENT_TIMEOUT)
            w = g["write"]
            stale = dict(regranted=None if nxt is None else (nxt["t_start"] - t_ref) * 1000,
                         write=None if w is None else w["accepted"],
                         outcome=g["outcome"] if done else None, wid=g["wid"])
        prog = self.wait_progress(1, since=t_ref)
        key = "restart" if kind == "redis-restart" else "pause"
        self.m[key].append(dict(rec=rec, progress=bool(prog), down=said, stale=stale))
        self.say("  redis %s %.1f s (daemons said redis=%s meanwhile); recovery ms "
                 "(redis=up, LOCK): %s" % ("killed, restarted empty after"
                                           if kind == "redis-restart" else "stopped",
                                           t_ref - t0, "/".join(said), fmt_rec(rec)))
        if stale is not None:
            self.say("  holder from before (worker %d): lock granted again %s ms after Redis "
                     "was back; its write %s, unlock %s"
                     % (stale["wid"], "-" if stale["regranted"] is None
                        else "%.0f" % stale["regranted"],
                        {None: "none", True: "ACCEPTED", False: "rejected"}[stale["write"]],
                        stale["outcome"]))
        if not prog:
            self.problem("%s: no accepted write after Redis was back" % kind)
        self.check_daemons_alive(kind)

    def phase_redis_restart(self):
        with self.phase("redis-restart"):
            for k in range(self.prof["restarts"]):
                self.redis_fault("redis-restart")
            self.settle("redis-restart")

    def phase_redis_pause(self):
        with self.phase("redis-pause"):
            for k in range(self.prof["pauses"]):
                self.redis_fault("redis-pause")
            self.settle("redis-pause")

    def phase_slow_reader(self):
        with self.phase("slow-reader"):
            for k in range(self.prof["slow"]):
                # On the daemon that grants now: it must keep serving its own
                # workers while it cuts the non-reader off.
                d = self.store.grant_order[-1]["daemon"]
                before = self.info(d)["output_overflows"]
                st = self.store
                a0 = len(st.accepted)
                g0 = len(st.grant_order)
                # The non-reader holds a lock of its own, which must be freed
                # when dlockd cuts it off.
                name = "slow-%d" % k
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(EVENT_TIMEOUT)
                s.connect(self.dsock[d])
                s.sendall(b"LOCK %s\n" % name.encode())
                held = b""
                while not held.endswith(b"\n"):
                    data = s.recv(1)
                    if not data:
                        break
                    held += data
                held = held.startswith(b"OK ")
                s.setblocking(False)
                t0 = time.monotonic()
                chunk = b"INFO\n" * 100
                sent = 0
                closed = False
                poller = select.poll()
                poller.register(s, select.POLLOUT | select.POLLHUP | select.POLLERR |
                                select.POLLRDHUP)
                deadline = t0 + EVENT_TIMEOUT
                while not closed and time.monotonic() < deadline:
                    ev = 0
                    for _, e in poller.poll(20):
                        ev |= e
                    if ev & (select.POLLHUP | select.POLLERR | select.POLLRDHUP):
                        closed = True
                        break
                    if ev & select.POLLOUT:
                        try:
                            sent += s.send(chunk) // 5
                        except BlockingIOError:
                            pass
                        except (BrokenPipeError, ConnectionResetError):
                            closed = True
                            break
                    time.sleep(0.02)              # ~5000 INFO/s, never a read
                t_cut = time.monotonic()
                s.close()
                a1 = len(st.accepted)
                freed = None
                try:
                    with self.client((d + 1) % DAEMONS, timeout=EVENT_TIMEOUT) as c:
                        c.trylock(name, wait_ms=int(EVENT_TIMEOUT * 1000))
                        freed = (time.monotonic() - t_cut) * 1000
                        c.unlock(name)
                except (dlock.DlockError, OSError):
                    pass
                with st.lock:
                    own = sum(1 for g in st.grant_order[g0:] if g["daemon"] == d)
                try:
                    after = self.info(d)["output_overflows"]
                    with self.client(d) as c:
                        pong = c.ping()
                except (dlock.DlockError, OSError):
                    after, pong = None, False
                self.m["slow"].append(dict(daemon=d, closed=closed, sent=sent,
                                           secs=t_cut - t0, before=before, after=after,
                                           writes=a1 - a0, own_grants=own, ping=pong,
                                           held=held, freed=freed))
                self.say("  dlockd %d: non-reader %s after %d INFOs in %.2f s; output_overflows "
                         "%s -> %s; meanwhile %d accepted writes, %d grants on dlockd %d; its "
                         "lock %s free for dlockd %d %s ms after the cut"
                         % (d, "cut off" if closed else "NOT cut off", sent, t_cut - t0,
                            before, after, a1 - a0, own, d, name, (d + 1) % DAEMONS,
                            "-" if freed is None else "%.1f" % freed))
                self.check_daemons_alive("slow-reader")
            self.settle("slow-reader")

    # -- the run --

    def setup(self):
        if self.redis_bin is None:
            raise RuntimeError("redis-server not found in PATH")
        if not os.access(self.dlockd_bin, os.X_OK):
            raise RuntimeError("dlockd binary %s not found; run `make` or set DLOCKD_BIN"
                               % self.dlockd_bin)
        self.store = FencedStore(os.path.join(self.tmp, "store.sock"))
        self.stores.append(self.store)
        _state["stores"] = self.stores

    def start_standalone(self):
        self.stage = "standalone"
        self.stages.append(self.stage)
        self.write_configs()
        self.start_redis()
        for i in range(DAEMONS):
            self.start_dlockd(i)
        for wid in range(WATCHDOG_WORKERS):
            self.spawn_worker(wid)
        self.say("redis-server, %d dlockd (lease %d ms), %d watchdog-mode workers up"
                 % (DAEMONS, LEASE_MS, WATCHDOG_WORKERS))

    def run(self):
        self.setup()
        if self.args.stage in ("all", "standalone"):
            self.start_standalone()
            with self.phase("warmup"):
                if not self.wait_progress(50):
                    self.problem("warmup: the workload makes no progress")
                time.sleep(self.prof["settle"])
            self.phase_holder_kill()
            self.phase_dlockd_kill()
            self.phase_stall()
            self.phase_redis_restart()
            self.phase_redis_pause()
            self.phase_slow_reader()
        if self.args.stage in ("all", "failover"):
            if self.stage == "standalone":
                self.end_standalone()
            self.start_failover()
            with self.phase("fo-warmup"):
                if not self.wait_progress(30):
                    self.problem("failover warmup: the workload makes no progress")
                time.sleep(self.prof["fo_settle"])
            for k in range(self.prof["fkills"]):
                self.failover("kill", heal=self.prof["heal"])
            for k in range(self.prof["forced"]):
                self.failover("forced", heal=self.prof["heal"])
            self.check_follows_sentinel("the end of the stage")
        if self.args.stage in ("all", "cluster"):
            if self.stage == "failover":
                self.end_failover()
            elif self.stage == "standalone":
                self.end_standalone()
            self.start_cluster()
            with self.phase("cl-warmup"):
                late = self.wait_names_progress(self.cl_names, 5, since=self.cl_t0)
                if late:
                    self.problem("cluster warmup: no progress on %s" % " ".join(late))
                t = time.monotonic()
                time.sleep(self.prof["cl_settle"])
                self.m["cl_rate"] = self.cl_rate(t, time.monotonic())
                self.say("  %.0f grants/s over %d names without faults"
                         % (self.m["cl_rate"], len(self.cl_names)))
            for r in range(self.prof["cl_rounds"]):
                self.cl_migrate()
                self.cl_failover("kill")
                if self.prof["cl_pause"]:
                    self.cl_failover("pause")
            self.cl_serve_check()
        if self.args.stage in ("all", "quorum"):
            if self.stage == "cluster":
                self.end_cluster()
            elif self.stage == "failover":
                self.end_failover()
            elif self.stage == "standalone":
                self.end_standalone()
            self.start_quorum()
            with self.phase("q-warmup"):
                late = self.wait_names_progress(self.q_names, 5, since=self.q_t0)
                if late:
                    self.problem("quorum warmup: no progress on %s" % " ".join(late))
                time.sleep(self.prof["q_settle"])
            self.q_kill2()
            if self.prof["q_pause_s"] > 0:
                self.q_pause()
            self.q_restart_empty()
            if self.prof["q_majority"]:
                self.q_majority()
            self.q_serve_check()
        self.finish_workers()
        self.stop_probes()
        if self.args.stage in ("all", "kinds"):
            with self.phase("kinds"):
                kinds.run_stage(self, spawn, self.args.short)
        if self.args.stage in ("all", "elect"):
            with self.phase("elect"):
                elect.run_stage(self, spawn, self.args.short)
        if self.args.stage in ("all", "mlock"):
            with self.phase("mlock"):
                mlock.run_stage(self, spawn, self.args.short)
        if self.args.stage in ("all", "hot"):
            with self.phase("hot"):
                hot.run_stage(self, spawn, self.args.short)
        if self.args.stage in ("all", "upgrade"):
            with self.phase("upgrade"):
                upgrade.run_stage(self, spawn, self.args.short)

    def finish_workers(self):
        with self.phase("stop"):
            self.stop_workers("the run")

    def stop_workers(self, where):
        """Lets every worker finish its section, unlock and exit (reads answer
        Q), and forgets them."""
        self.check_workers_alive(where)
        for st in set(self.wstore.get(wid, self.store) for wid in self.workers):
            st.stop_workers()
        deadline = time.monotonic() + EVENT_TIMEOUT
        for wid, p in self.workers.items():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.problem("worker %d did not stop; killed" % wid)
                self.kill_worker(wid)
            if p.returncode not in (0, -signal.SIGKILL):
                self.problem("worker %d exited with %s\n%s" % (wid, p.returncode,
                                                              log_tail(p.logname)))
        self.workers = {}

    def end_standalone(self):
        """Between the stages: the workers finish, the daemons stop (exit 0
        on SIGTERM), redis-server goes."""
        with self.phase("stage-switch"):
            self.stop_workers("the standalone stage")
            self.check_daemons_alive("the standalone stage")
            self.stop_daemons()
            if self.redis is not None and self.redis.poll() is None:
                self.redis.kill()
                self.redis.wait()

    # -- the failover stage --

    def start_failover(self):
        self.stage = "failover"
        self.stages.append(self.stage)
        self.fo_t0 = time.monotonic()
        with self.phase("fo-setup"):
            self.topo = _state["topo"] = sentinel.Topology(
                self.tmp, name=FO_MASTER, replicas=2, sentinels=3, quorum=2,
                down_after_ms=FO_DOWN_AFTER_MS, failover_timeout_ms=FO_FAILOVER_TIMEOUT_MS,
                spawn=spawn, say=self.say)
            try:
                self.topo.start(timeout=3 * START_TIMEOUT)
            except sentinel.TopologyError as e:
                raise RuntimeError(str(e))
            self.write_configs()              # the notify sockets, if stage 1 did not run
            self.write_failover_configs()
            for i in range(DAEMONS):
                self.start_dlockd(i)
            backends = [self.info(i).get("backend") for i in range(DAEMONS)]
            self.m["fo_backend"] = backends
            if any(b != "sentinel" for b in backends):
                self.problem("failover stage: INFO backend= says %s, not sentinel"
                             % "/".join(str(b) for b in backends))
            self.check_follows_sentinel("the start of the stage")
            self.store.resume_workers()
            for wid in range(WATCHDOG_WORKERS):
                self.spawn_worker(wid)
            for i in range(DAEMONS):
                pr = Probe(self, i)
                pr.start()
                self.probes.append(pr)
        self.say("Sentinel topology (%s), %d dlockd with sentinels (lease %d ms, "
                 "replicas_ack auto), %d watchdog-mode workers, %d probes up"
                 % (FO_MASTER, DAEMONS, FO_LEASE_MS, WATCHDOG_WORKERS, len(self.probes)))

    def stop_probes(self):
        threads = self.probes + self.cl_probes + self.q_probes + self.q_watch
        for pr in threads:
            pr.stop.set()
        for pr in threads:
            pr.join(PROBE_TIMEOUT_S + 5)
        if self.q_lines is not None:
            self.q_lines.close()
            self.q_lines = None

    def adoptions(self, i, since):
        """dlockd i's "primary is now HOST:PORT" log lines from `since` on, as
        [(t, port)] with log times (ms) turned into time.monotonic()."""
        return [(t, int(m.group(2))) for t, m in self.log_matches(i, ADOPT_RE, since)]

    def log_matches(self, i, regex, since):
        """dlockd i's log lines matching regex from `since` on, as [(t, match)]
        with log times (ms) turned into time.monotonic()."""
        out = []
        try:
            with open(os.path.join(self.tmp, "dlockd%d.log" % i), "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            return out
        for line in data.splitlines():
            m = regex.search(line)
            if not m:
                continue
            ts = LOG_TIME_RE.match(line)
            if ts is None:
                continue
            try:
                wall = time.mktime(time.strptime(ts.group(1), "%Y-%m-%d %H:%M:%S"))
            except ValueError:
                continue
            t = wall + int(ts.group(2)) / 1000.0 - self.wall_offset
            if t >= since - 0.002:           # the log has ms
                out.append((t, m))
        return out

    def check_follows_sentinel(self, where):
        """Every daemon's last adopted primary is the one Sentinel names."""
        try:
            want = self.topo.master_port(0)
        except (OSError, sentinel.RespError) as e:
            self.problem("%s: Sentinel did not answer: %s" % (where, e))
            return
        got = []
        deadline = time.monotonic() + EVENT_TIMEOUT
        while True:
            got = [self.adoptions(i, self.fo_t0) for i in range(DAEMONS)]
            if all(a and a[-1][1] == want for a in got) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        bad = ["d%d: %s" % (i, ":%d" % a[-1][1] if a else "no 'primary is now' line")
               for i, a in enumerate(got) if not a or a[-1][1] != want]
        self.m.setdefault("follows", []).append((where, want, bad))
        if bad:
            self.problem("%s: Sentinel names :%d as the primary, but %s"
                         % (where, want, ", ".join(bad)))

    def first_probe_grant(self, i, since):
        """The first probe grant on dlockd i requested at or after `since`:
        the time its reply came, or None."""
        return self.probes[i].first_grant(since)

    def last_probe_grant(self, i, before):
        return self.probes[i].last_grant(before)

    def failover(self, kind, heal):
        """kind "kill": SIGKILL the primary, then restart it on its port;
        "forced": SENTINEL FAILOVER. A holder sits in its critical section
        meanwhile; it goes on once every daemon grants again and the lock
        moved on or FO_HOLD_S passed."""
        topo = self.topo
        with self.phase("failover-" + kind):
            h = self.store.hook(exclude=(LEASE_WID,))
            g = self.hook_arrival(h, "failover-" + kind)
            old = topo.primary
            old_port = topo.nodes[old]["port"]
            if kind == "kill":
                t0 = topo.kill(old)
            else:
                try:
                    t0 = topo.force_failover(self.rnd.randrange(len(topo.sentinels)))
                except (OSError, sentinel.RespError) as e:
                    h.release.set()
                    self.problem("SENTINEL FAILOVER failed: %s" % e)
                    return
            sw = topo.wait_switch(t0, FO_SWITCH_TIMEOUT)
            rec = dict(kind=kind, old=old_port, t0=t0, new=None, sdown=None, odown=None,
                       switch=None, adopt=[None] * DAEMONS, grant=[None] * DAEMONS,
                       gap=[None] * DAEMONS, holder=None, heal=None, restart=None)
            for ch in ("+sdown", "+odown"):
                e = topo.events.first(ch, t0, prefix="master %s 127.0.0.1 %d" % (FO_MASTER,
                                                                                 old_port))
                if e is not None:
                    rec[ch[1:]] = (e[0] - t0) * 1000
            if sw is None:
                self.problem("failover-%s: no +switch-master within %.0f s" % (kind,
                                                                               FO_SWITCH_TIMEOUT))
            else:
                rec["switch"] = (sw[0] - t0) * 1000
                rec["new"] = sw[2]
                # Every daemon adopts the new primary and grants a fresh lock.
                deadline = sw[0] + FO_RESUME_TIMEOUT
                while time.monotonic() < deadline:
                    for i in range(DAEMONS):
                        if rec["adopt"][i] is None:
                            a = [t for t, port in self.adoptions(i, t0) if port == sw[2]]
                            if a:
                                rec["adopt"][i] = (a[0] - t0) * 1000
                        if rec["adopt"][i] is not None and rec["grant"][i] is None:
                            tg = self.first_probe_grant(i, t0 + rec["adopt"][i] / 1000.0)
                            if tg is not None:
                                rec["grant"][i] = (tg - t0) * 1000
                                before = self.last_probe_grant(i, t0)
                                if before is not None:
                                    rec["gap"][i] = (tg - before) * 1000
                    if all(x is not None for x in rec["grant"]):
                        break
                    time.sleep(0.02)
                if any(x is None for x in rec["grant"]):
                    self.problem("failover-%s: not every dlockd adopted :%d and granted "
                                 "within %.0f s of +switch-master (adopted ms %s, granted ms %s)"
                                 % (kind, sw[2], FO_RESUME_TIMEOUT, fmt_list(rec["adopt"]),
                                    fmt_list(rec["grant"])))
            t_back = time.monotonic()
            if g is not None:
                # The holder from before: did it keep the lock?
                nxt = self.next_grant(g, lambda x: True, timeout=FO_HOLD_S)
                h.release.set()
                done = self.store.wait_for(lambda: g["t_end"] is not None, EVENT_TIMEOUT)
                w = g["write"]
                rec["holder"] = dict(wid=g["wid"], fence=g["fence"],
                                     regranted=None if nxt is None
                                     else (nxt["t_start"] - t0) * 1000,
                                     write=None if w is None else w["accepted"],
                                     outcome=g["outcome"] if done else None)
            self.faults.append(dict(kind="failover-" + kind, t0=t0, t1=t_back, daemon=None,
                                    wid=None, inc=None,
                                    trail=FO_LEASE_MS / 1000.0 + LOSS_WINDOW_S))
            if kind == "kill":
                try:
                    rec["restart"] = topo.restart(old)
                except sentinel.TopologyError as e:
                    self.problem("failover-kill: %s" % e)
            self.m["failover"].append(rec)
            self.say("  %s of primary :%d: Sentinel +sdown %s, +odown %s, +switch-master %s ms "
                     "(to :%s); dlockd adopted it at %s ms, first grant at %s ms (gap in "
                     "grants %s ms)"
                     % ("SIGKILL" if kind == "kill" else "SENTINEL FAILOVER", old_port,
                        fmt_ms(rec["sdown"]), fmt_ms(rec["odown"]), fmt_ms(rec["switch"]),
                        rec["new"], fmt_list(rec["adopt"]), fmt_list(rec["grant"]),
                        fmt_list(rec["gap"])))
            if rec["holder"] is not None:
                x = rec["holder"]
                self.say("  holder from before (worker %d, fence %d): %s; its write %s, unlock "
                         "%s" % (x["wid"], x["fence"],
                                 "lock granted again %.0f ms after the fault" % x["regranted"]
                                 if x["regranted"] is not None else "nobody else got the lock",
                                 {None: "none", True: "accepted", False: "rejected"}[x["write"]],
                                 x["outcome"]))
            if not self.wait_progress(5, since=t_back):
                self.problem("failover-%s: no progress after the failover" % kind)
            self.check_daemons_alive("failover-" + kind)
            self.check_workers_alive("failover-" + kind)
            if heal:
                t_h = time.monotonic()
                why = topo.wait_healthy(FO_HEAL_TIMEOUT)
                rec["heal"] = None if why else (time.monotonic() - t_h)
                if why:
                    self.problem("failover-%s: the topology did not heal within %.0f s: %s"
                                 % (kind, FO_HEAL_TIMEOUT, why))
                else:
                    self.say("  Sentinel sees every replica healthy again after %.1f s"
                             % rec["heal"])
                self.check_follows_sentinel("failover-%s, healed" % kind)
            time.sleep(self.prof["fo_settle"])
            if not self.wait_progress(10):
                self.problem("no progress after failover-%s" % kind)

    # -- the cluster stage --

    def end_failover(self):
        """Between the failover and cluster stages: the workers and probes
        finish, the daemons stop (exit 0 on SIGTERM), the Sentinel topology
        goes."""
        with self.phase("cl-switch"):
            self.stop_workers("the failover stage")
            self.stop_probes()
            self.check_daemons_alive("the failover stage")
            self.stop_daemons()
            self.topo.stop()

    def write_cluster_configs(self):
        for i in range(CL_DAEMONS):
            with open(self.dconf[i], "w") as f:
                f.write("[server]\nsocket = %s\nadmin_uids = 0\n%s[redis]\ncluster = %s\n"
                        "command_timeout_ms = %d\nconnect_timeout_ms = %d\n"
                        "replicas_ack = auto\nreplicas_timeout_ms = %d\n"
                        "[lock]\nlease_ms = %d\n"
                        % (self.dsock[i], self.log_level(), self.cl.addrs(), CL_CMD_TIMEOUT_MS,
                           CL_CONNECT_TIMEOUT_MS, CL_REPLICAS_TIMEOUT_MS, CL_LEASE_MS))

    def cl_shard_of(self, slot):
        """The index of the shard (a primary's slot ranges at the start) of slot."""
        for k, sh in enumerate(self.cl_shards):
            if any(a <= slot <= b for a, b in sh["ranges"]):
                return k
        return None

    def cl_pick_names(self):
        """CL_NAMES_PER_SHARD names on each primary's slots (not the {hot}
        slot), and the {hot} names, each with its own fenced store."""
        self.cl_hot_slot = cluster.keyslot(KEY_PREFIX + CL_HOT_NAMES[0])
        self.cl_shards = [dict(port0=port, ranges=self.cl.slots_of(port))
                          for port in self.cl.primaries()]
        names = []
        for k, sh in enumerate(self.cl_shards):
            gen = ShardNames("cl%d-" % k, sh["ranges"], avoid=(self.cl_hot_slot,))
            for _ in range(CL_NAMES_PER_SHARD):
                n = gen()
                names.append(dict(name=n, slot=cluster.keyslot(KEY_PREFIX + n), hot=False))
        for n in CL_HOT_NAMES:
            names.append(dict(name=n, slot=self.cl_hot_slot, hot=True))
        for k, x in enumerate(names):
            x["store"] = FencedStore(os.path.join(self.tmp, "store-cl%d.sock" % k))
            x["wids"] = [CL_WID0 + k * CL_WORKERS_PER_NAME + j
                         for j in range(CL_WORKERS_PER_NAME)]
            self.stores.append(x["store"])
        self.cl_names = names

    def start_cluster(self):
        self.stage = "cluster"
        self.stages.append(self.stage)
        self.cl_t0 = time.monotonic()
        self.stage_daemons = CL_DAEMONS
        with self.phase("cl-setup"):
            self.cl = cluster.Cluster(self.tmp, primaries=CL_PRIMARIES, replicas=1,
                                      spawn=spawn, say=self.say)
            try:
                self.cl.start(timeout=3 * START_TIMEOUT)
            except cluster.ClusterError as e:
                raise RuntimeError(str(e))
            self.write_configs()              # the notify sockets, if no stage ran before
            self.write_cluster_configs()
            for i in range(CL_DAEMONS):
                self.start_dlockd(i)
            infos = [self.info(i) for i in range(CL_DAEMONS)]
            self.m["cl_backend"] = ["%s %s/%s" % (x.get("backend"), x.get("redis_nodes_up"),
                                                  x.get("redis_nodes")) for x in infos]
            if any(x.get("backend") != "cluster" or x.get("redis_nodes") != CL_PRIMARIES
                   for x in infos):
                self.problem("cluster stage: INFO says backend/redis_nodes_up/redis_nodes %s, "
                             "not cluster %d/%d" % (", ".join(self.m["cl_backend"]),
                                                    CL_PRIMARIES, CL_PRIMARIES))
            self.cl_pick_names()
            for x in self.cl_names:
                for j, wid in enumerate(x["wids"]):
                    self.wstore[wid] = x["store"]
                    self.wname[wid] = x["name"]
                    self.spawn_worker(wid, daemon=j % CL_DAEMONS)
            for i in range(CL_DAEMONS):
                for k, sh in enumerate(self.cl_shards):
                    pr = Probe(self, i, names=ShardNames("clp%d-%d-" % (i, k), sh["ranges"],
                                                         avoid=(self.cl_hot_slot,)),
                               shard=k, sleep=CL_PROBE_SLEEP_S)
                    pr.start()
                    self.cl_probes.append(pr)
        self.say("%d dlockd on the cluster (lease %d ms, replicas_ack auto), %d names (%s), "
                 "%d watchdog-mode workers, %d probes up"
                 % (CL_DAEMONS, CL_LEASE_MS, len(self.cl_names),
                    " ".join("%s@%d:%d" % (x["name"], x["slot"], self.cl.owner(x["slot"]))
                             for x in self.cl_names),
                    sum(len(x["wids"]) for x in self.cl_names), len(self.cl_probes)))

    def wait_names_progress(self, names, n, since, timeout=EVENT_TIMEOUT):
        """Waits until each of names has n accepted writes after `since`;
        returns the names that did not within timeout seconds."""
        deadline = time.monotonic() + timeout
        late = []
        for x in names:
            st = x["store"]
            if not st.wait_for(lambda st=st: sum(1 for w in st.accepted[-n:]
                                                 if w["t"] > since) >= n,
                               max(0.0, deadline - time.monotonic())):
                late.append(x["name"])
        return late

    def cl_settle(self, where):
        time.sleep(self.prof["cl_settle"])    # plain workload between faults
        late = self.wait_names_progress(self.cl_names, 3, since=time.monotonic())
        if late:
            self.problem("no progress on %s after %s" % (" ".join(late), where))
        self.check_daemons_alive(where)
        self.check_workers_alive(where)

    def cl_rate(self, t0, t1):
        """Grants per second on every name of the cluster stage in [t0, t1]."""
        n = sum(1 for x in self.cl_names for g in list(x["store"].grant_order)
                if t0 <= g["t_start"] < t1)
        return n / max(t1 - t0, 1e-3)

    def cl_map_seen(self, t0, port):
        """Per daemon: ms from t0 to its log line saying slots changed hands
        to the node on port (None: no such line; a slot that MOVED already
        told about is not logged again)."""
        out = [None] * CL_DAEMONS
        for i in range(CL_DAEMONS):
            for t, m in self.log_matches(i, MAP_RE, t0):
                if m.group(4).endswith(":%d" % port):
                    out[i] = (t - t0) * 1000
                    break
        return out

    def cl_migrate(self):
        """Moves the {hot} slot to the next primary, in steps, with a holder
        of a {hot} name inside its critical section throughout."""
        cl, slot = self.cl, self.cl_hot_slot
        with self.phase("cl-migrate"):
            src = cl.owner(slot)
            prims = cl.primaries()
            dst = prims[(prims.index(src) + 1) % len(prims)]
            hot = [x for x in self.cl_names if x["hot"]]
            x = hot[self.rnd.randrange(len(hot))]
            st = x["store"]
            h = st.hook()
            g = self.hook_arrival(h, "cl-migrate", store=st)
            rec = dict(slot=slot, src=src, dst=dst, name=x["name"], steps=None, holder=None,
                       late=None, rate=None, ms=None, redir=None, pause=None)
            try:
                redir0 = [cl.redirections(p) for p in (src, dst)]
            except (OSError, RespError):
                redir0 = None
            t0 = time.monotonic()
            try:
                rec["steps"] = cl.migrate(slot, dst, batch=1, between_s=CL_MIGRATE_STEP_S,
                                          hold=lambda: time.sleep(CL_MIGRATE_HOLD_S))
            except (cluster.ClusterError, OSError, RespError) as e:
                self.problem("cl-migrate: slot %d :%d -> :%d failed: %s" % (slot, src, dst, e))
            t1 = time.monotonic()
            rec["ms"] = (t1 - t0) * 1000
            rec["rate"] = self.cl_rate(t0, t1)
            try:
                redir1 = [cl.redirections(p) for p in (src, dst)]
                rec["redir"] = dict((k, sum(b[k] - a[k] for a, b in zip(redir0, redir1)))
                                    for k in redir1[0])
            except (OSError, RespError, TypeError):
                pass
            # The longest pause of the other {hot} names' grants (the held one waits).
            last, pause = t0, 0.0
            for t in sorted(y["t_start"] for z in hot if z is not x
                            for y in list(z["store"].grant_order) if t0 <= y["t_start"] <= t1):
                pause = max(pause, t - last)
                last = t
            rec["pause"] = max(pause, t1 - last) * 1000
            if g is not None:
                # Nobody else may get the held lock; then its holder goes on.
                nxt = self.next_grant(g, lambda y: True, timeout=CL_HOLD_S, store=st)
                h.release.set()
                done = st.wait_for(lambda: g["t_end"] is not None, EVENT_TIMEOUT)
                w = g["write"]
                rec["holder"] = dict(wid=g["wid"], fence=g["fence"],
                                     regranted=None if nxt is None
                                     else (nxt["t_start"] - t0) * 1000,
                                     write=None if w is None else w["accepted"],
                                     outcome=g["outcome"] if done else None)
            self.faults.append(dict(kind="cl-migrate", t0=t0, t1=t1, daemon=None, wid=None,
                                    inc=None, ranges=[(slot, slot)], port=src))
            rec["late"] = self.wait_names_progress(hot, 3, since=t1)
            self.m["cl_migrate"].append(rec)
            s = rec["steps"]
            self.say("  slot %d ({hot}) :%d -> :%d in %.0f ms: IMPORTING/MIGRATING %s ms, %.0f ms "
                     "of load in the ASK window, %s keys in %s MIGRATEs %s ms, SETSLOT NODE %s "
                     "ms, all nodes agree %s ms; the nodes answered %s; the other {hot} names' "
                     "longest pause %.0f ms; %.0f grants/s"
                     % (slot, src, dst, rec["ms"],
                        "-" if s is None else "%.0f" % ((s["t_begun"] - s["t0"]) * 1000),
                        CL_MIGRATE_HOLD_S * 1000, "-" if s is None else s["keys"],
                        "-" if s is None else s["batches"],
                        "-" if s is None else "%.0f" % ((s["t_keys"] - s["t_keys0"]) * 1000),
                        "-" if s is None else "%.0f" % ((s["t_node"] - s["t_keys"]) * 1000),
                        "-" if s is None else "%.0f" % ((s["t_agreed"] - s["t_node"]) * 1000),
                        fmt_redir(rec["redir"]), rec["pause"], rec["rate"]))
            y = rec["holder"]
            if y is not None:
                self.say("  holder of %s (worker %d, fence %d) held throughout: %s; its write "
                         "%s, unlock %s" % (x["name"], y["wid"], y["fence"],
                                            "nobody else got the lock" if y["regranted"] is None
                                            else "LOCK GRANTED AGAIN %.0f ms after the start"
                                            % y["regranted"],
                                            {None: "none", True: "accepted",
                                             False: "REJECTED"}[y["write"]], y["outcome"]))
            if rec["late"]:
                self.problem("cl-migrate: no progress on %s after the migration"
                             % " ".join(rec["late"]))
            self.cl_settle("cl-migrate")

    def cl_failover(self, kind):
        """kind "kill": SIGKILL the primary owning {hot}, wait for its
        replica's promotion, restart it (empty) and wait until it is a
        replica; "pause": SIGSTOP another primary until its replica is
        promoted (and CL_PAUSE_S passed), then SIGCONT. A holder of one of
        the victim's names sits in its critical section meanwhile."""
        cl = self.cl
        with self.phase("cl-" + kind):
            hot_owner = cl.owner(self.cl_hot_slot)
            if kind == "kill":
                victim = hot_owner
            else:
                others = [p for p in cl.primaries() if p != hot_owner]
                victim = others[self.rnd.randrange(len(others))]
            vi = cl.node_of_port(victim)
            ranges = cl.slots_of(victim)
            k = self.cl_shard_of(max(ranges, key=lambda r: r[1] - r[0])[0])
            names = [x for x in self.cl_names if any(a <= x["slot"] <= b for a, b in ranges)]
            regular = [x for x in names if not x["hot"]]
            x = regular[self.rnd.randrange(len(regular))]
            st = x["store"]
            h = st.hook()
            g = self.hook_arrival(h, "cl-" + kind, store=st)
            rec = dict(kind=kind, old=victim, new=None, shard=k, names=[y["name"] for y in names],
                       promoted=None, seen=[None] * CL_DAEMONS, grant=[None] * CL_DAEMONS,
                       gap=[None] * CL_DAEMONS, others=[None] * CL_DAEMONS, worker=None,
                       holder=None, role=None, healed=None, rate=None, down_s=None)
            t0 = cl.kill(vi) if kind == "kill" else cl.pause(vi)
            tf, new = cl.wait_failover(victim, CL_FAILOVER_TIMEOUT)
            probes = [p for p in self.cl_probes if p.shard == k]
            if tf is None:
                self.problem("cl-%s of :%d: no promotion within %.0f s: %s"
                             % (kind, victim, CL_FAILOVER_TIMEOUT, new))
                new = None
            else:
                rec["promoted"] = (tf - t0) * 1000
                rec["new"] = new
                # Every daemon grants on the shard again (its probe there).
                deadline = tf + CL_RESUME_TIMEOUT
                while time.monotonic() < deadline:
                    for p in probes:
                        if rec["grant"][p.i] is None:
                            tg = p.first_grant(t0)
                            if tg is not None:
                                rec["grant"][p.i] = (tg - t0) * 1000
                                before = p.last_grant(t0)
                                if before is not None:
                                    rec["gap"][p.i] = (tg - before) * 1000
                    if all(v is not None for v in rec["grant"]):
                        break
                    time.sleep(0.02)
                if any(v is None for v in rec["grant"]):
                    self.problem("cl-%s: not every dlockd granted on :%d's slots within %.0f s "
                                 "of the promotion (first grant ms %s)"
                                 % (kind, victim, CL_RESUME_TIMEOUT, fmt_list(rec["grant"])))
            t_back = time.monotonic()
            if g is not None:
                # The holder from before: did it keep the lock?
                nxt = self.next_grant(g, lambda y: True, timeout=CL_HOLD_S, store=st)
                h.release.set()
                done = st.wait_for(lambda: g["t_end"] is not None, EVENT_TIMEOUT)
                w = g["write"]
                rec["holder"] = dict(wid=g["wid"], fence=g["fence"], name=x["name"],
                                     regranted=None if nxt is None
                                     else (nxt["t_start"] - t0) * 1000,
                                     write=None if w is None else w["accepted"],
                                     outcome=g["outcome"] if done else None)
            try:
                if kind == "kill":
                    t_res = cl.restart(vi)
                else:
                    time.sleep(max(0.0, t0 + CL_PAUSE_S - time.monotonic()))  # the fault
                    t_res = cl.resume(vi)
            except cluster.ClusterError as e:
                self.problem("cl-%s: %s" % (kind, e))
                t_res = time.monotonic()
            rec["down_s"] = t_res - t0
            self.faults.append(dict(kind="cl-" + kind, t0=t0, t1=max(t_back, t_res), daemon=None,
                                    wid=None, inc=None, ranges=ranges, port=victim,
                                    trail=CL_LEASE_MS / 1000.0 + LOSS_WINDOW_S,
                                    t_promoted=tf, t_res=t_res))
            if new is not None:
                t_role, t_all, why = cl.wait_rejoined(vi, new, CL_REJOIN_TIMEOUT)
                rec["role"] = None if t_role is None else (t_role - t_res) * 1000
                rec["healed"] = None if t_all is None else (t_all - t_res) * 1000
                if t_all is None:
                    self.problem("cl-%s: :%d is not a replica of :%d with every node agreeing "
                                 "within %.0f s of its %s: %s"
                                 % (kind, victim, new, CL_REJOIN_TIMEOUT,
                                    "restart" if kind == "kill" else "SIGCONT", why))
            rec["rate"] = self.cl_rate(t0, t_back)
            for p in self.cl_probes:
                if p.shard != k:
                    v = p.longest_gap(t0, t_back)
                    rec["others"][p.i] = max(rec["others"][p.i] or 0.0, v)
            firsts = [y["t_start"] for y2 in names for y in list(y2["store"].grant_order)
                      if y["t_req"] >= t0]
            rec["worker"] = (min(firsts) - t0) * 1000 if firsts else None
            if new is not None:
                rec["seen"] = self.cl_map_seen(t0, new)
            self.m["cl_fault"].append(rec)
            self.say("  %s of primary :%d (%s): replica :%s promoted (nodes agree) at %s ms; "
                     "dlockd logged the new map at %s ms; first probe grant on its slots at %s "
                     "ms (gap %s ms), first worker grant at %s ms; other shards' longest pause "
                     "%s ms; %.0f grants/s meanwhile"
                     % ("SIGKILL" if kind == "kill" else "SIGSTOP %.1f s" % rec["down_s"], victim,
                        " ".join(rec["names"]), new, fmt_ms(rec["promoted"]),
                        fmt_list(rec["seen"]), fmt_list(rec["grant"]), fmt_list(rec["gap"]),
                        fmt_ms(rec["worker"]), fmt_list(rec["others"]), rec["rate"]))
            self.say("  :%d %s: a replica of :%s (ROLE) after %s ms, every node agrees after %s "
                     "ms" % (victim, "restarted empty" if kind == "kill" else "SIGCONT", new,
                             fmt_ms(rec["role"]), fmt_ms(rec["healed"])))
            y = rec["holder"]
            if y is not None:
                self.say("  holder from before (%s, worker %d, fence %d): %s; its write %s, "
                         "unlock %s" % (y["name"], y["wid"], y["fence"],
                                        "lock granted again %.0f ms after the fault"
                                        % y["regranted"] if y["regranted"] is not None
                                        else "nobody else got the lock",
                                        {None: "none", True: "accepted",
                                         False: "rejected"}[y["write"]], y["outcome"]))
            self.cl_settle("cl-" + kind)

    def cl_serve_check(self):
        """At the end: every daemon LOCKs and UNLOCKs a fresh name on every
        primary, and INFO counts every primary up."""
        cl = self.cl
        with self.phase("cl-final"):
            why = cl.wait_agree(CL_REJOIN_TIMEOUT, full=True)
            if why:
                self.problem("cl-final: the cluster does not agree in full: %s" % why)
            res, infos = [], []
            for i in range(CL_DAEMONS):
                for port in cl.primaries():
                    name = ShardNames("clf%d-%d-" % (i, port), cl.slots_of(port))()
                    t = time.monotonic()
                    try:
                        with self.client(i, timeout=CL_SERVE_TIMEOUT + 5) as c:
                            c.trylock(name, wait_ms=int(CL_SERVE_TIMEOUT * 1000))
                            c.unlock(name)
                        out = "ok"
                    except (dlock.DlockError, OSError) as e:
                        out = "%s: %s" % (type(e).__name__, e)
                    res.append((i, port, name, out, (time.monotonic() - t) * 1000))

                infos.append(self.info_all_up(i, CL_PRIMARIES))
            self.m["cl_serve"] = dict(res=res, infos=infos)
            self.say("  every shard from every daemon: %s; INFO %s"
                     % (", ".join("d%d :%d %s %.0f ms" % (i, port, out, ms)
                                  for i, port, _, out, ms in res),
                        "; ".join("d%d redis=%s redis_nodes=%s redis_nodes_up=%s redis_down=%s"
                                  % (i, x.get("redis"), x.get("redis_nodes"),
                                     x.get("redis_nodes_up"), x.get("redis_down"))
                                  for i, x in enumerate(infos))))
            self.check_daemons_alive("cl-final")

    # -- the quorum stage --

    def end_cluster(self):
        """Between the cluster and quorum stages: the workers and probes
        finish, the daemons stop (exit 0 on SIGTERM), the cluster goes."""
        with self.phase("q-switch"):
            self.stop_workers("the cluster stage")
            self.stop_probes()
            self.check_daemons_alive("the cluster stage")
            self.stop_daemons()
            self.cl.stop()

    def write_quorum_configs(self):
        lease = self.prof["q_lease_ms"]
        for i in range(Q_DAEMONS):
            with open(self.dconf[i], "w") as f:
                f.write("[server]\nsocket = %s\nadmin_uids = 0\n%s[redis]\nquorum = %s\n"
                        "command_timeout_ms = %d\nconnect_timeout_ms = %d\n"
                        "rejoin_delay_ms = %d\n[lock]\nlease_ms = %d\n"
                        % (self.dsock[i], self.log_level(), self.qu.urls(), Q_CMD_TIMEOUT_MS,
                           Q_CONNECT_TIMEOUT_MS, lease, lease))

    def start_quorum(self):
        self.stage = "quorum"
        self.stages.append(self.stage)
        self.q_t0 = time.monotonic()
        self.stage_daemons = Q_DAEMONS
        rejoin_s = self.prof["q_lease_ms"] / 1000.0
        with self.phase("q-setup"):
            self.qu = quorum.Quorum(self.tmp, Q_NODES, spawn=spawn, say=self.say)
            t_spawn = time.monotonic()
            try:
                self.qu.start()
            except quorum.QuorumError as e:
                raise RuntimeError(str(e))
            self.write_configs()              # the notify sockets, if no stage ran before
            self.write_quorum_configs()
            # start_dlockd returns once INFO says redis=up: a majority counts,
            # which fresh servers (uptime 0) do only rejoin_delay_ms after
            # they started. Then every node, on every daemon (polled).
            ups = [self.start_dlockd(i) for i in range(Q_DAEMONS)]
            full = self.q_wait_up(t_spawn, rejoin_s + EVENT_TIMEOUT)
            infos = [self.info(i) for i in range(Q_DAEMONS)]
            self.m["q_setup"] = dict(t_spawn=t_spawn, up=[(t - t_spawn) * 1000 for t in ups],
                                     full=full, backend=["%s %s/%s" % (
                                         x.get("backend"), x.get("redis_nodes_up"),
                                         x.get("redis_nodes")) for x in infos])
            if any(x.get("backend") != "quorum" or x.get("redis_nodes") != Q_NODES
                   for x in infos):
                self.problem("quorum stage: INFO says backend redis_nodes_up/redis_nodes %s, "
                             "not quorum %d/%d" % (", ".join(self.m["q_setup"]["backend"]),
                                                   Q_NODES, Q_NODES))
            if any(v is None for v in full):
                self.problem("quorum stage: not every daemon counts all %d nodes within %.0f s "
                             "of their start (ms: %s)" % (Q_NODES, rejoin_s + EVENT_TIMEOUT,
                                                          fmt_list(full)))
            for k, n in enumerate(Q_NAMES):
                x = dict(name=n, store=FencedStore(os.path.join(self.tmp, "store-q%d.sock" % k)),
                         wids=[Q_WID0 + k * Q_WORKERS_PER_NAME + j
                               for j in range(Q_WORKERS_PER_NAME)])
                self.stores.append(x["store"])
                self.q_names.append(x)
                for j, wid in enumerate(x["wids"]):
                    self.wstore[wid] = x["store"]
                    self.wname[wid] = n
                    self.spawn_worker(wid, daemon=j % Q_DAEMONS)
            for i in range(Q_DAEMONS):
                pr = Probe(self, i, names=lambda n, i=i: "qp%d-%d" % (i, n),
                           sleep=Q_PROBE_SLEEP_S)
                pr.start()
                self.q_probes.append(pr)
                w = InfoWatch(self, i)
                w.start()
                self.q_watch.append(w)
            self.q_lines = quorum.Lines()
            self.q_held = None
        self.say("%d dlockd on a quorum of %d (lease = rejoin_delay_ms = %d ms), every node "
                 "counted %s ms after the servers started; %d names, %d watchdog-mode workers, "
                 "%d probes up" % (Q_DAEMONS, Q_NODES, self.prof["q_lease_ms"], fmt_list(full),
                                   len(self.q_names),
                                   sum(len(x["wids"]) for x in self.q_names), len(self.q_probes)))

    def q_wait_up(self, t_ref, timeout):
        """Waits until every daemon's INFO counts every node; per daemon, ms
        from t_ref (None: not within timeout seconds of t_ref)."""
        out = []
        for i in range(Q_DAEMONS):
            ok = wait_until(lambda: self.info(i).get("redis_nodes_up") == Q_NODES,
                            max(0.0, t_ref + timeout - time.monotonic()), 0.02)
            out.append((time.monotonic() - t_ref) * 1000 if ok else None)
        return out

    def q_settle(self, where):
        time.sleep(self.prof["q_settle"])     # plain workload between faults
        late = self.wait_names_progress(self.q_names, 3, since=time.monotonic())
        if late:
            self.problem("no progress on %s after %s" % (" ".join(late), where))
        self.check_daemons_alive(where)
        self.check_workers_alive(where)

    def q_hold(self, what):
        """A holder of a random name held in its critical section: (name
        record, hook, grant, the nodes its lock is on now)."""
        x = self.q_names[self.rnd.randrange(len(self.q_names))]
        h = x["store"].hook()
        g = self.hook_arrival(h, what, store=x["store"])
        nodes = self.qu.holding(KEY_PREFIX + x["name"]) if g is not None else []
        return x, h, g, nodes

    def q_release(self, x, h, g, t0, regrant_timeout=0.0):
        """Lets the held holder go on, after waiting up to regrant_timeout
        for the lock to be granted again; returns what became of it."""
        st = x["store"]
        if g is None:
            h.release.set()
            return None
        nxt = self.next_grant(g, lambda y: True, timeout=regrant_timeout, store=st)
        h.release.set()
        done = st.wait_for(lambda: g["t_end"] is not None, EVENT_TIMEOUT)
        w = g["write"]
        return dict(name=x["name"], wid=g["wid"], fence=g["fence"], daemon=g["daemon"],
                    regranted=None if nxt is None else (nxt["t_start"] - t0) * 1000,
                    next_fence=None if nxt is None else nxt["fence"],
                    write=None if w is None else w["accepted"],
                    outcome=g["outcome"] if done else None)

    def q_kill(self, k, where):
        t = self.qu.kill(k)
        self.m["q_restarts"].append(dict(phase=where, node=k, label=self.qu.label(k), t_kill=t,
                                         t_spawn=None, t_res=None))
        return t

    def q_restart(self, k):
        """Restarts node k, empty; fills in its entry of q_restarts."""
        rec = [r for r in self.m["q_restarts"] if r["node"] == k][-1]
        rec["t_spawn"] = time.monotonic()
        try:
            rec["t_res"] = self.qu.restart(k)
        except quorum.QuorumError as e:
            self.problem("%s: %s" % (rec["phase"], e))
        return rec["t_res"]

    def q_service(self, t0, t1, skip=()):
        """How the service went on in [t0, t1]: per daemon its probe's grants
        (requested and answered within), other results, the first grant (ms
        from t0), the longest time without one; per name (but skip) the
        grants and the longest time without one; the workers' ERR BACKEND
        answers to LOCK."""
        daemons = []
        for p in self.q_probes:
            recs = [r for r in list(p.recs) if r[0] != "CONNECT" and r[1] >= t0 and r[2] <= t1]
            ok = [r for r in recs if r[0] == "TRYLOCK" and r[3] == "ok"]
            bad = [r for r in recs if r[3] != "ok"]
            daemons.append(dict(grants=len(ok), bad=len(bad),
                                bad_kinds=sorted(set("%s %s" % (r[0], r[3]) for r in bad)),
                                first=(ok[0][2] - t0) * 1000 if ok else None,
                                gap=p.longest_gap(t0, t1),
                                slowest=max([(r[2] - r[1]) * 1000 for r in recs] or [0])))
        names = {}
        for x in self.q_names:
            if x["name"] in skip:
                continue
            ts = sorted(g["t_start"] for g in list(x["store"].grant_order)
                        if t0 <= g["t_start"] <= t1)
            last, gap = t0, 0.0
            for t in ts:
                gap, last = max(gap, t - last), t
            names[x["name"]] = dict(grants=len(ts), gap=max(gap, t1 - last) * 1000)
        errs = sum(1 for x in self.q_names for n in list(x["store"].notes)
                   if t0 <= n[0] <= t1 and n[3] == "lock_backend_error")
        return dict(daemons=daemons, names=names, lock_backend_errors=errs, secs=t1 - t0)

    def q_info_now(self):
        """Every daemon's last INFO sample: (redis, redis_nodes_up, down labels)."""
        out = []
        for w in self.q_watch:
            r = w.last()
            out.append(None if r is None else (r[2], r[3], sorted(r[4])))
        return out

    def q_kill2(self):
        """Two nodes SIGKILLed: the other three are a majority, the service
        goes on; a holder keeps its lock; Q_HELD is taken meanwhile (on the
        three only). They restart empty and count again after
        rejoin_delay_ms."""
        qu, lease_s = self.qu, self.prof["q_lease_ms"] / 1000.0
        with self.phase("q-kill2"):
            x, h, g, nodes = self.q_hold("q-kill2")
            # Nodes the held lock is not on go first: it keeps a majority.
            order = sorted(range(Q_NODES), key=lambda k: (k in nodes, self.rnd.random()))
            victims = sorted(order[:2])
            rec = dict(victims=[qu.label(k) for k in victims], name=x["name"],
                       nodes=[qu.label(k) for k in nodes],
                       expect_kept=expect_kept(nodes, victims))
            t0 = time.monotonic()
            for k in victims:
                self.q_kill(k, "q-kill2")
            # A lock taken now is on the three others only: Q_HELD, held on
            # dlockd 0 through the restarts; dlockd 1 waits for it.
            held = None
            hc = self.q_lines.connect(self.dsock[0])
            t_req = hc.send("LOCK %s" % Q_HELD)
            r = hc.wait(lambda l: not l.startswith("!"), Q_CMD_TIMEOUT_MS / 1000.0 + EVENT_TIMEOUT)
            if r is not None and r[2].startswith("OK "):
                held = dict(conn=hc, fence=int(r[2].split()[1]), t=r[0], ms=(r[0] - t_req) * 1000)
                held["nodes"] = qu.holding(KEY_PREFIX + Q_HELD)
                cc = self.q_lines.connect(self.dsock[1])
                held["contender"] = cc
                held["t_creq"] = cc.send("LOCK %s" % Q_HELD)
            else:
                self.problem("q-kill2: LOCK %s on dlockd 0 with 2 nodes dead answered %s"
                             % (Q_HELD, "nothing" if r is None else repr(r[2])))
                hc.close()
            self.q_held = held
            rec["q_held"] = None if held is None else dict(
                fence=held["fence"], ms=held["ms"], nodes=[qu.label(k) for k in held["nodes"]])
            time.sleep(max(0.0, t0 + self.prof["q_down_s"] - time.monotonic()))   # the fault
            rec["info"] = self.q_info_now()
            rec["holder"] = self.q_release(x, h, g, t0)
            for k in victims:
                self.q_restart(k)
            t_res = time.monotonic()
            rec["service"] = self.q_service(t0, t_res, skip=(x["name"],))
            rec["up"] = self.q_wait_up(t_res, lease_s + self.prof["q_late_ms"] / 1000.0)
            t_back = time.monotonic()
            rec["t0"], rec["t1"] = t0, t_back
            rec["service_all"] = self.q_service(t0, t_back, skip=(x["name"],))
            self.faults.append(dict(kind="q-kill2", t0=t0, t1=t_back, daemon=None, wid=None,
                                    inc=None))
            if held is not None:
                rec["q_held"]["nodes_after"] = [qu.label(k)
                                                for k in qu.holding(KEY_PREFIX + Q_HELD)]
            self.m["q_kill2"] = rec
            sv = rec["service"]
            self.say("  SIGKILL %s (held lock %s on %s): redis/up/down %s; %.1f s down: probe "
                     "grants per daemon %s, first after %s ms, longest gap %s ms; grants per "
                     "name %s; %d ERR BACKEND to workers' LOCK"
                     % (" ".join(rec["victims"]), x["name"], " ".join(rec["nodes"]) or "-",
                        " | ".join("%s %s %s" % v if v else "-" for v in rec["info"]),
                        t_res - t0, "/".join(str(d["grants"]) for d in sv["daemons"]),
                        fmt_list([d["first"] for d in sv["daemons"]]),
                        fmt_list([d["gap"] for d in sv["daemons"]]),
                        " ".join("%s %d" % (n, v["grants"])
                                 for n, v in sorted(sv["names"].items())),
                        sv["lock_backend_errors"]))
            self.say("  %s taken meanwhile on dlockd 0 (fence %s, %s ms), on %s; restarted empty: "
                     "every node counted again %s ms after the restart; held worker: %s "
                     "(expected %s)"
                     % (Q_HELD, held and held["fence"], held and "%.1f" % held["ms"],
                        " ".join(rec["q_held"]["nodes"]) if held else "-", fmt_list(rec["up"]),
                        fmt_holder(rec["holder"]), fmt_expect(rec["expect_kept"])))
            self.q_settle("q-kill2")

    def q_pause(self):
        """One node SIGSTOPped for q_pause_s, then SIGCONT: grants go on
        meanwhile, no request hangs; a lock released meanwhile keeps its key
        on that node (stale), which must not keep anyone from it after."""
        qu = self.qu
        with self.phase("q-pause"):
            x, h, g, nodes = self.q_hold("q-pause")
            hn = set(self.q_held["nodes"]) if self.q_held else set()
            # Not a node of Q_HELD (it must stay held for q-restart-empty);
            # preferably one after which the held lock keeps a majority.
            cands = [k for k in range(Q_NODES) if k not in hn] or list(range(Q_NODES))
            cands.sort(key=lambda k: (len(set(nodes) - {k}) < Q_MAJORITY, k in nodes,
                                      self.rnd.random()))
            v = cands[0]
            rec = dict(victim=qu.label(v), name=x["name"], nodes=[qu.label(k) for k in nodes],
                       expect_kept=expect_kept(nodes, [v]), unlock=None, stale=None)
            label = qu.label(v)
            c0 = self.client(0, timeout=EVENT_TIMEOUT)
            try:
                f0, _ = c0.lock(Q_STALE)
                c0.renew(Q_STALE)             # a whole lease on every node from now
                t0 = qu.pause(v)
                # Released once both daemons gave up on the stopped node
                # (command_timeout_ms): the release cannot reach it, its key
                # outlives the stop (q_pause_s < lease).
                seen = wait_until(lambda: all(
                    w.last() is not None and w.last()[0] > t0 and label in w.last()[4]
                    for w in self.q_watch), (Q_CMD_TIMEOUT_MS + self.prof["q_hang_slack_ms"])
                    / 1000.0, 0.01)
                tu = time.monotonic()
                rec["down_seen"] = (tu - t0) * 1000 if seen else None
                try:
                    c0.unlock(Q_STALE)
                    rec["unlock"] = dict(ms=(time.monotonic() - tu) * 1000, res="ok")
                except (dlock.DlockError, OSError) as e:
                    rec["unlock"] = dict(ms=(time.monotonic() - tu) * 1000, res=str(e))
            finally:
                c0.close()
            time.sleep(max(0.0, t0 + self.prof["q_pause_s"] - time.monotonic()))   # the fault
            t1 = time.monotonic()
            rec["info"] = self.q_info_now()
            rec["service"] = self.q_service(t0, t1, skip=(x["name"],))
            rec["holder"] = self.q_release(x, h, g, t0)
            t_cont = qu.resume(v)
            # The stopped node still has Q_STALE's key (the release did not
            # reach it): another daemon must get the lock at once.
            rec["stale_nodes"] = [qu.label(k)
                                  for k in qu.holding(KEY_PREFIX + Q_STALE, majority=1)]
            t = time.monotonic()
            try:
                with self.client(1, timeout=EVENT_TIMEOUT) as c1:
                    f1, _ = c1.trylock(Q_STALE, wait_ms=Q_CMD_TIMEOUT_MS)
                    rec["stale"] = dict(ms=(time.monotonic() - t) * 1000, fence0=f0, fence1=f1,
                                        res="ok")
                    c1.unlock(Q_STALE)
            except (dlock.DlockError, OSError) as e:
                rec["stale"] = dict(ms=(time.monotonic() - t) * 1000, fence0=f0, fence1=None,
                                    res="%s: %s" % (type(e).__name__, e))
            rec["up"] = self.q_wait_up(t_cont, self.prof["q_late_ms"] / 1000.0)
            t_back = time.monotonic()
            rec["t0"], rec["t1"], rec["t_cont"] = t0, t_back, t_cont
            rec["service_all"] = self.q_service(t0, t_back, skip=(x["name"],))
            self.faults.append(dict(kind="q-pause", t0=t0, t1=t_back, daemon=None, wid=None,
                                    inc=None))
            self.m["q_pause"] = rec
            sv = rec["service"]
            self.say("  SIGSTOP %s %.1f s: redis/up/down %s; probe grants per daemon %s, first "
                     "after %s ms, longest gap %s ms, slowest request %s ms; grants per name %s; "
                     "%d ERR BACKEND to workers' LOCK; held worker: %s (on %s: expected %s)"
                     % (rec["victim"], t_cont - t0,
                        " | ".join("%s %s %s" % v if v else "-" for v in rec["info"]),
                        "/".join(str(d["grants"]) for d in sv["daemons"]),
                        fmt_list([d["first"] for d in sv["daemons"]]),
                        fmt_list([d["gap"] for d in sv["daemons"]]),
                        fmt_list([d["slowest"] for d in sv["daemons"]]),
                        " ".join("%s %d" % (n, v["grants"])
                                 for n, v in sorted(sv["names"].items())),
                        sv["lock_backend_errors"], fmt_holder(rec["holder"]),
                        " ".join(rec["nodes"]) or "-", fmt_expect(rec["expect_kept"])))
            self.say("  %s released once the daemons gave up on the node (%s ms; %s); its key "
                     "after SIGCONT on %s; dlockd 1 got it in %.1f ms (%s, fence %s -> %s); every "
                     "node counted %s ms after SIGCONT"
                     % (Q_STALE, fmt_ms(rec["down_seen"]),
                        rec["unlock"] and "%s, %.1f ms" % (rec["unlock"]["res"],
                                                          rec["unlock"]["ms"]),
                        " ".join(rec["stale_nodes"]) or "no node", rec["stale"]["ms"],
                        rec["stale"]["res"], rec["stale"]["fence0"], rec["stale"]["fence1"],
                        fmt_list(rec["up"])))
            self.q_settle("q-pause")

    def q_restart_empty(self):
        """One node SIGKILLed and restarted empty at once while locks are
        held: a worker's lock (on enough other nodes: kept) and Q_HELD (on
        just a majority with this node: its holder must hear !LOST before
        dlockd 1's waiter gets it, with a greater fence)."""
        qu, lease_s = self.qu, self.prof["q_lease_ms"] / 1000.0
        with self.phase("q-restart-empty"):
            x, h, g, nodes = self.q_hold("q-restart-empty")
            held = self.q_held
            hn = set(held["nodes"]) if held else set()
            cands = list(range(Q_NODES))
            cands.sort(key=lambda k: (k not in hn, len(set(nodes) - {k}) < Q_MAJORITY,
                                      self.rnd.random()))
            v = cands[0]
            rec = dict(victim=qu.label(v), name=x["name"], nodes=[qu.label(k) for k in nodes],
                       expect_kept=expect_kept(nodes, [v]), q_held=None)
            t0 = self.q_kill(v, "q-restart-empty")
            t_res = self.q_restart(v)
            if held is not None:
                expect_lost = len(hn - {v}) < Q_MAJORITY
                cc, hc = held["contender"], held["conn"]
                got = cc.wait(lambda l: not l.startswith("!"),
                              2 * lease_s + EVENT_TIMEOUT if expect_lost else lease_s + 1.0)
                lost = hc.wait(lambda l: l.startswith("!LOST %s " % Q_HELD), 0.2)
                q = dict(expect_lost=expect_lost, nodes=[qu.label(k) for k in sorted(hn)],
                         fence=held["fence"], grant=None, fence1=None, lost=None, reason=None,
                         same_round=False, reply=None if got is None else got[2])
                if got is not None and got[2].startswith("OK "):
                    q["grant"] = (got[0] - t0) * 1000
                    q["fence1"] = int(got[2].split()[1])
                if lost is not None:
                    q["lost"] = (lost[0] - t0) * 1000
                    q["reason"] = lost[2].split()[2] if len(lost[2].split()) > 2 else "?"
                    q["same_round"] = got is not None and got[1] == lost[1]
                rec["q_held"] = q
                if got is not None and got[2].startswith("OK "):
                    cc.send("UNLOCK %s" % Q_HELD)
                    cc.wait(lambda l: not l.startswith("!"), EVENT_TIMEOUT)
                hc.close()
                cc.close()
                self.q_held = None
            # The held worker waits until the node counts again everywhere.
            rec["up"] = self.q_wait_up(t_res, lease_s + self.prof["q_late_ms"] / 1000.0)
            rec["holder"] = self.q_release(
                x, h, g, t0, regrant_timeout={True: 0.0, None: lease_s,
                                              False: lease_s + EVENT_TIMEOUT}[rec["expect_kept"]])
            t_back = time.monotonic()
            rec["t0"], rec["t1"] = t0, t_back
            rec["service"] = self.q_service(t0, t_back, skip=(x["name"],))
            self.faults.append(dict(kind="q-restart-empty", t0=t0, t1=t_back, daemon=None,
                                    wid=None, inc=None))
            self.m["q_restart"] = rec
            q = rec["q_held"]
            self.say("  SIGKILL + restart empty of %s: held worker (%s on %s): %s (expected "
                     "%s); every node counted again %s ms after the restart"
                     % (rec["victim"], x["name"], " ".join(rec["nodes"]) or "-",
                        fmt_holder(rec["holder"]), fmt_expect(rec["expect_kept"]),
                        fmt_list(rec["up"])))
            if q is not None:
                self.say("  %s (fence %d, on %s): !LOST %s at %s ms, dlockd 1's waiter granted "
                         "at %s ms (fence %s)%s"
                         % (Q_HELD, q["fence"], " ".join(q["nodes"]), q["reason"],
                            fmt_ms(q["lost"]), fmt_ms(q["grant"]), q["fence1"],
                            " (in the same read)" if q["same_round"] else ""))
            self.q_settle("q-restart-empty")

    def q_majority(self):
        """Three nodes SIGKILLed: no majority. Requests answer ERR BACKEND
        at once or within command_timeout_ms, holders hear !LOST ...
        backend; the nodes restart empty and the service comes back once
        they count (rejoin_delay_ms), fences still rising."""
        qu, lease_s = self.qu, self.prof["q_lease_ms"] / 1000.0
        with self.phase("q-majority"):
            x, h, g, nodes = self.q_hold("q-majority")
            mc = self.q_lines.connect(self.dsock[1])
            t_req = mc.send("LOCK %s" % Q_MAJ)
            r = mc.wait(lambda l: not l.startswith("!"), EVENT_TIMEOUT)
            rec = dict(name=x["name"], nodes=[qu.label(k) for k in nodes], maj=None)
            if r is None or not r[2].startswith("OK "):
                self.problem("q-majority: LOCK %s answered %s" % (Q_MAJ, r and r[2]))
            else:
                rec["maj"] = dict(fence=int(r[2].split()[1]), ms=(r[0] - t_req) * 1000,
                                  lost=None, reason=None)
            victims = sorted(self.rnd.sample(range(Q_NODES), Q_NODES - Q_MAJORITY + 1))
            rec["victims"] = [qu.label(k) for k in victims]
            t0 = time.monotonic()
            for k in victims:
                self.q_kill(k, "q-majority")
            t_dead = time.monotonic()
            # When the lease runs out on the survivors (PTTL; its last renewal
            # reached them): the holder must have heard !LOST by then.
            ends = []
            for k in range(Q_NODES):
                if k in victims:
                    continue
                t = time.monotonic()
                v = qu.pttl(k, KEY_PREFIX + Q_MAJ)
                if v is not None and v > 0:
                    ends.append(t + v / 1000.0)
            lost = mc.wait(lambda l: l.startswith("!LOST %s " % Q_MAJ), lease_s + EVENT_TIMEOUT)
            if rec["maj"] is not None:
                rec["maj"]["end"] = (max(ends) - t0) * 1000 if ends else None
            if rec["maj"] is not None and lost is not None:
                rec["maj"]["lost"] = (lost[0] - t0) * 1000
                rec["maj"]["reason"] = lost[2].split()[2] if len(lost[2].split()) > 2 else "?"
            mc.close()
            time.sleep(max(0.0, t0 + self.prof["q_maj_down_s"] - time.monotonic()))  # the fault
            rec["info"] = self.q_info_now()
            t_res0 = time.monotonic()
            for k in victims:
                self.q_restart(k)
            t_res = time.monotonic()
            # While fewer than a majority counted: every probe request sent
            # after the kills and answered before the restarts.
            rec["down"] = []
            for p in self.q_probes:
                recs = [r for r in list(p.recs) if r[0] != "CONNECT" and r[1] >= t_dead and
                        r[2] <= t_res0]
                rec["down"].append(dict(
                    n=len(recs), ok=sum(1 for r in recs if r[3] == "ok"),
                    noquorum=sum(1 for r in recs if r[3] == "backend" and "no quorum" in r[4]),
                    other=sorted(set("%s %s %s" % (r[0], r[3], r[4][:50]) for r in recs
                                     if r[3] != "ok" and not (r[3] == "backend" and
                                                              "no quorum" in r[4]))),
                    slowest=max([(r[2] - r[1]) * 1000 for r in recs] or [0])))
            # Back once a majority counts again: each daemon's first probe grant.
            bound = lease_s + (self.prof["q_late_ms"] + self.prof["q_resume_ms"]) / 1000.0
            rec["resume"] = [None] * Q_DAEMONS
            deadline = t_res + bound
            while time.monotonic() < deadline and any(v is None for v in rec["resume"]):
                for p in self.q_probes:
                    tg = p.first_grant(t_res)
                    if tg is not None and rec["resume"][p.i] is None:
                        rec["resume"][p.i] = (tg - t_res) * 1000
                time.sleep(0.02)
            rec["early"] = [sum(1 for r in list(p.recs) if r[0] == "TRYLOCK" and r[3] == "ok" and
                                r[1] >= t_dead and r[2] < t_res0 + lease_s -
                                Q_REJOIN_TOL_MS / 1000.0) for p in self.q_probes]
            rec["holder"] = self.q_release(x, h, g, t0, regrant_timeout=bound + EVENT_TIMEOUT)
            rec["up"] = self.q_wait_up(t_res, lease_s + self.prof["q_late_ms"] / 1000.0)
            t_back = time.monotonic()
            rec["t0"], rec["t1"], rec["t_res"] = t0, t_back, t_res
            self.faults.append(dict(kind="q-majority", t0=t0, t1=t_back, daemon=None, wid=None,
                                    inc=None, trail=lease_s + LOSS_WINDOW_S))
            self.m["q_majority"] = rec
            m = rec["maj"]
            self.say("  SIGKILL %s: redis/up/down %s; probe requests meanwhile per daemon %s "
                     "(ERR BACKEND no quorum %s, granted %s), slowest %s ms; %s: !LOST %s at %s ms"
                     % (" ".join(rec["victims"]),
                        " | ".join("%s %s %s" % v if v else "-" for v in rec["info"]),
                        "/".join(str(d["n"]) for d in rec["down"]),
                        "/".join(str(d["noquorum"]) for d in rec["down"]),
                        "/".join(str(d["ok"]) for d in rec["down"]),
                        fmt_list([d["slowest"] for d in rec["down"]]), Q_MAJ,
                        m and m["reason"], m and fmt_ms(m["lost"]))
                     + (" (its lease ran out on the survivors at %s ms)" % fmt_ms(m["end"])
                        if m else ""))
            self.say("  restarted empty after %.1f s: first probe grant %s ms after the restart, "
                     "every node counted %s ms after it; held worker: %s"
                     % (t_res - t0, fmt_list(rec["resume"]), fmt_list(rec["up"]),
                        fmt_holder(rec["holder"])))
            self.q_settle("q-majority")

    def q_serve_check(self):
        """At the end: every daemon counts every node and LOCKs/UNLOCKs a
        fresh name."""
        with self.phase("q-final"):
            res, infos = [], []
            for i in range(Q_DAEMONS):
                infos.append(self.info_all_up(i, Q_NODES))
                t = time.monotonic()
                try:
                    with self.client(i, timeout=EVENT_TIMEOUT + 5) as c:
                        c.trylock("qf%d" % i, wait_ms=int(EVENT_TIMEOUT * 1000))
                        c.unlock("qf%d" % i)
                    out = "ok"
                except (dlock.DlockError, OSError) as e:
                    out = "%s: %s" % (type(e).__name__, e)
                res.append((i, out, (time.monotonic() - t) * 1000))
            self.m["q_final"] = dict(res=res, infos=infos)
            self.say("  every daemon: %s; INFO %s"
                     % (", ".join("d%d %s %.0f ms" % r for r in res),
                        "; ".join("d%d redis=%s redis_nodes_up=%s/%s redis_down=%s"
                                  % (i, x.get("redis"), x.get("redis_nodes_up"),
                                     x.get("redis_nodes"), x.get("redis_down"))
                                  for i, x in enumerate(infos))))
            self.check_daemons_alive("q-final")

    def stop_daemons(self):
        """Every dlockd we did not kill must still run and exit 0 on SIGTERM.
        Appends (label, alive, rc) to daemon_stops for each; returns those."""
        res = []
        for i, p in enumerate(self.daemons):
            label = "d%d%s" % (i, "" if self.stage == "standalone" else " (%s)" % self.stage)
            if p is None:
                if i < self.stage_daemons:
                    res.append((label, False, "never started"))
                continue
            alive = p.poll() is None
            rc = None
            if alive:
                p.send_signal(signal.SIGTERM)
                try:
                    rc = p.wait(EVENT_TIMEOUT)
                except subprocess.TimeoutExpired:
                    rc = "hung"
                    p.kill()
            else:
                rc = p.returncode
            res.append((label, alive, rc))
            if not alive or rc != 0:
                print("--- dlockd%d.log (tail, %s)\n%s" % (i, self.stage, log_tail(p.logname, 30)))
        self.daemons = [None] * DAEMONS
        self.daemon_stops.extend(res)
        return res


def fmt_ms(v):
    return "-" if v is None else "%.0f" % v


def fmt_holder(y):
    """What became of a holder held in its critical section through a fault."""
    if y is None:
        return "no holder"
    return ("%s worker %d (fence %d, dlockd %d): %s, write %s, unlock %s"
            % (y["name"], y["wid"], y["fence"], y["daemon"],
               "nobody else granted" if y["regranted"] is None else
               "granted again %.0f ms after the fault (fence %s)" % (y["regranted"],
                                                                    y["next_fence"]),
               {None: "none", True: "accepted", False: "rejected"}[y["write"]], y["outcome"]))


def expect_kept(nodes, victims):
    """Whether a lock on nodes keeps a majority without victims (None: its
    nodes are not known)."""
    if not nodes:
        return None
    return len(set(nodes) - set(victims)) >= Q_MAJORITY


def fmt_expect(e):
    return {True: "kept", False: "lost, told", None: "kept, or lost and told"}[e]


def holder_ok(y, expect_kept):
    """Kept: nobody else granted, its write accepted, UNLOCK ok. Not kept:
    told (!LOST), and fenced off if granted again. None: either."""
    if y is None:
        return False
    kept = y["regranted"] is None and y["write"] is True and y["outcome"] == "ok"
    told = ((y["outcome"] or "").startswith("lost:") and
            (y["regranted"] is None or y["write"] is not True))
    return kept if expect_kept else told if expect_kept is False else kept or told


def fmt_redir(r):
    """A migration's redirections, as its two nodes counted them."""
    if r is None:
        return "redirections unknown"
    return "%d ASK (%d ASKING), %d TRYAGAIN, %d MOVED, %d CLUSTERDOWN" % (
        r["ASK"], r["ASKING"], r["TRYAGAIN"], r["MOVED"], r["CLUSTERDOWN"])


def fmt_rec(rec):
    def f(v):
        return "-" if v is None else "%.0f" % v
    return " ".join("d%d %s/%s" % (i, f(a), f(b)) for i, (a, b) in enumerate(rec))


# ---- analysis ------------------------------------------------------------------

LOSS_WINDOW_S = 1.5      # a fault's effects (loss notices) may trail it by this much


def close_sections(grants, killed, t_end):
    """Each grant's effective end: its UNLOCK's moment, its worker's SIGKILL,
    or (never ended) the end of the run."""
    for g in grants:
        if g["t_end"] is not None:
            g["t_end_eff"], g["end_kind"] = g["t_end"], "unlock"
        elif (g["wid"], g["inc"]) in killed:
            g["t_end_eff"], g["end_kind"] = killed[(g["wid"], g["inc"])], "killed"
        else:
            g["t_end_eff"], g["end_kind"] = t_end, "open"


def overlaps(grants, fault_for, t_base):
    """The overlapping critical sections of one fenced store's grants: each
    pair must have two fences and the stale holder's write stopped by the
    fence (or serialized before the new holder's read), and the stale one
    must be explained by a fault (fault_for(g): its kind, or None) or a loss
    notice. Returns dict(pairs, kinds, reasons, bad, unexplained, open)."""
    by_start = sorted(grants, key=lambda g: g["t_start"])
    active, pairs = [], []
    for g in by_start:
        active = [a for a in active if a["t_end_eff"] > g["t_start"]]
        for a in active:
            if len(pairs) < 100000:
                pairs.append((a, g))
        active.append(g)
    kinds = {"fenced": 0, "no-write": 0, "serialized": 0}
    bad, unexplained, explained, reasons = [], [], [], {}
    for a, b in pairs:
        if a["fence"] == b["fence"]:
            bad.append("same fence %d in overlapping sections of workers %d and %d"
                       % (a["fence"], a["wid"], b["wid"]))
            continue
        stale, new = (a, b) if a["fence"] < b["fence"] else (b, a)
        w = stale["write"]
        if w is None:
            kinds["no-write"] += 1
        elif not w["accepted"]:
            kinds["fenced"] += 1
        elif w["seq"] < new["read_seq"]:
            kinds["serialized"] += 1
        else:
            bad.append("worker %d (fence %d) wrote after worker %d (fence %d) read, and the "
                       "store accepted it" % (stale["wid"], stale["fence"], new["wid"],
                                              new["fence"]))
        why = fault_for(stale) or ("lost:" + stale["outcome"]
                                   if stale["outcome"] not in (None, "ok") else None)
        if why is None:
            unexplained.append("workers %d (fence %d, %.3f-%.3f, dlockd %d) and %d (fence %d, "
                               "from %.3f, dlockd %d)"
                               % (stale["wid"], stale["fence"], stale["t_start"] - t_base,
                                  stale["t_end_eff"] - t_base, stale["daemon"], new["wid"],
                                  new["fence"], new["t_start"] - t_base, new["daemon"]))
        else:
            reasons[why.split(":")[0]] = reasons.get(why.split(":")[0], 0) + 1
            explained.append((why, stale, new))
    return dict(pairs=len(pairs), kinds=kinds, reasons=reasons, bad=bad,
                unexplained=unexplained, explained=explained,
                open=[g for g in grants if g["end_kind"] == "open"])


def fmt_pair(why, stale, new, t_base):
    w = stale["write"]
    return ("%s: worker %d (fence %d, %.3f-%.3f, dlockd %d, write %s, unlock %s) and %d "
            "(fence %d, from %.3f, dlockd %d)"
            % (why, stale["wid"], stale["fence"], stale["t_start"] - t_base,
               stale["t_end_eff"] - t_base, stale["daemon"],
               "none" if w is None else "accepted" if w["accepted"] else "rejected",
               stale["outcome"], new["wid"], new["fence"], new["t_start"] - t_base, new["daemon"]))


def accept_drops(accepted):
    """Accepted writes whose fence is not above the one accepted before."""
    return [(x, y) for x, y in zip(accepted, accepted[1:]) if y["fence"] <= x["fence"]]


def fence_order(grants, faults):
    """Every grant its own fence, rising with the real-time order of grants
    (above the fence of every section that ended before it), and across each
    fault (t0, t1) of faults. Returns dict(dups, order_bad, jumps)."""
    seen, dups = {}, []
    for g in grants:
        if g["fence"] in seen:
            dups.append((seen[g["fence"]], g))
        seen[g["fence"]] = g
    by_start = sorted(grants, key=lambda g: g["t_start"])
    by_end = sorted(grants, key=lambda g: g["t_end_eff"])
    j, maxf, order_bad = 0, 0, []
    for g in by_start:
        while j < len(by_end) and by_end[j]["t_end_eff"] < g["t_start"]:
            maxf = max(maxf, by_end[j]["fence"])
            j += 1
        if g["fence"] <= maxf:
            order_bad.append(g)
    jumps = []
    for f in faults:
        before = [g["fence"] for g in grants if g["t_start"] < f["t0"]]
        after = [g["fence"] for g in grants if g["t_start"] > f["t1"]]
        if before and after:
            jumps.append(min(after) > max(before))
    return dict(dups=dups, order_bad=order_bad, jumps=jumps)


def stray_losses(grants, fault_for):
    """(losses, those outside any fault that explains them)."""
    losses = [g for g in grants if g["outcome"] not in (None, "ok")]
    return losses, [g for g in losses if fault_for(g) is None]


def fmt_loss(c, g, name=""):
    return "%sworker %d fence %d at %.3f s on dlockd %d: %s" % (
        name and name + ": ", g["wid"], g["fence"], g["t_start"] - c.t_start, g["daemon"],
        g["outcome"])


def request_latency(c, where, recs, unl, cmd_timeout_ms, slack):
    """The "no request hangs" check: recs are (label, probe record) pairs,
    unl the grants whose worker UNLOCK was answered (t_end, t_done)."""
    bound = cmd_timeout_ms + slack
    counts = {}
    for _, r in recs:
        counts[r[3]] = counts.get(r[3], 0) + 1
    slow = sorted(((lb, r) for lb, r in recs if (r[2] - r[1]) * 1000 > bound),
                  key=lambda x: x[1][1] - x[1][2])
    lat = sorted((r[2] - r[1]) * 1000 for _, r in recs)
    unl_lat = sorted((g["t_done"] - g["t_end"]) * 1000 for g in unl)
    slow_unl = [g for g in unl if (g["t_done"] - g["t_end"]) * 1000 > bound]
    backend_msgs = {}
    for _, r in recs:
        if r[3] == "backend":
            k = re.sub(r"\d+", "N", r[4])[:60]
            backend_msgs[k] = backend_msgs.get(k, 0) + 1

    def pct(v, p):
        return v[min(len(v) - 1, int(p / 100.0 * len(v)))] if v else None
    c.check("no request hangs in the %s: every probe request (TRYLOCK <fresh> 0, "
            "UNLOCK) and every worker UNLOCK answered within command_timeout_ms + %d ms "
            "(%d ms)" % (where, slack, bound),
            recs and not slow and not slow_unl,
            "%d probe requests (%s), p50/p99/max %s/%s/%s ms; %d worker UNLOCKs, p99/max "
            "%s/%s ms%s%s%s"
            % (len(recs), ", ".join("%s %d" % kv for kv in sorted(counts.items())),
               fmt_ms(pct(lat, 50)), fmt_ms(pct(lat, 99)), fmt_ms(lat[-1] if lat else None),
               len(unl), fmt_ms(pct(unl_lat, 99)), fmt_ms(unl_lat[-1] if unl_lat else None),
               "; ERR BACKEND: " + ", ".join("%s (%d)" % kv for kv in
                                             sorted(backend_msgs.items(),
                                                    key=lambda kv: -kv[1])[:4])
               if backend_msgs else "",
               "".join("\n      SLOW: dlockd probe %s %s sent at %.3f s answered after %.0f ms "
                       "(%s %s)" % (lb, r[0], r[1] - c.t_start, (r[2] - r[1]) * 1000, r[3],
                                    r[4][:60]) for lb, r in slow[:5]),
               "".join("\n      SLOW: worker %d UNLOCK at %.3f s answered after %.0f ms (%s)"
                       % (g["wid"], g["t_end"] - c.t_start, (g["t_done"] - g["t_end"]) * 1000,
                          g["outcome"]) for g in slow_unl[:5])))


def analyse(c):
    t_run_end = time.monotonic()
    for st in c.stores:
        close_sections(list(st.grant_order), c.killed, t_run_end)
    if "standalone" in c.stages or "failover" in c.stages:
        analyse_chaos_lock(c)
    if "cluster" in c.stages:
        analyse_cluster(c)
    if "quorum" in c.stages:
        analyse_quorum(c)
    history.check_stores(c, c.tmp)

    # 10. no daemon crash
    crashes = list(c.daemon_deaths)
    bad_stop = [x for x in c.daemon_stops if not x[1] or x[2] != 0]
    c.check("no dlockd crashes; each exits 0 on SIGTERM",
            not crashes and not bad_stop and c.daemon_stops,
            "%d killed on purpose and restarted; at the end of each stage: %s%s"
            % (len(c.killed_daemons) - len(crashes),
               ", ".join("%s %s rc %s" % (label, "alive" if alive else "DEAD", rc)
                         for label, alive, rc in c.daemon_stops) or "no stop",
               "".join("\n      dlockd %d died (rc %s) during %s" % x for x in crashes)))

    # 10b. no sanitizer report or assertion failure in any daemon's log
    hits, nlogs = [], 0
    for fn in sorted(os.listdir(c.tmp)):
        if not (fn.startswith("dlockd") and fn.endswith(".log")):
            continue
        nlogs += 1
        try:
            with open(os.path.join(c.tmp, fn), "rb") as f:
                data = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        hits += ["%s: %s" % (fn, l.strip()[:160]) for l in data.splitlines() if CRASH_RE.search(l)]
    c.check("no sanitizer report, assertion failure or crash message in any dlockd log",
            nlogs and not hits, "%d logs, %d such lines%s" % (nlogs, len(hits), "".join(
                "\n      " + h for h in hits[:8])))

    # 11. the harness itself and liveness
    errors = [e for st in c.stores for e in st.errors]
    c.check("the workload kept going (progress after every fault, no worker or store "
            "trouble)", not c.problems and not c.worker_deaths and not errors,
            "; ".join(c.problems + errors[:5]) or
            "%d grants by %d worker incarnations"
            % (sum(len(st.grant_order) for st in c.stores),
               sum(len(st.hello) for st in c.stores)))


def analyse_chaos_lock(c):
    """The standalone and failover stages: the lock "chaos" and its store."""
    st = c.store
    grants = list(st.grant_order)
    accepted = list(st.accepted)
    rejected = list(st.rejected)

    def fault_for(g):
        """A fault during g's critical section that can cost g its lock, or None."""
        for f in c.faults:
            t0, t1 = f["t0"], f["t1"] + f.get("trail", LOSS_WINDOW_S)
            if not (g["t_start"] < t1 and g["t_end_eff"] > t0):
                continue
            if f["kind"] in ("redis-restart", "redis-pause", "failover-kill", "failover-forced"):
                return f["kind"]
            if f["kind"] == "dlockd-kill" and f["daemon"] == g["daemon"]:
                return f["kind"]
            if f["kind"] == "stall-lease" and (f["wid"], f["inc"]) == (g["wid"], g["inc"]):
                return f["kind"]
        return None

    # 1. no lost update
    c.check("no lost update", st.value == len(accepted),
            "final counter %d, accepted writes %d (rejected %d)"
            % (st.value, len(accepted), len(rejected)))

    # 2. mutual exclusion, or the fence stops the stale holder
    o = overlaps(grants, fault_for, c.t_start)
    c.check("critical sections overlap only after a lease ran out / Redis lost data / a "
            "failover, and then the fence stopped the stale holder",
            not o["bad"] and not o["unexplained"] and not o["open"],
            "%d grants, %d overlapping pairs (%s; causes: %s)%s%s%s"
            % (len(grants), o["pairs"],
               ", ".join("%s %d" % kv for kv in o["kinds"].items()),
               ", ".join("%s %d" % kv for kv in sorted(o["reasons"].items())) or "-",
               "".join("\n      VIOLATION: " + x for x in o["bad"][:5]),
               "".join("\n      UNEXPLAINED OVERLAP: " + x for x in o["unexplained"][:5]),
               "\n      %d sections never ended" % len(o["open"]) if o["open"] else ""))

    # 3. fences of accepted writes rise strictly, in acceptance order
    drops = accept_drops(accepted)
    c.check("fences of accepted writes rise strictly in acceptance order", not drops,
            "%d accepted writes, fences %s..%s%s"
            % (len(accepted), accepted[0]["fence"] if accepted else "-",
               accepted[-1]["fence"] if accepted else "-",
               "".join("\n      %d after %d" % (y["fence"], x["fence"]) for x, y in drops[:5])))

    # 3b. every grant its own fence, rising with real-time order of grants
    restarts = [f for f in c.faults if f["kind"] in ("redis-restart", "failover-kill",
                                                     "failover-forced")]
    fo = fence_order(grants, restarts)
    reentrant = sum(1 for n in st.notes if n[3] == "reentrant_grant")
    c.check("every grant has its own fence, rising with grant order (also across Redis "
            "restarts and failovers)",
            not fo["dups"] and not fo["order_bad"] and all(fo["jumps"]) and not reentrant,
            "%d grants, %d duplicate fences, %d grants with a fence below an earlier "
            "finished section's, %d fresh grants with holds != 1, fence rose across %d/%d "
            "Redis restarts and failovers%s"
            % (len(grants), len(fo["dups"]), len(fo["order_bad"]), reentrant, sum(fo["jumps"]),
               len(fo["jumps"]),
               "".join("\n      worker %d fence %d at %.3f s on dlockd %d"
                       % (g["wid"], g["fence"], g["t_start"] - c.t_start, g["daemon"])
                       for g in fo["order_bad"][:5])))

    if "standalone" in c.stages:
        analyse_standalone(c)
    if "failover" in c.stages:
        analyse_failover(c, grants)

    # 8. no unexplained lock losses
    losses, stray = stray_losses(grants, fault_for)
    c.check("no lock is lost (!LOST, NOTHELD, broken connection) outside a fault",
            not stray, "%d losses, all during faults" % len(losses) if not stray else
            "%d losses, %d outside faults%s" % (len(losses), len(stray), "".join(
                "\n      " + fmt_loss(c, g) for g in stray[:5])))


def analyse_standalone(c):
    """The checks of the standalone stage's own phases."""
    # 4. hand-off after a holder's SIGKILL
    h = c.m["handoff"]
    hv = [x for x in h if x is not None]
    c.check("SIGKILLed holder's lock goes to the next local waiter within %d ms"
            % c.prof["handoff_ms"],
            h and len(hv) == len(h) and max(hv) <= c.prof["handoff_ms"],
            "%d kills, kill -> next local grant ms: %s; process reaped -> grant ms: %s"
            % (len(h), fmt_list(h), fmt_list(c.m["reaped"])))

    # 5. free within one lease after a daemon's SIGKILL
    fr = c.m["free"]
    fv = [x for x in fr if x is not None]
    c.check("SIGKILLed dlockd's lock is free for another daemon within lease + %d ms "
            "(%d ms)" % (c.prof["free_ms"] - LEASE_MS, c.prof["free_ms"]),
            fr and len(fv) == len(fr) and max(fv) <= c.prof["free_ms"],
            "%d kills, kill -> other daemon's grant ms: %s" % (len(fr), fmt_list(fr)))

    # 6. recovery after Redis restarts and pauses
    for key, what in (("restart", "restarted empty"), ("pause", "SIGSTOP/SIGCONT")):
        runs = c.m[key]
        ok = bool(runs)
        lines = []
        for r in runs:
            for a, b in r["rec"]:
                ok = ok and a is not None and b is not None and b <= RECOVERY_BOUND_S * 1000
            ok = ok and r["progress"] and "no answer" not in r["down"]
            lines.append(fmt_rec(r["rec"]) + ("" if r["progress"] else " NO PROGRESS") +
                         (" (a daemon did not answer while Redis was away)"
                          if "no answer" in r["down"] else ""))
        c.check("every dlockd recovers by itself after Redis %s (redis=up and LOCK within "
                "%.0f s)" % (what, RECOVERY_BOUND_S), ok,
                "ms to redis=up/LOCK: " + "; ".join(lines))

    # 6b. holders from before a Redis fault are fenced off
    st_runs = [(k, r["stale"]) for k in ("restart", "pause") for r in c.m[k]]
    c.check("a holder caught by a Redis restart/pause is fenced off once the lock is granted "
            "again", st_runs and all(x is not None and x["regranted"] is not None and
                                     x["write"] is False for _, x in st_runs),
            "; ".join("%s: %s" % (k, "no holder" if x is None else
                                  "regranted %s ms after Redis was back, stale write %s, "
                                  "unlock %s" % ("-" if x["regranted"] is None
                                                 else "%.0f" % x["regranted"],
                                                 {None: "none", True: "ACCEPTED",
                                                  False: "rejected"}[x["write"]],
                                                 x["outcome"]))
                      for k, x in st_runs) or "not run")

    # 7. stalls
    wd = c.m["stall_wd"]
    c.check("a SIGSTOPped watchdog-mode holder keeps its lock (its connection lives) and "
            "writes after SIGCONT",
            wd and all(not x["other_grant"] and x["accepted"] and x["outcome"] == "ok"
                       for x in wd), "; ".join("other grants: %s, write %s, unlock %s"
                                               % ("yes" if x["other_grant"] else "none",
                                                  "accepted" if x["accepted"] else "rejected",
                                                  x["outcome"]) for x in wd) or "not run")
    sl = c.m["stall_lease"]
    c.check("a SIGSTOPped lease-mode holder loses the lock at its lease end and its late "
            "write is fenced off",
            sl and all(x["moved_ms"] is not None and x["moved_ms"] >= LEASE_MS - 50 and
                       x["write"] is False and x["outcome"] == "lost:expired" for x in sl),
            "; ".join("lock moved on %s ms after the grant, write %s, unlock %s"
                      % ("-" if x["moved_ms"] is None else "%.0f" % x["moved_ms"],
                         {None: "none", True: "ACCEPTED", False: "rejected"}[x["write"]],
                         x["outcome"]) for x in sl) or "not run")

    # 9. slow reader
    sr = c.m["slow"]
    c.check("a client that does not read is cut off (output_overflows rises, its lock is "
            "freed) while the others make progress",
            sr and all(x["closed"] and x["after"] is not None and x["after"] > x["before"] and
                       x["writes"] > 0 and x["own_grants"] > 0 and x["ping"] and x["held"] and
                       x["freed"] is not None for x in sr),
            "; ".join("dlockd %d: %s after %d INFOs (%.2f s), output_overflows %s->%s, %d "
                      "writes / %d local grants meanwhile, its lock %s"
                      % (x["daemon"], "cut off" if x["closed"] else "NOT cut off", x["sent"],
                         x["secs"], x["before"], x["after"], x["writes"], x["own_grants"],
                         "not taken" if not x["held"] else "NOT freed" if x["freed"] is None
                         else "free %.1f ms after the cut" % x["freed"])
                      for x in sr) or "not run")


def analyse_failover(c, grants):
    """The failover stage's own checks."""
    fo = c.m["failover"]

    # F1. no request hangs: the probes' requests and the workers' UNLOCKs
    recs = [("d%d" % p.i, r) for p in c.probes for r in p.recs if r[0] != "CONNECT"]
    unl = [g for g in grants if c.fo_t0 is not None and g["t_start"] >= c.fo_t0 and
           g.get("t_done") is not None and g["t_end"] is not None]
    request_latency(c, "failover stage", recs, unl, FO_CMD_TIMEOUT_MS, c.prof["hang_slack_ms"])

    # F2. service resumes: every daemon follows Sentinel and grants again
    lag = c.prof["resume_ms"]
    ok = bool(fo) and len(fo) == c.prof["fkills"] + c.prof["forced"]
    lines = []
    for x in fo:
        good = x["switch"] is not None and all(v is not None for v in x["grant"])
        lags = [None if v is None or x["switch"] is None else v - x["switch"]
                for v in x["grant"]]
        good = good and all(v is not None and v <= lag for v in lags)
        ok = ok and good
        lines.append("%s :%d -> :%s: Sentinel +sdown/+odown/+switch-master %s/%s/%s ms; "
                     "dlockd adopted the new primary at %s ms, first grant %s ms (%s ms after "
                     "+switch-master), gap in grants %s ms%s"
                     % ("SIGKILL" if x["kind"] == "kill" else "SENTINEL FAILOVER", x["old"],
                        x["new"] or "?", fmt_ms(x["sdown"]), fmt_ms(x["odown"]),
                        fmt_ms(x["switch"]), fmt_list(x["adopt"]), fmt_list(x["grant"]),
                        fmt_list(lags), fmt_list(x["gap"]),
                        "; healed in %.1f s" % x["heal"] if x["heal"] is not None else ""))
    follows = c.m.get("follows", [])
    notf = [(w, want, bad) for w, want, bad in follows if bad]
    ok = ok and not notf and follows and \
        all(b == "sentinel" for b in c.m.get("fo_backend") or [None])
    c.check("every dlockd follows Sentinel (INFO backend=sentinel; 'primary is now' names "
            "Sentinel's primary) and grants again within %d ms of +switch-master after every "
            "failover" % lag, ok,
            "INFO backend: %s; %s%s" % ("/".join(str(b) for b in c.m.get("fo_backend") or [])
                                        or "-",
                                        "\n      ".join(lines) or "no failover ran",
                                        "".join("\n      at %s Sentinel names :%d but %s"
                                                % (w, want, ", ".join(bad))
                                                for w, want, bad in notf)))

    # F3. a holder caught by a failover keeps the lock or is fenced off
    hs = [x["holder"] for x in fo]
    good = bool(hs)
    for x in hs:
        if x is None:
            good = False
        elif x["regranted"] is not None:
            good = good and x["write"] is False           # moved on: must be fenced off
        else:
            good = good and x["write"] is True            # kept: its write goes through
    c.check("a holder caught by a failover either keeps its lock (nobody else is granted, its "
            "write is accepted) or is fenced off (the lock is granted again, its write is "
            "rejected)", good,
            "; ".join("no holder" if x is None else
                      "worker %d: %s, write %s, unlock %s"
                      % (x["wid"], "granted again %.0f ms after the fault" % x["regranted"]
                         if x["regranted"] is not None else "nobody else granted",
                         {None: "none", True: "accepted", False: "REJECTED"
                          if x["regranted"] is None else "rejected"}[x["write"]],
                         x["outcome"]) for x in hs) or "not run")


def check_no_lost_update(c, stage, per):
    """A stage with a fenced store per name (per: one dict per name, with
    its store st, accepted and rejected writes and its name x["name"]):
    every store's counter equals its accepted writes."""
    bad = [p for p in per if p["st"].value != len(p["accepted"])]
    c.check("%s: no lost update on any name" % stage, per and not bad,
            "%d names, %d accepted writes (%s), %d rejected%s"
            % (len(per), sum(len(p["accepted"]) for p in per),
               " ".join("%s %d" % (p["x"]["name"], len(p["accepted"])) for p in per),
               sum(len(p["rejected"]) for p in per),
               "".join("\n      %s: counter %d, accepted writes %d"
                       % (p["x"]["name"], p["st"].value, len(p["accepted"])) for p in bad)))


def analyse_cluster(c):
    """The cluster stage: the general invariants per name (each name its own
    fenced resource), then the stage's own checks."""
    names = c.cl_names
    fofaults = [f for f in c.faults if f["kind"] in ("cl-kill", "cl-pause")]

    def on(f, slot):
        return any(a <= slot <= b for a, b in f["ranges"])

    def promoted_grant(slot, g):
        """The failover of slot's shard during which g was granted by the
        promoted primary itself: its grant came more than CL_INFLIGHT_S after
        the old primary died or stopped (no reply of it was on its way) and
        before that one came back (restart, SIGCONT). No write lost in the
        failover can undo such a grant. None otherwise."""
        for f in fofaults:
            if on(f, slot) and f["t0"] + CL_INFLIGHT_S < g["t_start"] < f["t_res"]:
                return f
        return None

    def fault_for_slot(slot):
        def fault_for(g):
            """A failover of the name's own shard during g's section, or None.
            A migration explains nothing: no grant may be made twice then."""
            for f in fofaults:
                if (on(f, slot) and g["t_start"] < f["t1"] + f["trail"] and
                        g["t_end_eff"] > f["t0"]):
                    return f["kind"]
            return None
        return fault_for

    per = []
    for x in names:
        st = x["store"]
        grants = list(st.grant_order)
        ff = fault_for_slot(x["slot"])
        per.append(dict(x=x, st=st, grants=grants, accepted=list(st.accepted),
                        rejected=list(st.rejected), ff=ff,
                        o=overlaps(grants, ff, c.t_start),
                        drops=accept_drops(list(st.accepted)),
                        fo=fence_order(grants, [f for f in fofaults if on(f, x["slot"])]),
                        reentrant=sum(1 for n in st.notes if n[3] == "reentrant_grant"),
                        losses=stray_losses(grants, ff)))
    ngrants = sum(len(p["grants"]) for p in per)

    # C1. no lost update, per name
    check_no_lost_update(c, "cluster", per)

    # C2. overlaps only in a failover window of the name's own shard, fenced
    kinds, reasons = {}, {}
    viol, unexpl, expl, after, never = [], [], [], [], 0
    for p in per:
        o = p["o"]
        for k, v in o["kinds"].items():
            kinds[k] = kinds.get(k, 0) + v
        for k, v in o["reasons"].items():
            reasons[k] = reasons.get(k, 0) + v
        viol += ["%s: %s" % (p["x"]["name"], v) for v in o["bad"]]
        unexpl += ["%s: %s" % (p["x"]["name"], v) for v in o["unexplained"]]
        for why, stale, new in o["explained"]:
            line = "%s: %s" % (p["x"]["name"], fmt_pair(why, stale, new, c.t_start))
            if promoted_grant(p["x"]["slot"], stale) is None:
                expl.append(line)
            else:
                after.append(line + " -- STALE GRANT MADE BY THE PROMOTED PRIMARY: no lost "
                             "write explains it")
        never += len(o["open"])
    strict = not c.args.lenient_failover
    c.check("cluster: sections of one name overlap only in a failover of its own shard "
            "(never during a slot migration), and then the fence stopped the stale holder%s"
            % ("; none whose stale grant the promoted primary made" if strict
               else " (--lenient-failover)"),
            names and not viol and not unexpl and not never and not (strict and after),
            "%d grants, %d overlapping pairs (%s; causes: %s; %d of them with the stale grant "
            "made by the promoted primary)%s%s%s%s%s"
            % (ngrants, sum(p["o"]["pairs"] for p in per),
               ", ".join("%s %d" % kv for kv in sorted(kinds.items())),
               ", ".join("%s %d" % kv for kv in sorted(reasons.items())) or "-", len(after),
               "".join("\n      in a failover window: " + v for v in expl[:5]),
               "".join("\n      %s: %s" % ("VIOLATION" if strict else "in a failover window",
                                           v) for v in after[:5]),
               "".join("\n      VIOLATION: " + v for v in viol[:5]),
               "".join("\n      UNEXPLAINED OVERLAP: " + v for v in unexpl[:5]),
               "\n      %d sections never ended" % never if never else ""))

    # C3. fences per name
    drops = [(p["x"]["name"], a, b) for p in per for a, b in p["drops"]]
    dups = sum(len(p["fo"]["dups"]) for p in per)
    order_bad = [(p["x"]["name"], g) for p in per for g in p["fo"]["order_bad"]]
    jumps = [j for p in per for j in p["fo"]["jumps"]]
    reentrant = sum(p["reentrant"] for p in per)
    c.check("cluster: per name, fences of accepted writes rise strictly and every grant has "
            "its own fence, rising with grant order (also across its shard's failovers)",
            names and not drops and not dups and not order_bad and all(jumps) and not reentrant,
            "%d grants, %d accepted-write fence drops, %d duplicate fences, %d grants with a "
            "fence below an earlier finished section's, %d fresh grants with holds != 1, "
            "fence rose across %d/%d failovers of a name's shard%s%s"
            % (ngrants, len(drops), dups, len(order_bad), reentrant, sum(jumps), len(jumps),
               "".join("\n      %s: %d after %d" % (n, b["fence"], a["fence"])
                       for n, a, b in drops[:5]),
               "".join("\n      %s: worker %d fence %d at %.3f s on dlockd %d"
                       % (n, g["wid"], g["fence"], g["t_start"] - c.t_start, g["daemon"])
                       for n, g in order_bad[:5])))

    # C4. no request hangs
    recs = [("d%d shard %d" % (p.i, p.shard), r) for p in c.cl_probes for r in p.recs
            if r[0] != "CONNECT"]
    unl = [g for p in per for g in p["grants"]
           if g.get("t_done") is not None and g["t_end"] is not None]
    request_latency(c, "cluster stage", recs, unl, CL_CMD_TIMEOUT_MS,
                    c.prof["cl_hang_slack_ms"])

    # C5. a migration: done within its bound; the held holder keeps its lock;
    #     the slot's names go on
    mig = c.m["cl_migrate"]
    ok = len(mig) == c.prof["cl_rounds"]
    lines = []
    for r in mig:
        s, y = r["steps"], r["holder"]
        good = (s is not None and r["ms"] <= c.prof["cl_migrate_ms"] and not r["late"] and
                y is not None and y["regranted"] is None and y["write"] is True and
                y["outcome"] == "ok")
        ok = ok and good
        lines.append("slot %d :%d -> :%d %s in %.0f ms (%s keys; %s; other {hot} names' "
                     "longest pause %.0f ms); holder of %s: %s, write %s, unlock %s%s"
                     % (r["slot"], r["src"], r["dst"], "moved" if s else "NOT MOVED", r["ms"],
                        s["keys"] if s else "-", fmt_redir(r["redir"]), r["pause"], r["name"],
                        "no holder" if y is None else
                        "nobody else granted" if y["regranted"] is None else
                        "GRANTED AGAIN at %.0f ms" % y["regranted"],
                        "-" if y is None else {None: "none", True: "accepted",
                                               False: "REJECTED"}[y["write"]],
                        "-" if y is None else y["outcome"],
                        "; no progress after it on " + " ".join(r["late"]) if r["late"] else ""))
    c.check("cluster: the {hot} slot moves in steps under load within %.0f s; a holder of "
            "its names keeps the lock throughout (nobody else granted, write accepted, UNLOCK "
            "ok) and its names are granted after it" % (c.prof["cl_migrate_ms"] / 1000.0), ok,
            "\n      ".join(lines) or "not run")

    # C6. failovers: promotion, every daemon back on the shard, old primary a replica
    fl = c.m["cl_fault"]
    want = c.prof["cl_rounds"] * (2 if c.prof["cl_pause"] else 1)
    ok = len(fl) == want
    lag_max = c.prof["cl_resume_ms"]
    lines = []
    for r in fl:
        lags = [None if v is None or r["promoted"] is None else v - r["promoted"]
                for v in r["grant"]]
        good = (r["promoted"] is not None and all(v is not None and v <= lag_max for v in lags)
                and r["role"] is not None and r["healed"] is not None)
        ok = ok and good
        lines.append("%s :%d -> :%s: promoted at %s ms; dlockd's new map at %s ms; first "
                     "grant on the shard %s ms (%s ms after the promotion; gap %s ms); other "
                     "shards' longest pause %s ms; back as a replica (ROLE) %s ms after its %s"
                     % ("SIGKILL" if r["kind"] == "kill" else "SIGSTOP", r["old"],
                        r["new"] or "?", fmt_ms(r["promoted"]), fmt_list(r["seen"]),
                        fmt_list(r["grant"]), fmt_list(lags), fmt_list(r["gap"]),
                        fmt_list(r["others"]), fmt_ms(r["role"]),
                        "restart" if r["kind"] == "kill" else "SIGCONT"))
    c.check("cluster: after every primary SIGKILL%s the cluster promotes its replica, every "
            "dlockd grants on its slots within %d ms of the promotion, and the old primary "
            "comes back as a replica" % ("/SIGSTOP" if c.prof["cl_pause"] else "", lag_max),
            ok, "\n      ".join(lines) or "not run")

    # C7. a holder caught by a failover keeps its lock or is fenced off
    hs = [r["holder"] for r in fl]
    good = bool(hs)
    for y in hs:
        if y is None:
            good = False
        elif y["regranted"] is not None:
            good = good and y["write"] is False
        else:
            good = good and y["write"] is True
    c.check("cluster: a holder caught by a failover of its shard either keeps its lock "
            "(nobody else granted, its write accepted) or is fenced off", good,
            "; ".join("no holder" if y is None else
                      "%s worker %d: %s, write %s, unlock %s"
                      % (y["name"], y["wid"], "granted again %.0f ms after the fault"
                         % y["regranted"] if y["regranted"] is not None
                         else "nobody else granted",
                         {None: "none", True: "accepted", False: "REJECTED"
                          if y["regranted"] is None else "rejected"}[y["write"]],
                         y["outcome"]) for y in hs) or "not run")

    # C8. losses only in a failover of the name's shard
    losses = sum(len(p["losses"][0]) for p in per)
    stray = [(p["x"]["name"], g) for p in per for g in p["losses"][1]]
    c.check("cluster: no lock is lost (!LOST, NOTHELD, broken connection) outside a "
            "failover of its shard (none in a migration)", not stray,
            "%d losses, %d outside a failover of their shard%s"
            % (losses, len(stray), "".join("\n      " + fmt_loss(c, g, n)
                                           for n, g in stray[:5])))

    # C9. every daemon serves every shard at the end
    sv = c.m["cl_serve"]
    ok = (sv is not None and len(sv["res"]) == CL_DAEMONS * CL_PRIMARIES and
          all(r[3] == "ok" for r in sv["res"]) and not any(x.get("bad") for x in sv["infos"]))
    c.check("cluster: at the end every dlockd LOCKs/UNLOCKs a name on every primary and INFO "
            "says redis=up, redis_nodes_up = redis_nodes = %d, redis_down=-" % CL_PRIMARIES, ok,
            "not run" if sv is None else
            "%s; %s" % (", ".join("d%d :%d %s (%.0f ms)" % (i, port, out, ms)
                                  for i, port, _, out, ms in sv["res"]),
                        "; ".join("d%d redis=%s %s/%s up, down %s"
                                  % (i, x.get("redis"), x.get("redis_nodes_up"),
                                     x.get("redis_nodes"), x.get("redis_down"))
                                  for i, x in enumerate(sv["infos"]))))


def analyse_quorum(c):
    """The quorum stage: the general invariants per name (each name its own
    fenced resource), then each fault's own checks."""
    qf = [f for f in c.faults if f["kind"].startswith("q-")]
    lease = c.prof["q_lease_ms"]
    bound = Q_CMD_TIMEOUT_MS + c.prof["q_hang_slack_ms"]

    def in_fault(g):
        """The latest fault during g's section (its effects may trail it)."""
        out = None
        for f in qf:
            if g["t_start"] < f["t1"] + f.get("trail", LOSS_WINDOW_S) and g["t_end_eff"] > f["t0"]:
                out = f
        return out

    def fault_for(g):
        """Only a holder that was told (!LOST, during a fault) may have its
        section overlap the next holder's."""
        f = in_fault(g)
        return f["kind"] if f is not None and (g["outcome"] or "").startswith("lost:") else None

    per = []
    for x in c.q_names:
        st = x["store"]
        grants = list(st.grant_order)
        losses = [g for g in grants if g["outcome"] not in (None, "ok")]
        # A loss is admitted in a fault if the holder was told (!LOST);
        # with no majority (q-majority) an UNLOCK may also fail.
        stray = [g for g in losses
                 if not (in_fault(g) is not None and
                         ((g["outcome"] or "").startswith("lost:") or
                          in_fault(g)["kind"] == "q-majority"))]
        per.append(dict(x=x, st=st, grants=grants, accepted=list(st.accepted),
                        rejected=list(st.rejected), o=overlaps(grants, fault_for, c.t_start),
                        drops=accept_drops(list(st.accepted)), fo=fence_order(grants, qf),
                        reentrant=sum(1 for n in st.notes if n[3] == "reentrant_grant"),
                        losses=losses, stray=stray))
    ngrants = sum(len(p["grants"]) for p in per)

    # Q1. no lost update, per name
    check_no_lost_update(c, "quorum", per)

    # Q2. no two holders at once, but a holder told !LOST in a fault; fenced
    kinds, reasons = {}, {}
    viol, unexpl, expl, never = [], [], [], 0
    for p in per:
        o = p["o"]
        for k, v in o["kinds"].items():
            kinds[k] = kinds.get(k, 0) + v
        viol += ["%s: %s" % (p["x"]["name"], v) for v in o["bad"]]
        unexpl += ["%s: %s" % (p["x"]["name"], v) for v in o["unexplained"]]
        for why, stale, new in o["explained"]:
            line = "%s: %s" % (p["x"]["name"], fmt_pair(why, stale, new, c.t_start))
            if why.startswith("lost:"):
                unexpl.append(line + " -- told !LOST, but outside any fault")
            else:
                reasons[why] = reasons.get(why, 0) + 1
                expl.append(line)
        never += len(o["open"])
    c.check("quorum: sections of one name overlap only when the earlier holder was told "
            "(!LOST) in a fault, and then the fence stopped it",
            per and not viol and not unexpl and not never,
            "%d grants, %d overlapping pairs (%s; causes: %s)%s%s%s%s"
            % (ngrants, sum(p["o"]["pairs"] for p in per),
               ", ".join("%s %d" % kv for kv in sorted(kinds.items())),
               ", ".join("%s %d" % kv for kv in sorted(reasons.items())) or "-",
               "".join("\n      told !LOST: " + v for v in expl[:5]),
               "".join("\n      VIOLATION: " + v for v in viol[:5]),
               "".join("\n      UNEXPLAINED OVERLAP: " + v for v in unexpl[:5]),
               "\n      %d sections never ended" % never if never else ""))

    # Q3. fences per name
    drops = [(p["x"]["name"], a, b) for p in per for a, b in p["drops"]]
    dups = [(p["x"]["name"], a, b) for p in per for a, b in p["fo"]["dups"]]
    order_bad = [(p["x"]["name"], g) for p in per for g in p["fo"]["order_bad"]]
    jumps = [j for p in per for j in p["fo"]["jumps"]]
    reentrant = sum(p["reentrant"] for p in per)
    c.check("quorum: per name, fences of accepted writes rise strictly and every grant has its "
            "own fence, rising with grant order (also across node kills, stops, empty "
            "restarts and the loss of the majority)",
            per and not drops and not dups and not order_bad and all(jumps) and not reentrant,
            "%d grants, %d accepted-write fence drops, %d duplicate fences, %d grants with a "
            "fence below an earlier finished section's, %d fresh grants with holds != 1, "
            "fence rose across %d/%d faults of a name%s%s%s"
            % (ngrants, len(drops), len(dups), len(order_bad), reentrant, sum(jumps), len(jumps),
               "".join("\n      %s: %d after %d" % (n, b["fence"], a["fence"])
                       for n, a, b in drops[:5]),
               "".join("\n      %s: fence %d granted twice (workers %d at %.3f s, %d at %.3f s)"
                       % (n, a["fence"], a["wid"], a["t_start"] - c.t_start, b["wid"],
                          b["t_start"] - c.t_start) for n, a, b in dups[:5]),
               "".join("\n      %s: worker %d fence %d at %.3f s on dlockd %d"
                       % (n, g["wid"], g["fence"], g["t_start"] - c.t_start, g["daemon"])
                       for n, g in order_bad[:5])))

    # Q4. no request hangs
    recs = [("d%d" % p.i, r) for p in c.q_probes for r in p.recs if r[0] != "CONNECT"]
    unl = [g for p in per for g in p["grants"]
           if g.get("t_done") is not None and g["t_end"] is not None]
    request_latency(c, "quorum stage", recs, unl, Q_CMD_TIMEOUT_MS, c.prof["q_hang_slack_ms"])

    # Q5. losses only in faults, and then told
    losses = sum(len(p["losses"]) for p in per)
    stray = [(p["x"]["name"], g) for p in per for g in p["stray"]]
    c.check("quorum: no lock is lost outside a fault; in a fault with a majority alive only "
            "with !LOST (no ERR BACKEND, no broken connection)", not stray,
            "%d losses (%s)%s" % (losses, ", ".join("%s %d" % kv for kv in sorted(
                count_by(g["outcome"] for p in per for g in p["losses"]).items())) or "-",
                "".join("\n      " + fmt_loss(c, g, n) for n, g in stray[:5])))

    # Q6. restarted nodes count again after rejoin_delay_ms, not before
    tol = Q_REJOIN_TOL_MS
    lines, ok = [], True
    su = c.m["q_setup"]
    if su is not None:
        early = [v for v in su["up"] if v < lease - tol]
        ok = ok and not early and all(v is not None for v in su["full"])
        lines.append("fresh servers: dlockd 0/1 said redis=up %s ms after the servers' start, "
                     "counted all %s ms%s" % (fmt_list(su["up"]), fmt_list(su["full"]),
                                              " EARLY" if early else ""))
    for r in c.m["q_restarts"]:
        if r["t_res"] is None:
            ok = False
            lines.append("%s %s: not restarted" % (r["phase"], r["label"]))
            continue
        per_d = []
        for w in c.q_watch:
            down, up = w.counted_again(r["label"], r["t_kill"])
            if down is None:
                ok = False
                per_d.append("d%d NEVER SAW IT DOWN OR REJOINING" % w.i)
            elif up is None:
                ok = False
                per_d.append("d%d never counted it again" % w.i)
            else:
                lo = (up[0] - r["t_spawn"]) * 1000     # counted after this
                hi = (up[1] - r["t_spawn"]) * 1000     # ... and before this
                bad = hi < lease - tol or lo > lease + c.prof["q_late_ms"]
                ok = ok and not bad
                per_d.append("d%d %.0f-%.0f ms%s" % (w.i, lo, hi,
                                                     " EARLY" if hi < lease - tol else
                                                     " LATE" if bad else ""))
        lines.append("%s %s: counted again %s after its restart"
                     % (r["phase"], r["label"], ", ".join(per_d)))
    c.check("quorum: a (re)started node counts toward a majority only rejoin_delay_ms (%d ms) "
            "after it started, and within %d ms more (INFO redis_down, sampled every %.0f ms; "
            "tolerance %d ms)" % (lease, c.prof["q_late_ms"], Q_INFO_EVERY_S * 1000, tol),
            ok and c.m["q_restarts"], "\n      ".join(lines) or "not run")

    # Q7. q-kill2: the service goes on; the held lock is kept
    def service_ok(sv, names=True):
        return (all(d["grants"] > 0 and d["bad"] == 0 and d["first"] is not None and
                    d["first"] <= bound and d["gap"] <= c.prof["q_progress_ms"]
                    for d in sv["daemons"]) and
                (not names or all(v["grants"] > 0 and v["gap"] <= c.prof["q_progress_ms"]
                                  for v in sv["names"].values())) and
                sv["lock_backend_errors"] == 0)

    def fmt_service(sv):
        return ("per daemon: probe grants %s, failed requests %s%s, first grant %s ms, longest "
                "gap %s ms; per name: grants %s, longest gap %s ms; workers' LOCK ERR BACKEND %d"
                % ("/".join(str(d["grants"]) for d in sv["daemons"]),
                   "/".join(str(d["bad"]) for d in sv["daemons"]),
                   " (%s)" % ", ".join(sorted(set(k for d in sv["daemons"]
                                                  for k in d["bad_kinds"])))
                   if any(d["bad"] for d in sv["daemons"]) else "",
                   fmt_list([d["first"] for d in sv["daemons"]]),
                   fmt_list([d["gap"] for d in sv["daemons"]]),
                   " ".join("%s %d" % (n, v["grants"]) for n, v in sorted(sv["names"].items())),
                   fmt_list([v["gap"] for v in sv["names"].values()]),
                   sv["lock_backend_errors"]))

    def fmt_info(info):
        return " | ".join("d%d redis=%s up=%s down=%s" % (i, v[0], v[1], ",".join(v[2]) or "-")
                          if v else "d%d -" % i for i, v in enumerate(info))

    k2 = c.m["q_kill2"]
    if k2 is not None:
        want = sorted(k2["victims"])
        info_ok = all(v is not None and v[0] == "up" and v[1] == Q_MAJORITY and v[2] == want
                      for v in k2["info"])
        ok = (info_ok and service_ok(k2["service_all"]) and
              holder_ok(k2["holder"], k2["expect_kept"]) and k2["q_held"] is not None)
        detail = ("SIGKILL %s for %.1f s; INFO %s; until every node counted again: %s; held "
                  "worker (on %s): %s (expected %s); %s taken with 2 nodes dead: %s"
                  % (" ".join(k2["victims"]), k2["service"]["secs"], fmt_info(k2["info"]),
                     fmt_service(k2["service_all"]), " ".join(k2["nodes"]) or "-",
                     fmt_holder(k2["holder"]), fmt_expect(k2["expect_kept"]), Q_HELD,
                     "NOT GRANTED" if k2["q_held"] is None else
                     "fence %d in %.1f ms, on %s" % (k2["q_held"]["fence"], k2["q_held"]["ms"],
                                                     " ".join(k2["q_held"]["nodes"]))))
    else:
        ok, detail = False, "not run"
    c.check("quorum q-kill2: with 2 of %d nodes SIGKILLed every daemon goes on granting (no "
            "failed request, first grant within %d ms, no gap over %d ms on a daemon or a name), "
            "INFO says redis=up, redis_nodes_up=%d and names the dead in redis_down, and a "
            "holder keeps its lock" % (Q_NODES, bound, c.prof["q_progress_ms"], Q_MAJORITY),
            ok, detail)

    # Q8. q-pause
    qp = c.m["q_pause"]
    if qp is not None:
        stale = qp["stale"]
        ok = (all(v is not None and v[0] == "up" for v in qp["info"]) and
              qp["down_seen"] is not None and qp["victim"] in qp["stale_nodes"] and
              service_ok(qp["service_all"]) and holder_ok(qp["holder"], qp["expect_kept"]) and
              qp["unlock"] is not None and qp["unlock"]["res"] == "ok" and
              qp["unlock"]["ms"] <= bound and stale is not None and stale["res"] == "ok" and
              stale["ms"] <= bound and stale["fence1"] > stale["fence0"] and
              all(v is not None for v in qp["up"]))
        c.check("quorum q-pause: with a node SIGSTOPped every daemon goes on granting without "
                "a hang and stops counting it within command_timeout_ms + slack; a lock "
                "released meanwhile (its key stale on the stopped node after SIGCONT) goes to "
                "another daemon at once with a greater fence, and the node counts again within "
                "%d ms" % c.prof["q_late_ms"], ok,
                "SIGSTOP %s for %.1f s; INFO then %s; %s; held worker (on %s): %s (expected "
                "%s); %s: the daemons gave up on the stopped node %s ms after SIGSTOP, UNLOCK "
                "then %s in %.1f ms; after SIGCONT its key on %s; dlockd 1's TRYLOCK %s in "
                "%.1f ms, fence %s -> %s; every node counted %s ms after SIGCONT"
                % (qp["victim"], qp["service"]["secs"], fmt_info(qp["info"]),
                   fmt_service(qp["service_all"]), " ".join(qp["nodes"]) or "-",
                   fmt_holder(qp["holder"]), fmt_expect(qp["expect_kept"]), Q_STALE,
                   fmt_ms(qp["down_seen"]),
                   qp["unlock"]["res"], qp["unlock"]["ms"],
                   " ".join(qp["stale_nodes"]) or "no node", stale["res"], stale["ms"],
                   stale["fence0"], stale["fence1"], fmt_list(qp["up"])))

    # Q9. q-restart-empty
    qr = c.m["q_restart"]
    if qr is not None:
        q = qr["q_held"]
        if q is None:
            hok, hdetail = False, "%s was not held" % Q_HELD
        elif q["expect_lost"]:
            hok = (q["lost"] is not None and q["grant"] is not None and
                   q["fence1"] is not None and q["fence1"] > q["fence"] and
                   (q["lost"] <= q["grant"] or q["same_round"]))
            hdetail = ("%s (fence %d) on %s, one of them restarted empty: !LOST %s at %s ms, "
                       "dlockd 1's waiter granted at %s ms%s, fence %s"
                       % (Q_HELD, q["fence"], " ".join(q["nodes"]), q["reason"],
                          fmt_ms(q["lost"]), fmt_ms(q["grant"]),
                          " (read in the same round as the !LOST)" if q["same_round"] else "",
                          q["fence1"]))
        else:
            hok = q["lost"] is None and q["grant"] is None
            hdetail = ("%s (fence %d) on %s: still a majority without the restarted node: %s"
                       % (Q_HELD, q["fence"], " ".join(q["nodes"]),
                          "kept" if hok else "!LOST at %s ms, regranted at %s ms"
                          % (fmt_ms(q["lost"]), fmt_ms(q["grant"]))))
        ok = (hok and holder_ok(qr["holder"], qr["expect_kept"]) and
              service_ok(qr["service"], names=False) and all(v is not None for v in qr["up"]))
        c.check("quorum q-restart-empty: a node SIGKILLed and restarted empty grants nothing "
                "twice: a lock still on a majority of the others is kept; one that was on just a "
                "majority with it is told !LOST before another daemon gets it, with a greater "
                "fence", ok,
                "%s; held worker (on %s): %s (expected %s); %s; every node counted %s ms after "
                "the restart"
                % (hdetail, " ".join(qr["nodes"]) or "-", fmt_holder(qr["holder"]),
                   fmt_expect(qr["expect_kept"]), fmt_service(qr["service"]),
                   fmt_list(qr["up"])))
    else:
        c.check("quorum q-restart-empty: a node restarted empty grants nothing twice", False,
                "not run")

    # Q10. q-majority
    qm = c.m["q_majority"]
    if qm is not None:
        m = qm["maj"]
        rbound = lease + c.prof["q_late_ms"] + c.prof["q_resume_ms"]
        ok = (all(v is not None and v[0] == "down" and v[1] == Q_MAJORITY - 1
                  for v in qm["info"]) and
              all(d["n"] > 0 and d["ok"] == 0 and d["noquorum"] == d["n"] and
                  d["slowest"] <= bound for d in qm["down"]) and
              m is not None and m["lost"] is not None and m["reason"] == "backend" and
              m["end"] is not None and m["lost"] <= m["end"] and
              holder_ok(qm["holder"], False) and
              all(v is not None and v <= rbound for v in qm["resume"]) and
              not any(qm["early"]))
        c.check("quorum q-majority: with 3 of %d nodes SIGKILLed every request answers ERR "
                "BACKEND no quorum within %d ms, INFO says redis=down, a holder hears !LOST ... "
                "backend before its lease runs out on the surviving nodes (their PTTL); a held "
                "holder is fenced off; once restarted no grant comes before the rejoin delay, "
                "and every daemon grants again within %d ms of the restart"
                % (Q_NODES, bound, rbound), ok,
                "SIGKILL %s; INFO then %s; requests meanwhile per daemon %s (ERR BACKEND no "
                "quorum %s, granted %s%s), slowest %s ms; %s: %s; held worker: %s; first probe "
                "grant after the restart %s ms, granted before the rejoin delay %s"
                % (" ".join(qm["victims"]), fmt_info(qm["info"]),
                   "/".join(str(d["n"]) for d in qm["down"]),
                   "/".join(str(d["noquorum"]) for d in qm["down"]),
                   "/".join(str(d["ok"]) for d in qm["down"]),
                   "; other: " + ", ".join(o for d in qm["down"] for o in d["other"][:3])
                   if any(d["other"] for d in qm["down"]) else "",
                   fmt_list([d["slowest"] for d in qm["down"]]), Q_MAJ,
                   "not held" if m is None else "!LOST %s at %s ms after the kill, its lease "
                   "ran out on the survivors at %s ms" % (m["reason"], fmt_ms(m["lost"]),
                                                         fmt_ms(m["end"])),
                   fmt_holder(qm["holder"]), fmt_list(qm["resume"]),
                   "/".join(str(v) for v in qm["early"])))
    elif c.prof["q_majority"]:
        c.check("quorum q-majority: the loss of the majority", False, "not run")

    # Q11. every daemon serves at the end
    sv = c.m["q_final"]
    ok = (sv is not None and len(sv["res"]) == Q_DAEMONS and
          all(r[1] == "ok" for r in sv["res"]) and not any(x.get("bad") for x in sv["infos"]))
    c.check("quorum: at the end every dlockd LOCKs/UNLOCKs and INFO says redis=up, "
            "redis_nodes_up = redis_nodes = %d, redis_down=-" % Q_NODES, ok,
            "not run" if sv is None else
            "%s; %s" % (", ".join("d%d %s (%.0f ms)" % r for r in sv["res"]),
                        "; ".join("d%d redis=%s %s/%s up, down %s"
                                  % (i, x.get("redis"), x.get("redis_nodes_up"),
                                     x.get("redis_nodes"), x.get("redis_down"))
                                  for i, x in enumerate(sv["infos"]))))


def count_by(items):
    out = {}
    for k in items:
        out[k] = out.get(k, 0) + 1
    return out


def dump_events(c):
    """The whole log as JSON lines, for a look after a failure (--keep)."""
    import json
    path = os.path.join(c.tmp, "events.jsonl")
    lock_of = dict((id(x["store"]), x["name"]) for x in c.cl_names + c.q_names)
    with open(path, "w") as f:
        for kind, recs in (("phase", c.phases), ("fault", c.faults)):
            for r in recs:
                f.write(json.dumps(dict(r, type=kind), default=str) + "\n")
        for p in c.probes + c.cl_probes + c.q_probes:
            for op, t0, t1, res, detail in list(p.recs):
                f.write(json.dumps(dict(type="probe", daemon=p.i, shard=p.shard, op=op, t0=t0,
                                        t1=t1, result=res, detail=detail)) + "\n")
        for st in c.stores:
            name = lock_of.get(id(st), "chaos")
            for t, wid, inc, note in st.notes:
                f.write(json.dumps(dict(type="note", lock=name, t=t, wid=wid, inc=inc,
                                        note=note)) + "\n")
            for kind, recs in (("grant", st.grant_order), ("accepted", st.accepted),
                               ("rejected", st.rejected)):
                for r in recs:
                    r = dict(r, type=kind, lock=name)
                    if kind == "grant" and r.get("write") is not None:
                        r["write"] = {"seq": r["write"]["seq"],
                                      "accepted": r["write"]["accepted"]}
                    f.write(json.dumps(r, default=str) + "\n")
    print("event log: %s" % path)


def fmt_list(xs):
    if not xs:
        return "-"
    v = [x for x in xs if x is not None]
    s = " ".join("-" if x is None else "%.1f" % x for x in xs)
    if v:
        s += " (max %.1f)" % max(v)
    return s


def phase_table(c):
    """Per phase, over every fenced store (the cluster stage's names too)."""
    rows = []
    for p in c.phases:
        t0, t1 = p["t0"], p["t1"]
        gr = [g for st in c.stores for g in st.grant_order if t0 <= g["t_start"] < t1]
        acc = sum(1 for st in c.stores for w in st.accepted if t0 <= w["t"] < t1)
        rej = sum(1 for st in c.stores for w in st.rejected if t0 <= w["t"] < t1)
        lost = sum(1 for g in gr if g["outcome"] not in (None, "ok"))
        notes = [n for st in c.stores for n in st.notes if t0 <= n[0] < t1]
        be = sum(1 for n in notes if n[3] == "lock_backend_error")
        rc = sum(1 for n in notes if n[3] in ("lock_conn_error", "connect_failed"))
        per = "/".join(str(sum(1 for g in gr if g["daemon"] == i)) for i in range(DAEMONS))
        wait = max([g["t_start"] - g["t_req"] for g in gr] or [0]) * 1000
        rows.append((p["name"], t1 - t0, len(gr), per, acc, rej, lost, be, rc, wait))
    out = ["  %-14s %5s %6s %-15s %8s %8s %4s %7s %7s %9s"
           % ("phase", "secs", "grants", "by d0/d1/d2", "accepted", "rejected", "lost",
              "ERR", "conn", "max wait")]
    out.append("  %-14s %5s %6s %-15s %8s %8s %4s %7s %7s %9s"
               % ("", "", "", "", "writes", "writes", "", "BACKEND", "errors", "ms"))
    for r in rows:
        out.append("  %-14s %5.1f %6d %-15s %8d %8d %4d %7d %7d %9.0f" % r)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="the shorter run for make test")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--log-level", choices=("error", "warn", "info", "debug"), default=None,
                    help="the daemons' log_level (default: theirs, info)")
    ap.add_argument("--lenient-failover", action="store_true",
                    help="cluster stage: let overlapping sections whose stale grant the "
                         "promoted primary made itself count as the failover window's, as in "
                         "the Sentinel stage; by default they are violations (no lost write "
                         "explains them)")
    ap.add_argument("--stage", choices=("all", "standalone", "failover", "cluster", "quorum",
                                        "kinds", "elect", "mlock", "hot", "upgrade"),
                    default="all", help="run every stage (default) or one")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 30)

    _state["keep"] = args.keep
    _state["tmp"] = tempfile.mkdtemp(prefix="dlock-chaos-")
    _state["spawner"] = Spawner(_state["tmp"])
    atexit.register(cleanup)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _on_signal)
    signal.signal(signal.SIGALRM, _on_alarm)

    c = Chaos(args)
    print("dlockd chaos suite (%s, seed %d, stage %s), dlockd %s, temp dir %s"
          % (c.mode, args.seed, args.stage, c.dlockd_bin, c.tmp), flush=True)
    signal.alarm((c.prof["budget"] if args.stage in ("all", "standalone") else 0) +
                 (c.prof["fo_budget"] if args.stage in ("all", "failover") else 0) +
                 (c.prof["cl_budget"] if args.stage in ("all", "cluster") else 0) +
                 (c.prof["q_budget"] if args.stage in ("all", "quorum") else 0) +
                 (c.prof["k_budget"] if args.stage in ("all", "kinds") else 0) +
                 (c.prof["h_budget"] if args.stage in ("all", "hot") else 0) +
                 (c.prof["u_budget"] if args.stage in ("all", "upgrade") else 0))
    fatal = None
    try:
        try:
            c.run()
        except (SuiteTimeout, RuntimeError) as e:
            fatal = str(e)
        except (RespError, OSError, dlock.DlockError) as e:
            # A topology or a daemon that answered what nothing expected:
            # the run ends here, the analysis still runs.
            fatal = "%s: %s\n%s" % (type(e).__name__, e, "".join(
                traceback.format_exc().splitlines(True)[-6:]))
        if fatal is not None:
            for wid, p in c.workers.items():      # end the workload for the analysis
                if p.poll() is None:
                    p.send_signal(signal.SIGCONT)
                    c.kill_worker(wid)
        signal.alarm(0)
        c.stop_probes()
        if c.store is not None:
            if any(p is not None for p in c.daemons):
                c.stop_daemons()
            analyse(c)
        if fatal:
            c.check("the suite ran to its end", False, fatal)
        print()
        print("summary (%s run, %.1f s, seed %d)" % (c.mode, time.monotonic() - c.t_start,
                                                     args.seed))
        if c.store is not None:
            print(phase_table(c))
        print("invariants:")
        for name, ok, detail in c.checks:
            print("  %s %s\n      %s" % ("PASS" if ok else "FAIL", name, detail))
        passed = sum(1 for _, ok, _ in c.checks if ok)
        failed = len(c.checks) - passed
        if failed and not args.keep:
            _state["keep"] = True      # logs are needed to look at a failure
        if _state["keep"] and c.store is not None:
            dump_events(c)
        cleanup()
        print("%d passed, %d failed" % (passed, failed), flush=True)
        return 0 if failed == 0 and c.checks else 1
    finally:
        signal.alarm(0)
        cleanup()


if __name__ == "__main__":
    sys.exit(main())
