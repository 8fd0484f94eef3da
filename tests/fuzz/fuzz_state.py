#!/usr/bin/env python3
"""dlockd's stateful fuzzer: a seeded random walk of many clients against
the sanitized daemon, two daemons on one Redis, with Redis paused, stopped,
cut and delayed, and reloads, checked at every step and at the end.

    python3 tests/fuzz/fuzz_state.py [--seed N] [--seconds S] [--mode normal|hostile]
        [--profile mixed|queues|stale] [--daemons 1|2] [--short] [--dlockd PATH]
        [--keep] [--keep-going] [--no VERB,...] [--quiet] [--verbs]

tests/fuzz/README.md says what it does and checks; in short. The walk:
clients open and close (also mid-wait, half-closed, by QUIT) and send every
verb of proto/PROTOCOL.md on a few names per lock kind, after a think time
each; waiters give up after their patience (CANCEL or close). At rates in
time: slow readers (stop reading, flood LEADER/OBSERVE until dlockd closes
them past max_output), bursts of closes with CLIENTS at once, pairs of
clients on a quiet name of their own, FORCEUNLOCK from the other daemon
with the holders re-entering the name at once (MLOCK), storms of Redis
faults (CLIENT PAUSE, SIGSTOP, CLIENT KILL, link latency and reset, waiters
leaving during them) between calms, SIGHUP reloads. Hostile mode: daemon 0's
Redis replies mangled (mangle.py). A profile leans the walk towards one
class of sequence (PROFILES).

The checks: no sanitizer report, no daemon gone, a clean exit; every
request answered in time (a wait that may last for ever only once nothing
blocks it); the per-uid limits; the protocol's framing and events; INFO's
counters back to 0 and nothing left in Redis once every client closed; the
history checker (tests/chaos/history.py) over every name.

A failure prints the seed, the profile and the step, keeps the run's
directory (daemon logs, walk.log with every step, the histories) and exits
1; --short runs SHORT_RUNS. Standard library only (and tests/chaos:
faultproxy, history, quorum, redisproc).
"""
# SPDX-License-Identifier: MIT

import argparse
import collections
import fcntl
import os
import random
import re
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import termios
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "chaos"))
sys.path.insert(0, HERE)

import history  # noqa: E402
import redisproc  # noqa: E402
from faultproxy import FaultProxy  # noqa: E402
import mangle  # noqa: E402
from mangle import Mangler  # noqa: E402
from quorum import Quorum  # noqa: E402

# ---- the names ---------------------------------------------------------------------
KEY_PREFIX = "fz:"
PLAIN = ("p0", "p1", "p2", "p3", "p4")
LOCAL_PLAIN = ("q0", "q1")          # plain names only daemon 0's clients take: its waiters
                                    # wait on its own holders, with no watch in Redis
LOCAL_P = 0.4                       # ... this often, of daemon 0's plain LOCKs
QUIET_PREFIX = "z"                  # a pair's own name (a_pair): z1, z2, ...
RW = ("r0", "r1", "r2")
SEMS = {"s0": 2, "s1": 3}           # name: size (SEMINIT at the start)
FAIR = ("f0", "f1", "f2")
ELECT = ("e0", "e1", "e2")
MUTEXES = PLAIN + LOCAL_PLAIN + FAIR + ELECT   # holds of these are a fenced mutex's
ALL_NAMES = MUTEXES + RW + tuple(SEMS)

# ---- the walk ----------------------------------------------------------------------
CLIENTS_MAX = 20                    # walk clients at once, over the daemons
STEP_MS = 2                         # a step reads what came within this
# per second: faults (in a storm only), reloads, bursts of closes with
# CLIENTS, slow readers
RATES = (("fault", 1.5), ("reload", 0.25), ("burst", 0.3), ("slow", 0.4), ("open", 6.0),
         ("close", 0.5), ("pair", 0.3))
PAIR_S = 0.1                        # a pair's second client comes this much later
PAIR_EXTRA = 4                      # pairs' clients beyond CLIENTS_MAX
PAIR_KEEP_S = 3.0                   # a pair's holder keeps its name this long
PATIENCE_S = 4.0                    # a waiter's mean patience: then it closes or cancels
PATIENT_P = 0.2                     # ... but this many wait as long as it takes
EDGE_P = 0.3                        # a leased plain hold re-entered at its lease's end
EDGE_S = 0.03                       # ... this much before it
THINK_S = 0.015                     # a client's mean time between requests
PIPELINE_P = 0.05                   # a client sends a few requests at once
LEASES_MS = (500, 1000, 2000, 4000)  # a request's own lease, when it has one
LEASE_P = 0.35                      # ... how often
TRY_WAITS_MS = (0, 0, 50, 300, 1500)
CROSS_KIND_P = 0.04                 # a TRY of another kind's name
SLOW_FILL_P = 0.3                   # a slow reader fills its socket with PINGs first
SLOW_FILL_MAX = 40000               # ... at most this many
SLOW_FULL_S = 0.05                  # ... until it grew no more for this long
SLOW_FLOOD_LINES = 120              # flood lines per step
SLOW_RESUME_S = 1.5                 # a slow reader not closed by then reads again
CALM_S = (5.0, 8.0)
WARMUP_S = 1.5                      # the first calm
FAULT_CLOSE_P = 0.8                 # waiters close or cancel right behind a fault
STORM_S = (2.5, 4.5)
PAUSE_MS = (200, 2500)              # CLIENT PAUSE and SIGSTOP lengths
LATENCY_MS = (50, 300)
LATENCY_S = (0.5, 2.5)
# dlockd's configuration, initial and reloaded: values drawn from these
CONF_CHOICES = {
    "command_timeout_ms": (400, 800, 1500, 3000),
    "max_output": (4096, 4096, 8192, 65536),
    "lease_ms": (8000, 10000, 12000),
    "max_clients_per_uid": (10, 16, 64, 64),
    "max_locks_per_uid": (6, 10, 1000, 1000),
    "max_waiters_per_uid": (6, 12, 1000, 1000),
    "max_locks_per_client": (3, 8, 1000, 1000),
    "max_observes_per_client": (2, 4, 1024),
}
CONNECT_TIMEOUT_MS = 500
SEND_TIMEOUT_S = 5.0                # a client's send waits this long for room

# ---- the checks --------------------------------------------------------------------
SLACK_S = 3.0                       # over a bound: a sanitized daemon on a busy machine
LIST_TIMEOUTS = 3                   # LIST: a SCAN and a describe call or two
HANG_S = 2.0                        # a wait on names free this long in a calm hangs
FRONT_S = 0.05                      # two waits this close: either may be first in a queue
SAMPLE_S = 0.25                     # Redis: which names are free
INFO_S = 0.5                        # INFO's counters, the per-uid limits
HOLDS_S = 1.0                       # Redis: each daemon's holds
LIMIT_SAMPLES = 2                   # a limit exceeded this many samples in a row
# The per-uid limits and what measures each (every client is one uid).
# After a reload lowered one, each measure keeps the old bound until a
# sample of its own is at or under the new one (holds made before the
# reload stay). Redis may have fewer holds of a daemon than its INFO counts
# (one forced by the other daemon is gone from Redis, its daemon hears of
# it at its next renewal; only the latest pairs' names are read), so
# Redis under the bound says nothing of INFO.
LIMITS = {"max_clients_per_uid": ("INFO connections",),
          "max_locks_per_uid": ("INFO locks_held", "holds in Redis"),
          "max_waiters_per_uid": ("INFO waiters",)}
PROBE_TIMEOUT_S = 10.0              # INFO unanswered this long: the daemon hangs
END_S = 8.0                         # the end's convergence, over command_timeout_ms
START_S = 15.0
REPORT_WAIT_S = 3.0                 # a sanitizer's report is whole once dlockd exits
FORCE_RUNS_S = 60.0                 # a FORCEUNLOCK sent runs in Redis within this
DYING_S = 0.5                       # a connection closed unasked: is its dlockd dying?
STOP_S = 20.0                       # SIGTERM to exit (it releases everything first)
SANITIZER = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|"
                       r"SUMMARY: (Address|UndefinedBehavior|Leak)Sanitizer|"
                       r"AddressSanitizer:DEADLYSIGNAL")
ASAN_OPTIONS = ("detect_leaks=1:exitcode=86:abort_on_error=0:max_allocation_size_mb=1024:"
                "allocator_may_return_null=0")
UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1"
# The walk's knobs, and the profiles that lean them one way: "queues" on
# fair and election waiters meeting faults, "stale" on holds another daemon
# removed (FORCEUNLOCK of a name with waiters behind its holder, re-entered
# at once), with longer calms to judge their waits in.
KNOBS = {"conf": CONF_CHOICES, "force_w": 2.0, "local_p": LOCAL_P, "storm_queued": 2,
         "storm_s": STORM_S, "calm_s": CALM_S, "patient_p": PATIENT_P,
         "rates": {}, "force_local_p": 0.5,
         "fault_kinds": ("pause", "stop", "kill", "kill", "latency", "reset"),
         "outlast_timeout": False, "fault_closes": (1, 3)}
PROFILES = {
    "mixed": {},
    "queues": {"storm_queued": 4, "storm_s": (3.0, 4.5), "calm_s": (4.0, 6.0),
               "fault_kinds": ("pause", "stop", "kill", "kill", "reset"),
               "outlast_timeout": True, "fault_closes": (2, 4)},
    "stale": {"force_w": 8.0, "calm_s": (8.0, 12.0), "rates": {"pair": 1.5},
              "force_local_p": 0.85,
              "conf": dict(CONF_CHOICES, max_locks_per_client=(1000,), max_clients_per_uid=(64,),
                           max_waiters_per_uid=(1000,), max_locks_per_uid=(1000,))},
}
# the short run: (seed, mode, profile, seconds) each
SHORT_RUNS = ((1, "normal", "queues", 11.0), (2, "normal", "stale", 11.0),
              (3, "hostile", "mixed", 5.0))
# a long walk (make fuzz-state) in segments of about LONG_SEGMENT_S, seeds
# seed, seed + 1, ..., through these (mode, profile)
LONG_SEGMENT_S = 100.0
LONG_ROTATION = (("normal", "mixed"), ("normal", "queues"), ("normal", "stale"),
                 ("hostile", "mixed"))

# request kinds: how long an answer may take
LOCAL, REDIS, TWAIT, WAIT, LISTING = "local", "redis", "twait", "wait", "list"
WAITING_VERBS = ("LOCK", "RLOCK", "WLOCK", "FAIRLOCK", "ACQUIRE", "MLOCK", "ELECT")


class Failed(Exception):
    pass


def places_ended(queue, ends, now_ms):
    """Every place of a queue (its owner fields) has ended: its time in
    ends (field: ms since the epoch) is past, and so is every time there."""
    return all(ends.get(f, now_ms + 1) < now_ms for f in queue) and \
        all(v < now_ms for v in ends.values())


def grant_order(s):
    """A history section's place in its name's grant order: by fence (a
    read's is the counter, which a write raises: a read with a write's
    fence came after it)."""
    return (s["fence"], s.get("mode") == "R")


def forced_between(forces, after, before):
    """The latest of forces (FORCEUNLOCK requests of one name, in sending
    order: t_sent, ran_by, removed) that may have removed a hold in Redis
    after `after` and before `before`: sent before `before`, not answered
    OK 0 (nothing removed), and run, if at all, after `after` (ran_by:
    its answer's arrival, a bound past it if it was never answered, None
    while it is in flight). None if there is none."""
    for f in reversed(forces):
        if f.t_sent is None:
            continue                    # generated, never sent
        if f.t_sent < after - FORCE_RUNS_S:
            break                       # run long before
        if f.t_sent < before and f.removed and (f.ran_by is None or f.ran_by > after):
            return f
    return None


def native_kind(name):
    """The kind of hold the walk mostly takes of a name: m plain (LOCK,
    MLOCK), f fair, e election, r read (or w write), s semaphore."""
    return ("f" if name in FAIR else "e" if name in ELECT else "r" if name in RW else
            "s" if name in SEMS else "m")


def pool_of(name):
    if name in RW:
        return "rw"
    if name in SEMS:
        return "sem"
    if name in MUTEXES or name.startswith(QUIET_PREFIX):
        return "mutex"
    return None


class Req(object):
    def __init__(self, verb, line, names=(), kind=LOCAL, wait_ms=0, lease=0, permits=0):
        self.verb = verb
        self.line = line
        self.names = list(names)
        self.kind = kind
        self.wait_ms = wait_ms
        self.lease = lease
        self.permits = permits
        self.t_sent = None
        self.t_head = None
        self.held_before = ()           # names held when sent (MLOCK's reentries)
        self.judged = False             # a wait judged in a calm
        self.patience = None            # a wait: its client gives up after (s)
        self.front_since = None         # a wait: in front of its queues since


class Client(object):
    def __init__(self, cid, d):
        self.cid = cid
        self.d = d
        self.proc = "c%d" % cid
        self.sock = None
        self.buf = b""
        self.pending = collections.deque()
        self.held = {}                  # name -> dict(kind, count, fence, lease, permits)
        self.observing = set()
        self.slow = None                # a slow episode's state
        self.recorded = True            # its operations go to the histories
        self.closed = False
        self.half = False               # its writing side shut
        self.quit = False               # QUIT sent
        self.list_left = 0
        self.first = True
        self.next_at = None             # when it sends its next request
        self.keep = {}                  # name: not released before (a pair's holder)
        self.private = "o%d" % cid      # a name only it observes

    def idle(self):
        return not self.closed and not self.half and not self.pending and self.slow is None

    def waiting(self):
        return (not self.closed and self.slow is None and self.pending and
                self.pending[0].kind in (WAIT, TWAIT))


class Daemon(object):
    def __init__(self, i, tmp):
        self.i = i
        self.sock = os.path.join(tmp, "d%d.sock" % i)
        self.conf_path = os.path.join(tmp, "d%d.conf" % i)
        self.logname = "d%d.log" % i
        self.log = os.path.join(tmp, self.logname)
        self.proc = None
        self.link = None
        self.conf = {}
        self.timeouts = []              # (t, command_timeout_ms) as set
        self.reloads_sent = 0
        self.reloads_seen = 0
        self.log_pos = 0
        self.log_tail = b""
        self.probe = None
        self.probe_buf = b""
        self.info = {}
        self.up = False
        self.uuid = None
        self.allow = {}                 # (limit key, measure) -> the bound judged now
        self.lower = {}                 # (limit key, measure) -> (new value, reload number)
        self.over = collections.Counter()  # (limit key, measure) -> samples in a row above it

    def judge_conf(self):
        """Every limit judged at its value in self.conf."""
        for k, measures in LIMITS.items():
            for m in measures:
                self.allow[(k, m)] = self.conf[k]


class Walk(object):
    def __init__(self, args, seed, mode, seconds, profile="mixed"):
        self.args = args
        self.seed = seed
        self.mode = mode
        self.seconds = seconds
        self.profile_name = profile
        self.profile = PROFILES[profile]
        self.rng = random.Random(seed)
        self.tmp = tempfile.mkdtemp(prefix="dlock-fuzz-state-")
        self.spawner = redisproc.Spawner(self.tmp)
        self.redis = None
        self.px = None
        self.mangler = None
        self.rc = None                  # our Redis connection
        self.daemons = []
        self.clients = {}
        self.next_cid = 0
        self.poller = select.poll()
        self.by_fd = {}
        self.step = 0
        self.t0 = time.monotonic()
        self.failures = []
        self.walklog = open(os.path.join(self.tmp, "walk.log"), "w")
        self.hist = {k: history.History(os.path.join(self.tmp, "history-%s.jsonl" % k))
                     for k in ("mutex", "rw", "sem", "elect")}
        self.samples = collections.defaultdict(lambda: collections.deque(maxlen=200))
        self.grants = collections.defaultdict(float)   # the latest grant seen, per name
        self.taint = collections.defaultdict(float)    # another kind held it until
        self.forced = collections.defaultdict(float)   # the latest FORCEUNLOCK sent
        self.forces = collections.defaultdict(list)    # name: its FORCEUNLOCK requests
        self.quiet = []                 # names of the pairs (a_pair), one each
        self.faults = []                # (kind, t0, t1)
        self.blocked_until = 0.0        # Redis paused or stopped until (our commands wait)
        self.stopped = False
        self.scheduled = []             # (t, fn)
        self.storm = False
        self.phase_end = 0.0
        self.next_sample = self.next_info = self.next_holds = 0.0
        self.counts = collections.Counter()
        self.verbs = collections.Counter()
        self.no = set(args.no or ())
        self.due = {}
        self.walk_s = 0.0
        self.forcer_d = None            # the daemon of the latest FORCEUNLOCK
        self.forced_holders = {}        # name: the clients that held it then and have not
                                        # seen their hold end yet
        self.waits = []                 # (client, its head request) of the waits now
        self.crashed = False            # a daemon died or a sanitizer spoke
        self.cleaned = False

    # ---- reporting --------------------------------------------------------------

    def now(self):
        return time.monotonic() - self.t0

    def log(self, text):
        self.walklog.write("%d %.3f %s\n" % (self.step, self.now(), text))

    def say(self, text):
        if not self.args.quiet:
            print(text, flush=True)

    def fail(self, what, detail="", fatal=False):
        """A check failed: said with the seed and the step. The walk stops
        there, unless --keep-going and the daemons still run (not fatal)."""
        sig = what
        if any(f[0] == sig for f in self.failures):
            if fatal:
                raise Failed(what)
            return
        self.failures.append((sig, detail, self.step, self.now()))
        self.log("FAIL %s: %s" % (what, detail))
        print("FAIL %s\n    %s\n    seed %d, mode %s, profile %s, step %d, %.1f s into the walk"
              % (what, detail.replace("\n", "\n    "), self.seed, self.mode, self.profile_name,
                 self.step, self.now()), flush=True)
        if fatal or not self.args.keep_going:
            raise Failed(what)

    # ---- processes ----------------------------------------------------------------

    def start(self):
        self.redis = Quorum(self.tmp, n=1, spawn=self.spawner)
        self.redis.start()
        self.rport = self.redis.port(0)
        self.px = FaultProxy(self.rng.randrange(1 << 30))
        if self.mode == "hostile":
            self.mangler = Mangler(random.Random(self.rng.randrange(1 << 30)),
                                   rate=self.args.mangle_rate,
                                   kinds=self.args.mangle_kinds or mangle.KINDS)
        for i in range(self.args.daemons):
            d = Daemon(i, self.tmp)
            d.link = self.px.link(("127.0.0.1", self.rport),
                                  mangle=self.mangler.pipe if (self.mangler and i == 0)
                                  else None)
            d.conf = {k: self.rng.choice(v) for k, v in self.knob("conf").items()}
            d.timeouts.append((0.0, d.conf["command_timeout_ms"]))
            d.judge_conf()
            self.write_conf(d)
            env = dict(os.environ, ASAN_OPTIONS=ASAN_OPTIONS, UBSAN_OPTIONS=UBSAN_OPTIONS)
            d.proc = self.spawner([self.args.dlockd, "-c", d.conf_path], d.logname, env)
            self.daemons.append(d)
        for d in self.daemons:
            self.wait_up(d)
        self.rc_call("PING")
        for d in self.daemons:
            self.say("dlockd %d: %s" % (d.i, " ".join("%s=%s" % kv
                                                       for kv in sorted(d.conf.items()))))
        self.read_registry()
        # the semaphores' sizes, once
        c = self.open_client(0)
        for n, size in sorted(SEMS.items()):
            self.send(c, Req("SEMINIT", "SEMINIT %s %d" % (n, size), [n], REDIS))
        deadline = time.monotonic() + START_S
        while c.pending and not c.closed and time.monotonic() < deadline:
            self.pump(10)
        if c.pending or c.closed:
            raise RuntimeError("SEMINIT unanswered at the start")
        self.close_client(c, "setup")

    def write_conf(self, d):
        c = d.conf
        text = ("[server]\nsocket = %s\nadmin_uids = 0\nlog_level = info\nmax_clients = 1000\n"
                "max_output = %d\nmax_clients_per_uid = %d\nmax_locks_per_uid = %d\n"
                "max_waiters_per_uid = %d\nmax_observes_per_client = %d\n"
                "[redis]\nurl = redis://127.0.0.1:%d\ncommand_timeout_ms = %d\n"
                "connect_timeout_ms = %d\nkey_prefix = %s\n"
                "[lock]\nlease_ms = %d\nmax_locks_per_client = %d\nmax_waiters = 1000\n"
                % (d.sock, c["max_output"], c["max_clients_per_uid"], c["max_locks_per_uid"],
                   c["max_waiters_per_uid"], c["max_observes_per_client"], d.link.port,
                   c["command_timeout_ms"], CONNECT_TIMEOUT_MS, KEY_PREFIX, c["lease_ms"],
                   c["max_locks_per_client"]))
        tmp = d.conf_path + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, d.conf_path)

    def wait_up(self, d):
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            self.scan_log(d)
            if d.proc.poll() is not None:
                raise RuntimeError("dlockd %d exited (rc %s) at start; see %s"
                                   % (d.i, d.proc.poll(), d.log))
            try:
                if d.probe is None:
                    d.probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    d.probe.settimeout(PROBE_TIMEOUT_S)
                    d.probe.connect(d.sock)
                if self.probe_info(d).get("redis") == "up":
                    return
            except OSError:
                if d.probe is not None:
                    d.probe.close()
                d.probe = None
            time.sleep(0.05)
        raise RuntimeError("dlockd %d: not up within %.0f s; see %s" % (d.i, START_S, d.log))

    def probe_info(self, d):
        d.probe.sendall(b"INFO\n")
        while True:
            i = d.probe_buf.find(b"\n")
            if i >= 0:
                line, d.probe_buf = d.probe_buf[:i], d.probe_buf[i + 1:]
                break
            try:
                data = d.probe.recv(65536)
            except socket.timeout:
                self.fail("dlockd %d answers INFO" % d.i,
                          "no answer to INFO within %.0f s: its loop is stuck" % PROBE_TIMEOUT_S,
                          fatal=True)
            if not data:
                raise OSError("dlockd %d closed the probe" % d.i)
            d.probe_buf += data
        text = line.decode("utf-8", "replace")
        if not text.startswith("OK "):
            self.fail("INFO is answered OK", "dlockd %d: %r" % (d.i, text))
        d.info = dict(kv.split("=", 1) for kv in text.split()[1:] if "=" in kv)
        d.up = d.info.get("redis") == "up"
        return d.info

    def read_registry(self):
        """Which uuid is which daemon: the registry names each by its pid."""
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            reg = self.rc_call("HGETALL", KEY_PREFIX + "dlockd daemons") or []
            for uuid, entry in zip(reg[::2], reg[1::2]):
                pid = entry.rsplit(":", 1)[-1]
                for d in self.daemons:
                    if pid == str(d.proc.pid):
                        d.uuid = uuid
            if all(d.uuid for d in self.daemons):
                return
            time.sleep(0.05)
        raise RuntimeError("the daemons are not in the registry")

    def scan_log(self, d):
        try:
            with open(d.log, "rb") as f:
                f.seek(d.log_pos)
                data = f.read()
        except OSError:
            return
        if not data:
            return
        d.log_pos += len(data)
        text = (d.log_tail + data).decode("utf-8", "replace")
        nl = text.rfind("\n")
        d.log_tail = (text[nl + 1:] if nl >= 0 else text).encode()
        text = text[:nl + 1] if nl >= 0 else ""
        d.reloads_seen += text.count("reloaded")
        if "reload failed" in text:
            raise RuntimeError("dlockd %d refused a reloaded configuration: %s"
                               % (d.i, text[text.find("reload failed"):][:300]))
        m = SANITIZER.search(text)
        if m:
            self.crashed = True
            self.fail("no sanitizer report", "dlockd %d: %s" % (d.i, self.report_of(d)),
                      fatal=True)

    def report_of(self, d):
        """The sanitizer report in d's log: its first lines and frames."""
        try:
            d.proc.wait(REPORT_WAIT_S)  # the rest of the report: it exits after it
        except Exception:
            pass
        with open(d.log, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        m = SANITIZER.search(text)
        if not m:
            return text[-1500:]
        start = text.rfind("\n", 0, m.start()) + 1
        lines = text[start:].splitlines()
        keep = [l for l in lines[:60] if l.strip().startswith("#") or "ERROR" in l or
                "runtime error" in l or "SUMMARY" in l or "freed by" in l or
                "previously allocated" in l or "READ of" in l or "WRITE of" in l]
        return "\n".join(keep[:40])

    def check_daemons(self):
        for d in self.daemons:
            if d.proc.poll() is not None:
                self.crashed = True
                self.scan_log(d)
                self.fail("dlockd %d runs" % d.i, "it exited with rc %s: %s"
                          % (d.proc.poll(), self.report_of(d)), fatal=True)

    # ---- Redis ----------------------------------------------------------------

    def rc_call(self, *args, timeout=1.0):
        for attempt in range(2):
            try:
                if self.rc is None:
                    self.rc = redisproc.Resp(self.rport, timeout=timeout)
                self.rc.sock.settimeout(timeout)
                return self.rc.call(*args)
            except (OSError, redisproc.RespError):
                if self.rc is not None:
                    self.rc.close()
                self.rc = None
                if attempt:
                    raise
        return None

    def rc_pipe(self, cmds, timeout=1.0):
        try:
            if self.rc is None:
                self.rc = redisproc.Resp(self.rport, timeout=timeout)
            self.rc.sock.settimeout(timeout)
            for c in cmds:
                self.rc.send(*c)
            return [self.rc.read() for _ in cmds]
        except OSError:
            if self.rc is not None:
                self.rc.close()
            self.rc = None
            return None

    def redis_ok(self):
        return time.monotonic() >= self.blocked_until and not self.stopped

    # ---- clients --------------------------------------------------------------

    def open_client(self, d):
        self.next_cid += 1
        c = Client(self.next_cid, d)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        s.settimeout(SEND_TIMEOUT_S)
        try:
            s.connect(self.daemons[d].sock)
        except OSError as e:
            s.close()
            self.check_daemons()        # one gone is the failure, with its report
            path = self.daemons[d].sock
            gone = ("; the run's directory %s is gone: removed from outside the run" % self.tmp
                    if not os.path.isdir(self.tmp) else
                    "; its socket %s is gone" % path if not os.path.exists(path) else "")
            self.fail("dlockd %d accepts" % d, "connect: %s%s" % (e, gone), fatal=True)
        s.setblocking(False)
        c.sock = s
        c.fd = s.fileno()
        self.by_fd[c.fd] = c
        self.poller.register(c.fd, select.POLLIN)
        self.clients[c.cid] = c
        self.log("%s open on d%d" % (c.proc, d))
        return c

    def send(self, c, req):
        self.send_many(c, [req])
        return req

    def send_many(self, c, reqs):
        """reqs, pipelined: each waits behind the one before it."""
        now = time.monotonic()
        for r in reqs:
            r.t_sent = now
            if r.kind in (WAIT, TWAIT) and self.rng.random() >= self.knob("patient_p"):
                r.patience = self.rng.expovariate(1.0 / PATIENCE_S)
            if r.verb == "RELEASE" and c.recorded and r.names[0] in c.held:
                # a semaphore's release counts from its sending, for the
                # checker (which takes records in their order): a grant
                # answered after it may have come from its permits
                self.hist["sem"].record(proc=c.proc, name=r.names[0], op="release", t0=now,
                                        t1=now, permits=r.permits, res="sent")
            if not c.pending:
                r.t_head = now
            r.held_before = tuple(c.held)
            c.pending.append(r)
            self.verbs[r.verb] += 1
            c.quit = c.quit or r.verb == "QUIT"
        self.log("%s > %s" % (c.proc, reqs[0].line if len(reqs) == 1 else
                              "%d lines: %s ..." % (len(reqs), reqs[0].line)))
        self.write(c, b"".join(r.line.encode() + b"\n" for r in reqs))

    def write(self, c, data):
        """All of data to c's socket (non-blocking: it waits for room at
        most SEND_TIMEOUT_S, as dlockd may rightly stop reading a client
        whose request waits)."""
        deadline = time.monotonic() + SEND_TIMEOUT_S
        while data and not c.closed:
            try:
                n = c.sock.send(data)
                data = data[n:]
                continue
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                self.gone(c, "send: %s" % e)
                return
            left = deadline - time.monotonic()
            if left <= 0:
                self.counts["sends given up (dlockd not reading)"] += 1
                self.gone(c, "send: no room for %.0f s" % SEND_TIMEOUT_S)
                return
            p = select.poll()
            p.register(c.fd, select.POLLOUT)
            p.poll(min(left, 0.1) * 1000)


    def close_client(self, c, why, how="close"):
        if c.closed:
            return
        if how == "half":
            try:
                c.sock.shutdown(socket.SHUT_WR)
                c.half = True
                self.log("%s half-closed (%s)" % (c.proc, why))
                return
            except OSError:
                pass
        self.read_client(c, time.monotonic())
        self.gone(c, why)

    def gone(self, c, why):
        """c's connection is over (closed by us or by the daemon): what it
        held ends at an unknown moment, what it asked for may or may not
        have been granted."""
        if c.closed:
            return
        t = time.monotonic()
        c.closed = True
        self.log("%s gone: %s" % (c.proc, why))
        try:
            self.poller.unregister(c.fd)
        except (KeyError, ValueError):
            pass
        self.by_fd.pop(c.fd, None)
        try:
            c.sock.close()
        except OSError:
            pass
        for name in list(c.held):
            self.end_hold(c, name, "closed", t, why)
        for r in c.pending:
            if c.recorded and r.verb in ("LOCK", "TRYLOCK", "FAIRLOCK", "TRYFAIRLOCK",
                                         "MLOCK", "TRYMLOCK", "ELECT"):
                for n in r.names:     # indeterminate: granted or not, none can tell
                    pool = pool_of(n)
                    if n not in r.held_before and pool in ("mutex", "rw"):
                        self.hist[pool].record(proc=c.proc, name=n, op="lock" if pool == "mutex"
                                               else "wlock", t0=r.t_sent, t1=t, res="info")
            if r.verb == "FORCEUNLOCK":
                self.force_over(c, r, t, "gone")
        c.pending.clear()
        del self.clients[c.cid]

    # ---- histories --------------------------------------------------------------

    def begin_hold(self, c, name, kind, fence, req, t, count=1, permits=0):
        c.held[name] = dict(kind=kind, count=count, fence=fence, lease=req.lease,
                            permits=permits, t=t)
        if kind == "m" and req.lease and self.rng.random() < EDGE_P:
            # at its lease's end, re-enter it: the grant and the lease's
            # end cross (its script in flight when the local timer fires)
            edge = req.t_sent + req.lease / 1000.0 - self.rng.uniform(0, EDGE_S)
            self.at(edge, lambda: self.react(c, name, "lease edge"))
        self.grants[name] = t
        pool = pool_of(name)
        if kind != native_kind(name) and not (kind == "w" and name in RW):
            # another kind's release wakes no waiter of the name's own kind:
            # they go when its lease would have ended (PROTOCOL.md)
            self.taint[name] = t + self.lease_s() + HANG_S
        # A FORCEUNLOCK of the name that crossed this grant may have run in
        # Redis after it and removed it, unseen by its daemon if another
        # until its next renewal (forced_now ends only the holds known when
        # it is sent): the mutexes' and read/write locks' checkers excuse an
        # overlap that such a force lies between (excuse_forced); a
        # semaphore's grant counts for nothing (its permits may have been
        # given back before a later grant came: a semaphore has no fences)
        crossed = self.forced_in_flight(name, req, t)
        if crossed:
            self.counts["grants crossed by a FORCEUNLOCK (%s)" % pool] += 1
            self.forced_holders.setdefault(name, set()).add(c.cid)
        if not c.recorded:
            return
        if pool == "mutex":
            self.hist["mutex"].record(proc=c.proc, name=name, op="lock", t0=req.t_sent, t1=t,
                                      res="ok", fence=fence)
        elif pool == "rw":
            self.hist["rw"].record(proc=c.proc, name=name, op="rlock" if kind == "r" else "wlock",
                                   t0=req.t_sent, t1=t, res="ok", fence=fence)
        elif pool == "sem" and kind == "s":
            self.hist["sem"].record(proc=c.proc, name=name, op="acquire", t0=req.t_sent, t1=t,
                                    res="info" if crossed else "ok", permits=req.permits,
                                    lease=req.lease, wlease=self.lease_ms_max())

    def forced_in_flight(self, name, req, t):
        """A FORCEUNLOCK of name may have removed req's grant, answered at t."""
        return forced_between(self.forces.get(name, ()), req.t_sent, t) is not None

    def excuse_forced(self, name, a, b):
        """The mutexes' and read/write locks' checkers: two holders at once
        are no fault when a FORCEUNLOCK of the name may have run between
        the first grant and the second, removing the first unseen by its
        daemon (it hears at its next renewal: PROTOCOL.md's FORCEUNLOCK)."""
        x, y = sorted((a, b), key=grant_order)
        f = forced_between(self.forces.get(name, ()), x["i0"], y["c0"])
        return "FORCEUNLOCK sent at %.3f" % f.t_sent if f is not None else None

    def end_hold(self, c, name, how, t, detail="", t_sent=None):
        """c's hold of name ends: how is "unlock" (t_sent: the release's
        sending), "lost" (t: the event's arrival) or "closed"."""
        h = c.held.pop(name, None)
        if h is not None and detail != "forced" and c.cid in self.forced_holders.get(name, ()):
            # its daemon knows: waiters behind it there may go
            self.forced_holders[name].discard(c.cid)
            if not self.forced_holders[name]:
                self.forced[name] = t
        if h is not None and h["kind"] != native_kind(name) and \
                not (h["kind"] == "w" and name in RW):
            self.taint[name] = max(self.taint[name], t + self.lease_s() + HANG_S)
        if h is None or not c.recorded:
            return
        pool = pool_of(name)
        if pool is None:
            return
        if how == "unlock":
            op = {"r": "runlock", "w": "wunlock"}.get(h["kind"], "unlock")
            if pool == "rw" and op == "unlock":
                op = "wunlock"
            if pool == "sem":
                pass                    # recorded as it was sent (send())
            else:
                self.hist[pool].record(proc=c.proc, name=name, op=op, t0=t_sent, t1=t, res="OK")
        else:
            self.hist[pool].record(proc=c.proc, name=name, op=how, t0=t, t1=t, res=detail)

    # ---- reading ----------------------------------------------------------------

    def pump(self, timeout_ms):
        """Reads every readable client once."""
        try:
            evs = self.poller.poll(timeout_ms)
        except InterruptedError:
            return
        t = time.monotonic()
        for fd, ev in evs:
            c = self.by_fd.get(fd)
            if c is None or c.closed:
                continue
            if c.slow is not None and c.slow["phase"] != "drain":
                if ev & (select.POLLHUP | select.POLLERR):
                    self.slow_closed(c, t)
                continue
            self.read_client(c, t)

    def read_client(self, c, t):
        while not c.closed:
            try:
                data = c.sock.recv(262144)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.gone(c, "read: %s" % e)
                return
            if not data:
                self.eof(c)
                return
            c.buf += data
            while True:
                i = c.buf.find(b"\n")
                if i < 0:
                    break
                line, c.buf = c.buf[:i].decode("utf-8", "replace"), c.buf[i + 1:]
                self.on_line(c, line, t)
                if c.closed:
                    return

    def eof(self, c):
        # dlockd closes a connection past max_output (a slow reader's), after
        # QUIT, after its half-close was answered, or refusing it at a limit
        if not (c.slow is not None or c.half or c.quit):
            try:                        # or it is dying: that is the failure
                self.daemons[c.d].proc.wait(DYING_S)
            except Exception:
                pass
            self.check_daemons()
            first = c.pending[0] if c.pending else None
            self.fail("a connection is closed only for a reason",
                      "%s on d%d: closed by dlockd with %d requests unanswered%s"
                      % (c.proc, c.d, len(c.pending), ", the first %r sent %.3f s ago"
                         % (first.line, time.monotonic() - first.t_sent) if first else ""))
        self.gone(c, "closed by dlockd")

    def on_line(self, c, line, t):
        first, c.first = c.first, False
        if line.startswith("!"):
            self.on_event(c, line, t)
            return
        if line.startswith("="):
            if c.list_left <= 0:
                self.fail("a LIST's lines are counted", "%s: an entry line beyond the count: %r"
                          % (c.proc, line))
            c.list_left -= 1
            return
        if c.list_left:
            self.fail("a LIST's lines are counted", "%s: %r with %d entry lines to come"
                      % (c.proc, line, c.list_left))
        if first and line.startswith("ERR LIMIT max_clients"):
            self.counts["refused at connect"] += 1
            c.pending.clear()
            self.gone(c, "refused: " + line)
            return
        if not c.pending:
            self.fail("every reply answers a request", "%s: %r with nothing asked"
                      % (c.proc, line))
        req = c.pending.popleft()
        if c.pending and c.pending[0].t_head is None:
            c.pending[0].t_head = t
        self.log("%s < %s" % (c.proc, line[:200]))
        if not (line.startswith("OK") or line.startswith("ERR ") or
                line.startswith("TIMEOUT ")):
            self.fail("replies are OK, ERR or TIMEOUT", "%s: %r to %r" % (c.proc, line, req.line))
        try:
            self.on_reply(c, req, line, t)
        except (ValueError, IndexError) as e:
            self.fail("replies are well formed", "%s: %r to %r (%s)" % (c.proc, line, req.line, e))

    def on_event(self, c, line, t):
        w = line.split()
        self.log("%s < %s" % (c.proc, line[:200]))
        if w[0] == "!LOST" and len(w) == 3:
            self.counts["!LOST " + w[2]] += 1
            if w[1] in c.held:
                self.end_hold(c, w[1], "lost", t, w[2])
        elif w[0] == "!LEADER" and len(w) in (3, 4):
            self.counts["!LEADER"] += 1
            name = w[1]
            if name not in c.observing:
                if not any(r.verb in ("OBSERVE", "UNOBSERVE") and r.names == [name]
                           for r in c.pending):
                    self.fail("no !LEADER of a name not observed",
                              "%s: %r after its UNOBSERVE was answered (or never observed)"
                              % (c.proc, line))
                return
            if c.recorded:
                fence = 0 if w[2] == "NONE" else int(w[2])
                self.hist["elect"].record(proc=c.proc, name=name, op="observe", t0=t, t1=t,
                                          fence=fence, res=line)
        else:
            self.fail("events are !LOST or !LEADER", "%s: %r" % (c.proc, line))

    def on_reply(self, c, req, line, t):
        w = line.split()
        v = req.verb
        ok = w[0] == "OK"
        if w[0] == "ERR":
            self.counts["ERR " + (w[1] if len(w) > 1 else "?") +
                        (" " + w[2] if len(w) > 2 and w[1] == "LIMIT" else "")] += 1
        if v in ("LOCK", "TRYLOCK", "FAIRLOCK", "TRYFAIRLOCK", "RLOCK", "WLOCK", "TRYRLOCK",
                 "TRYWLOCK") and ok:
            name = req.names[0]
            fence, holds = int(w[1]), int(w[2])
            kind = {"LOCK": "m", "TRYLOCK": "m", "FAIRLOCK": "f", "TRYFAIRLOCK": "f",
                    "RLOCK": "r", "TRYRLOCK": "r", "WLOCK": "w", "TRYWLOCK": "w"}[v]
            if name in c.held and holds > 1:
                c.held[name]["count"] = holds
            else:
                if name in c.held:      # a hold ended unseen: a reentry took it anew
                    self.end_hold(c, name, "closed", t, "taken anew")
                self.begin_hold(c, name, kind, fence, req, t, holds)
        elif v in ("ACQUIRE", "TRYACQUIRE") and ok:
            name = req.names[0]
            held = int(w[1])
            if name in c.held:
                c.held[name]["permits"] = held
                if c.recorded:
                    self.hist["sem"].record(proc=c.proc, name=name, op="acquire",
                                            t0=req.t_sent, t1=t, res="ok",
                                            permits=req.permits, lease=req.lease,
                                            wlease=self.lease_ms_max())
                self.grants[name] = t
            else:
                self.begin_hold(c, name, "s", 0, req, t, permits=held)
        elif v == "RELEASE" and ok:
            name = req.names[0]
            left = int(w[1])
            if name in c.held:
                if left == 0:
                    self.end_hold(c, name, "unlock", t, t_sent=req.t_sent)
                else:
                    c.held[name]["permits"] = left
        elif v in ("UNLOCK", "RUNLOCK", "WUNLOCK") and ok:
            name = req.names[0]
            left = int(w[1])
            if name in c.held:
                if left == 0:
                    self.end_hold(c, name, "unlock", t, t_sent=req.t_sent)
                else:
                    c.held[name]["count"] = left
        elif v in ("UNLOCK", "RUNLOCK", "WUNLOCK", "RENEW", "RELEASE") and \
                line.startswith("ERR NOTHELD") and not re.search(r"holds [1-9]", line):
            name = req.names[0]
            if name in c.held and name in req.held_before:
                self.fail("no hold ends without !LOST",
                          "%s on d%d: %r answered %r while it held %s (%s), no !LOST came"
                          % (c.proc, c.d, req.line, line, name, c.held[name]))
                self.end_hold(c, name, "closed", t, "gone unseen")
        elif v in ("MLOCK", "TRYMLOCK") and ok:
            fences = [int(x) for x in w[1:]]
            if len(fences) != len(req.names):
                raise ValueError("%d fences for %d names" % (len(fences), len(req.names)))
            for n, f in zip(req.names, fences):
                if n in c.held and c.held[n]["kind"] == "m":
                    c.held[n]["count"] += 1
                else:
                    self.begin_hold(c, n, "m", f, req, t)
        elif v == "MUNLOCK" and ok:
            lefts = [int(x) for x in w[1:]]
            for n, left in zip(req.names, lefts):
                if n in c.held:
                    if left == 0:
                        self.end_hold(c, n, "unlock", t, t_sent=req.t_sent)
                    else:
                        c.held[n]["count"] = left
        elif v == "FORCEUNLOCK" and ok and w[1] == "1":
            self.force_over(c, req, t, line)
            self.react_forced(req.names[0])
        elif v == "FORCEUNLOCK":
            self.force_over(c, req, t, line)
        elif v == "ELECT" and ok:
            name = req.names[0]
            if name not in c.held:
                self.begin_hold(c, name, "e", int(w[1]), req, t)
        elif v == "RESIGN" and ok:
            name = req.names[0]
            if w[1] == "1" and name in c.held:
                self.end_hold(c, name, "unlock", t, t_sent=req.t_sent)
        elif v == "OBSERVE" and ok:
            name = req.names[0]
            fence = 0 if w[1] == "NONE" else int(w[1])
            if name not in c.observing:
                c.observing.add(name)
                if c.recorded:
                    self.hist["elect"].record(proc=c.proc, name=name, op="observe", t0=t, t1=t,
                                              fence=fence, res=line)
            elif fence == 0 and c.recorded:
                self.hist["elect"].record(proc=c.proc, name=name, op="observe", t0=t, t1=t,
                                          fence=0, res=line)
        elif v == "UNOBSERVE" and ok:
            name = req.names[0]
            c.observing.discard(name)
            if c.recorded:
                self.hist["elect"].record(proc=c.proc, name=name, op="observe", t0=t, t1=t,
                                          fence=-1, res="unobserved")
        elif v == "LIST" and ok:
            if w[1] != "LIST" or len(w) != 4:
                raise ValueError("not a LIST header")
            c.list_left = int(w[2])
        elif v == "QUIT" and ok:
            pass
        elif v == "CLIENTS" and ok:
            m = re.match(r"OK clients=(\d+) shown=(\d+)", line)
            if not m or len(w) - 3 != int(m.group(2)):
                raise ValueError("CLIENTS' count")

    # ---- the walk's actions ------------------------------------------------------------

    def forced_s(self):
        """How long a FORCEUNLOCK may go unseen by the holder's daemon (and
        so by the waiters behind its holder there, which have no watch): a
        watchdog hold's next renewal, or a leased hold's lease."""
        return max(self.lease_s() / 3.0, max(LEASES_MS) / 1000.0) + 1.0

    def knob(self, name):
        return self.profile.get(name, KNOBS[name])

    def lease_s(self):
        return max(d.conf["lease_ms"] for d in self.daemons) / 1000.0

    def lease_ms_max(self):
        return max(d.conf["lease_ms"] for d in self.daemons)

    def pick_client(self, pred):
        cs = [c for c in self.clients.values() if pred(c)]
        return self.rng.choice(cs) if cs else None

    def lease_words(self):
        if self.rng.random() < LEASE_P:
            ms = self.rng.choice(LEASES_MS)
            return " %d" % ms, ms
        return "", 0

    def gen(self, c):
        """A request for idle client c, by the verbs' weights (a verb that
        does not fit c's state gives None: another draw)."""
        r = self.rng
        queued = self.knob("storm_queued") if self.storm else 1  # they meet the faults
        opts = [(10, self.g_lock), (6, self.g_trylock), (7, self.g_rw), (6 * queued, self.g_fair),
                (5, self.g_acquire), (6, self.g_mlock), (5 * queued, self.g_elect),
                (4, self.g_observe),
                (3, self.g_leader), (3, self.g_read), (1, self.g_list), (1, self.g_info),
                (1.5, self.g_clients), (self.knob("force_w"), self.g_force), (1, self.g_bad), (0.5, self.g_seminit),
                (0.3, self.g_quit)]
        if c.held:
            opts += [(15 + 10 * len(c.held), self.g_release), (3, self.g_renew)]
        if c.observing:
            opts.append((2, self.g_unobserve))
        total = sum(w for w, _ in opts)
        for _ in range(8):
            x = r.uniform(0, total)
            for w, g in opts:
                x -= w
                if x <= 0:
                    break
            req = g(c)
            if req is not None and req.verb not in self.no:
                return req
        return Req("PING", "PING", kind=LOCAL)

    def reentry(self, c, n):
        """A request of a name c holds is answered at once (REDIS), unless
        the hold may have ended unseen (a lease, a FORCEUNLOCK, a fault
        since its grant): it may then wait like any (WAIT)."""
        h = c.held.get(n)
        if h is None or h["lease"] or self.forced.get(n, 0) >= h["t"] or \
                self.quiet_since() >= h["t"] - 1.0 or self.storm:
            return WAIT
        return REDIS

    def pick_plain(self, c):
        if c.d == 0 and self.rng.random() < self.knob("local_p"):
            return self.rng.choice(LOCAL_PLAIN)
        return self.rng.choice(PLAIN)

    def plain(self, c):
        """The plain names c may take."""
        return PLAIN + LOCAL_PLAIN if c.d == 0 else PLAIN

    def g_lock(self, c):
        n = self.pick_plain(c)
        lw, ms = self.lease_words()
        kind = self.reentry(c, n)
        return Req("LOCK", "LOCK %s%s" % (n, lw), [n], kind, lease=ms)

    def g_trylock(self, c):
        r = self.rng
        if r.random() < CROSS_KIND_P:
            n = r.choice(FAIR + ELECT + RW)
            if n in c.held:
                return None
            return Req("TRYLOCK", "TRYLOCK %s 0" % n, [n], REDIS)
        n = self.pick_plain(c)
        wait = r.choice(TRY_WAITS_MS)
        lw, ms = self.lease_words()
        words = "TRYLOCK %s" % n
        if wait or lw or r.random() < 0.5:
            words += " %d%s" % (wait, lw)
        return Req("TRYLOCK", words, [n], TWAIT if wait else REDIS,
                   wait_ms=wait, lease=ms)

    def g_rw(self, c):
        r = self.rng
        n = r.choice(RW)
        h = c.held.get(n)
        if h is not None and h["kind"] not in ("r", "w"):
            return None
        write = r.random() < 0.45
        if h is not None and h["kind"] == "r" and write:
            if r.random() < 0.8:
                return None             # an upgrade: ERR KIND, now and then
        if h is not None and h["kind"] == "w" and not write:
            return None                 # a downgrade: two holds of two modes, not modelled
        lw, ms = self.lease_words()
        if r.random() < 0.4:
            wait = r.choice(TRY_WAITS_MS)
            verb = "TRYWLOCK" if write else "TRYRLOCK"
            return Req(verb, "%s %s %d%s" % (verb, n, wait, lw), [n],
                       TWAIT if wait else REDIS, wait_ms=wait, lease=ms)
        verb = "WLOCK" if write else "RLOCK"
        return Req(verb, "%s %s%s" % (verb, n, lw), [n], self.reentry(c, n),
                   lease=ms)

    def g_fair(self, c):
        r = self.rng
        n = r.choice(FAIR)
        if r.random() < CROSS_KIND_P:
            n = r.choice(PLAIN + ELECT)
            if n in c.held:
                return None
            return Req("TRYFAIRLOCK", "TRYFAIRLOCK %s 0" % n, [n], REDIS)
        h = c.held.get(n)
        if h is not None and h["kind"] != "f":
            return None
        lw, ms = self.lease_words()
        if r.random() < 0.35:
            wait = r.choice(TRY_WAITS_MS)
            return Req("TRYFAIRLOCK", "TRYFAIRLOCK %s %d%s" % (n, wait, lw), [n],
                       TWAIT if wait else REDIS, wait_ms=wait, lease=ms)
        return Req("FAIRLOCK", "FAIRLOCK %s%s" % (n, lw), [n], self.reentry(c, n), lease=ms)

    def g_acquire(self, c):
        r = self.rng
        n = r.choice(sorted(SEMS))
        size = SEMS[n]
        h = c.held.get(n)
        mine = h["permits"] if h else 0
        lw, ms = self.lease_words()
        if r.random() < 0.4:
            k = r.randint(1, size + 1)
            wait = r.choice(TRY_WAITS_MS)
            return Req("TRYACQUIRE", "TRYACQUIRE %s %d %d%s" % (n, k, wait, lw), [n],
                       TWAIT if wait else REDIS, wait_ms=wait, lease=ms, permits=k)
        if mine >= size:
            return None
        k = r.randint(1, size - mine)
        return Req("ACQUIRE", "ACQUIRE %s %d%s" % (n, k, lw), [n], WAIT, lease=ms, permits=k)

    def g_mlock(self, c):
        r = self.rng
        mine = [n for n, h in c.held.items() if h["kind"] == "m" and n in self.plain(c)]
        names = [n for n in mine if r.random() < 0.6]
        k = r.choice((1, 2, 2, 3, 3, 4))
        others = [n for n in self.plain(c) if n not in names]
        r.shuffle(others)
        names += others[:max(0, k - len(names))]
        r.shuffle(names)
        if not names:
            return None
        if any(n in mine and self.forced.get(n, 0) > c.held[n]["t"] for n in names):
            self.counts["MLOCK re-entering a forced name"] += 1
        lw, ms = self.lease_words()
        if r.random() < 0.35:
            wait = r.choice(TRY_WAITS_MS)
            return Req("TRYMLOCK", "TRYMLOCK %d %s %d%s" % (len(names), " ".join(names), wait,
                                                          lw), names,
                       TWAIT if wait else REDIS, wait_ms=wait, lease=ms)
        return Req("MLOCK", "MLOCK %d %s%s" % (len(names), " ".join(names), lw), names,
                   WAIT, lease=ms)

    def g_elect(self, c):
        r = self.rng
        n = r.choice(ELECT)
        h = c.held.get(n)
        if h is not None and h["kind"] != "e":
            return None
        lw, ms = ("", 0) if r.random() < 0.8 else self.lease_words()
        return Req("ELECT", "ELECT %s v%d.%d%s" % (n, c.cid, r.randrange(100), lw), [n],
                   self.reentry(c, n), lease=ms)

    def g_observe(self, c):
        r = self.rng
        n = c.private if r.random() < 0.2 else r.choice(ELECT)
        return Req("OBSERVE", "OBSERVE %s" % n, [n], REDIS)

    def g_unobserve(self, c):
        n = self.rng.choice(sorted(c.observing))
        return Req("UNOBSERVE", "UNOBSERVE %s" % n, [n], LOCAL)

    def g_leader(self, c):
        r = self.rng
        n = r.choice(sorted(c.observing)) if c.observing and r.random() < 0.6 else \
            r.choice(ELECT)
        return Req("LEADER", "LEADER %s" % n, [n], REDIS)

    def g_read(self, c):
        r = self.rng
        n = r.choice(ALL_NAMES)
        verb = r.choice(("STATUS", "STATUS", "WHO"))
        return Req(verb, "%s %s" % (verb, n), [n], REDIS)

    def g_list(self, c):
        r = self.rng
        pat = r.choice(("*", "p*", "f?", "[er]*", "*"))
        lim = r.choice(("", " 3", " 100"))
        return Req("LIST", "LIST %s%s" % (pat, lim) if pat != "*" or lim else "LIST",
                   kind=LISTING)

    def g_info(self, c):
        return Req("INFO", "INFO", kind=LOCAL)

    def g_clients(self, c):
        return Req("CLIENTS", "CLIENTS", kind=LOCAL)

    def g_seminit(self, c):
        n = self.rng.choice(sorted(SEMS))
        return Req("SEMINIT", "SEMINIT %s %d" % (n, SEMS[n]), [n], REDIS)

    def g_quit(self, c):
        return Req("QUIT", "QUIT", kind=LOCAL)

    def g_bad(self, c):
        r = self.rng
        line = r.choice(("LOCK", "MLOCK 2 p0 p0", "MLOCK 0", "TRYLOCK p0 -1", "ACQUIRE s0 0",
                         "ACQUIRE s0 10001", "FROB p0", "LOCK bad\x01name", "ELECT e0",
                         "UNLOCK", "RENEW p0 x", "LIST * 0", "SEMINIT s0", "MUNLOCK 1",
                         "OBSERVE", "CANCEL", "PING"))
        return Req("BAD" if line not in ("CANCEL", "PING") else line, line, kind=LOCAL)

    def g_force(self, c):
        """FORCEUNLOCK, mostly of a name a client of another daemon holds."""
        r = self.rng
        held = [(o, n) for o in self.clients.values() for n in o.held
                if o.d != c.d or len(self.daemons) == 1]
        plain = [(o, n) for o, n in held if o.held[n]["kind"] == "m" and
                 (o.idle() or o.waiting() and len(o.pending) == 1)]
        # most of all a plain hold with a waiter behind it on its daemon,
        # which waits for the local release (no watch in Redis)
        behind = [(o, n) for o, n in plain
                  if any(w.d == o.d and w.pending and n in w.pending[0].names
                         for w in self.clients.values() if w is not o)]
        # a hold its daemon keeps (no lease of its own to end it first)
        local = [(o, n) for o, n in behind if (n in LOCAL_PLAIN or n.startswith(QUIET_PREFIX))
                 and not o.held[n]["lease"]]
        x = r.random()
        n = (r.choice(local)[1] if local and x < self.knob("force_local_p") else
             r.choice(behind)[1] if behind and x < 0.6 else
             r.choice(plain)[1] if plain and x < 0.8 else
             r.choice(held)[1] if held and x < 0.9 else r.choice(ALL_NAMES))
        self.forced_now(n)
        self.forcer_d = c.d
        q = Req("FORCEUNLOCK", "FORCEUNLOCK %s" % n, [n], REDIS)
        q.ran_by = None                 # once over: it ran in Redis by then, if at all
        q.removed = True                # ... and may have removed a hold (not OK 0)
        self.forces[n].append(q)
        return q

    def force_over(self, c, q, t, line):
        """FORCEUNLOCK q is answered (line) or its client gone: by when it
        ran in Redis, if it did. Answered OK, before its answer; else
        (ERR BACKEND, its client gone) it may still be in Redis's input
        and run there once the fault ends, within command_timeout_ms."""
        if not hasattr(q, "ran_by") or q.ran_by is not None:
            return
        q.removed = not line.startswith("OK 0")
        q.ran_by = t if line.startswith("OK") else \
            max(t, self.quiet_since()) + self.timeout_s(self.daemons[c.d], q.t_sent) + SLACK_S

    def react_forced(self, n):
        """Its holders' view is stale now (another daemon's FORCEUNLOCK is
        heard at their next renewal): they act on it at once."""
        for o in list(self.clients.values()):
            if n in o.held and o.d != self.forcer_d:
                self.react(o, n, "forced")

    def react(self, c, n, why):
        """c, if idle and still holding n as it thinks, re-enters n: most
        often in an MLOCK with other names, else by LOCK, RENEW or UNLOCK."""
        if c.closed or n not in c.held or c.held[n]["kind"] != "m":
            return
        if c.slow is not None or c.half or len(c.pending) > 1 or \
                (c.pending and c.pending[0].kind not in (WAIT, TWAIT)):
            self.counts["re-entries skipped (busy)"] += 1
            return
        # behind a wait of its own, it is read once the wait ends
        r = self.rng
        x = 0.0 if n.startswith(QUIET_PREFIX) else r.random()
        self.counts["re-entries of a stale hold (%s)" % why] += 1
        self.step += 1
        if x < 0.6:
            # with names nobody holds or waits for: the set is tried at once,
            # while its daemon still counts n as held
            busy = {m for o in self.clients.values() for m in o.held}
            busy |= {m for o, q in self.waits for m in q.names}
            others = [p for p in self.plain(c) if p != n and p not in busy] or \
                [p for p in self.plain(c) if p != n]
            r.shuffle(others)
            if n.startswith(QUIET_PREFIX) or r.random() < 0.5:
                others.insert(0, n + "x")   # a name of its own: surely free
            names = [n] + others[:r.choice((1, 1, 2))]
            r.shuffle(names)
            lw, ms = self.lease_words()
            if any(o.d == c.d and o.pending and n in o.pending[0].names
                   for o in self.clients.values() if o is not c):
                self.counts["stale MLOCK with a waiter behind (%s)" % why] += 1
                self.log("stale MLOCK of %s with a waiter behind (%s)" % (n, why))
            self.send(c, Req("MLOCK", "MLOCK %d %s%s" % (len(names), " ".join(names), lw),
                             names, WAIT, lease=ms))
        elif x < 0.8:
            self.send(c, Req("LOCK", "LOCK %s" % n, [n], WAIT))
        elif x < 0.9:
            self.send(c, Req("RENEW", "RENEW %s" % n, [n], REDIS))
        else:
            self.send(c, Req("UNLOCK", "UNLOCK %s" % n, [n], LOCAL))

    def forced_now(self, n):
        """A FORCEUNLOCK of n is sent: its holders' sections end at an
        unknown moment (another daemon's holder hears of it only at its
        next renewal)."""
        t = time.monotonic()
        self.forced[n] = t
        self.forced_holders[n] = {o.cid for o in self.clients.values() if n in o.held}
        for o in self.clients.values():
            if n in o.held and o.recorded:
                h = o.held[n]
                self.end_hold(o, n, "closed", t, "forced")
                o.held[n] = h           # the client still thinks it holds it

    def g_renew(self, c):
        n = self.rng.choice(sorted(c.held))
        lw, ms = self.lease_words()
        return Req("RENEW", "RENEW %s%s" % (n, lw), [n], REDIS)

    def g_release(self, c):
        """The release that fits a held name's kind (MUNLOCK of a few)."""
        r = self.rng
        now = time.monotonic()
        names = [x for x in sorted(c.held) if c.keep.get(x, 0) < now]
        if not names:
            return None
        n = r.choice(names)
        h = c.held[n]
        k = h["kind"]
        if k == "m" and r.random() < 0.3:
            ms = [x for x, y in c.held.items() if y["kind"] == "m" and r.random() < 0.7] or [n]
            return Req("MUNLOCK", "MUNLOCK %d %s" % (len(ms), " ".join(ms)), ms, LOCAL)
        if k in ("m", "f"):
            return Req("UNLOCK", "UNLOCK %s" % n, [n], LOCAL)
        if k == "r":
            return Req("RUNLOCK", "RUNLOCK %s" % n, [n], LOCAL)
        if k == "w":
            return Req("WUNLOCK", "WUNLOCK %s" % n, [n], LOCAL)
        if k == "e":
            return Req("RESIGN", "RESIGN %s" % n, [n], LOCAL)
        p = r.randint(1, max(1, h["permits"]))
        return Req("RELEASE", "RELEASE %s %d" % (n, p), [n], LOCAL, permits=p)

    # ---- the step ----------------------------------------------------------------

    def act(self):
        """Each idle client whose think time is over sends its next request
        (now and then a pipeline of them); a waiter out of patience closes
        or cancels."""
        t = time.monotonic()
        for c in sorted(self.clients.values(), key=lambda c: c.cid):
            if c.cid not in self.clients:
                continue
            if c.waiting() and c.pending[0].patience is not None:
                q = c.pending[0]
                if q.t_head is not None and t - q.t_head > q.patience:
                    q.patience = None
                    self.step += 1
                    if self.rng.random() < 0.4 and len(c.pending) == 1 and not c.half:
                        self.counts["CANCEL behind a wait"] += 1
                        self.send(c, Req("CANCEL", "CANCEL", kind=LOCAL))
                    else:
                        self.counts["closed mid-wait"] += 1
                        self.close_client(c, "closed mid-wait", "half" if self.rng.random() < 0.1
                                          else "close")
                continue
            if not c.idle():
                continue
            if c.next_at is None:
                c.next_at = t + self.rng.expovariate(1.0 / THINK_S)
            if t < c.next_at:
                continue
            self.step += 1
            c.next_at = None
            if self.rng.random() < PIPELINE_P:
                self.a_pipeline(c)
            else:
                self.send(c, self.gen(c))

    def a_open(self):
        if len(self.clients) < CLIENTS_MAX:
            self.open_client(self.rng.randrange(len(self.daemons)))

    def a_close(self):
        c = self.pick_client(lambda c: not c.closed)
        if c is not None:
            r = self.rng.random()
            self.close_client(c, "closed by the walk", "half" if r < 0.15 else "close")

    def a_burst(self):
        """A few connections closed at once, CLIENTS sent at once on another."""
        r = self.rng
        d = r.randrange(len(self.daemons))
        asker = self.pick_client(lambda c: c.idle() and c.d == d)
        if asker is None:
            return
        fresh = [self.open_client(d) for _ in range(r.randint(0, 4))]
        for c in fresh:
            self.read_client(c, time.monotonic())     # accepted (or refused) by now?
        # the fresh ones are accepted once dlockd answered something: PING
        for c in fresh:
            if not c.closed:
                self.send(c, Req("PING", "PING", kind=LOCAL))
        deadline = time.monotonic() + 2.0
        while any(c.pending and not c.closed for c in fresh) and time.monotonic() < deadline:
            self.pump(5)
        others = [c for c in self.clients.values()
                  if c.d == d and c is not asker and not c.closed and c.slow is None and
                  c not in fresh and r.random() < 0.3]
        victims = [c for c in fresh if not c.closed] + others[:2]
        self.counts["bursts"] += 1
        self.log("burst on d%d: closing %s, CLIENTS on %s" % (
            d, " ".join(c.proc for c in victims), asker.proc))
        for c in victims:
            self.gone(c, "burst")
        self.send(asker, Req("CLIENTS", "CLIENTS", kind=LOCAL))

    def a_pair(self):
        """Two clients of daemon 0 on a name of their own, which nothing
        else of the walk takes: one holds it, the other waits for it as
        long as it takes. Only FORCEUNLOCK (and what the holder does next)
        reaches it from the rest of the walk: a wait whose name is quiet,
        so that one nothing wakes is seen (busy names heal it with their
        next arrival)."""
        if len(self.daemons) < 2 or len(self.clients) + 2 > CLIENTS_MAX + PAIR_EXTRA:
            return
        a, b = self.open_client(0), self.open_client(0)
        n = "%s%d" % (QUIET_PREFIX, len(self.quiet) + 1)
        self.quiet.append(n)
        self.counts["pairs on a quiet name"] += 1
        t = time.monotonic()
        a.keep[n] = t + PAIR_KEEP_S
        a.next_at = t + PAIR_KEEP_S     # a holds it, idle, for a while (or reacts)
        b.next_at = t + 3600.0          # b asks for nothing else meanwhile
        self.send(a, Req("LOCK", "LOCK %s" % n, [n], WAIT))

        def then():
            b.next_at = None
            if n in a.held and b.idle():
                q = Req("LOCK", "LOCK %s" % n, [n], WAIT)
                self.send(b, q)
                q.patience = None
            elif not a.closed and n not in a.held:
                self.at(time.monotonic() + PAIR_S, then)    # not granted yet
                b.next_at = time.monotonic() + 3600.0
        self.at(t + PAIR_S, then)

    def a_pipeline(self, c):
        reqs = []
        for _ in range(self.rng.randint(2, 5)):
            q = self.gen(c)
            if q.kind in (WAIT, TWAIT) or any(set(q.names) & set(x.names) for x in reqs):
                break
            reqs.append(q)
            if q.verb == "QUIT":
                break
        if reqs:
            self.send_many(c, reqs)

    # ---- slow readers ----------------------------------------------------------------

    def a_slow(self):
        c = self.pick_client(lambda c: c.idle())
        if c is None or "slow" in self.no:
            return
        if c.recorded:
            t = time.monotonic()
            for n in list(c.held):
                h = c.held[n]
                self.end_hold(c, n, "closed", t, "a slow reader now")
                c.held[n] = h
            c.recorded = False
        try:
            self.poller.modify(c.fd, 0)     # POLLHUP and POLLERR only
        except (KeyError, ValueError):
            pass
        self.counts["slow readers"] += 1
        r = self.rng
        tip = r.random()
        c.slow = dict(phase="fill" if r.random() < SLOW_FILL_P else "flood", filled=0, inq=-1,
                      flood=0, t=time.monotonic(),
                      tip=("private" if tip < 0.55 else "shared" if tip < 0.8 else "mixed"))
        self.log("%s: a slow reader (%s)" % (c.proc, c.slow["tip"]))
        # the flood's name: one only it observes, most often
        if c.slow["tip"] == "private":
            self.send(c, Req("OBSERVE", "OBSERVE %s" % c.private, [c.private], REDIS))
        elif c.slow["tip"] == "shared":
            n = r.choice(ELECT)
            self.send(c, Req("OBSERVE", "OBSERVE %s" % n, [n], REDIS))

    def service_slow(self, c):
        s = c.slow
        r = self.rng
        maxout = self.daemons[c.d].conf["max_output"]
        if s["phase"] == "fill":
            # PINGs (8 bytes each, a batch well under max_output) until the
            # socket takes no more: then dlockd queues what comes next
            now = time.monotonic()
            inq = struct.unpack("i", fcntl.ioctl(c.fd, termios.FIONREAD, b"\0\0\0\0"))[0]
            if inq > s["inq"]:
                s["inq"], s["t"] = inq, now
                k = max(1, maxout // 16)
                self.send_many(c, [Req("PING", "PING", kind=LOCAL) for _ in range(k)])
                s["filled"] += k
            elif now - s["t"] > SLOW_FULL_S or s["filled"] >= SLOW_FILL_MAX:
                s["phase"] = "flood"
                self.log("%s: %d bytes unread, %d PINGs: the flood" % (c.proc, inq, s["filled"]))
            return
        if s["phase"] == "flood":
            names = sorted(c.observing) or [c.private]
            reqs = []
            for _ in range(SLOW_FLOOD_LINES):
                x = r.random()
                n = r.choice(names)
                if s["tip"] != "mixed" or x < 0.4:
                    reqs.append(Req("LEADER", "LEADER %s" % n, [n], REDIS) if r.random() < 0.7
                                else Req("OBSERVE", "OBSERVE %s" % n, [n], REDIS))
                elif x < 0.6:
                    p = r.choice(PLAIN)
                    reqs.append(Req("STATUS", "STATUS %s" % p, [p], REDIS))
                elif x < 0.7:
                    reqs.append(Req("WHO", "WHO %s" % r.choice(PLAIN), [], REDIS))
                elif x < 0.8:
                    reqs.append(Req("PING", "PING", kind=LOCAL))
                else:
                    e = r.choice(ELECT)
                    reqs.append(Req("OBSERVE", "OBSERVE %s" % e, [e], REDIS))
            if c.closed:
                return
            self.send_many(c, reqs)
            s["flood"] += len(reqs)
            if s["flood"] * 8 > maxout + 4096:
                s["phase"] = "await"
                s["t"] = time.monotonic()
            return
        if s["phase"] == "await" and time.monotonic() - s["t"] > SLOW_RESUME_S:
            # not closed: it reads again (what it reads is not judged)
            s["phase"] = "drain"
            self.log("%s: not closed after %d flood lines; reads again" % (c.proc, s["flood"]))
            try:
                self.poller.modify(c.fd, select.POLLIN)
            except (KeyError, ValueError):
                pass
            for q in c.pending:
                q.t_head = None
            if c.pending:
                c.pending[0].t_head = time.monotonic()
            self.read_client(c, time.monotonic())
        if s["phase"] == "drain" and not c.closed and not c.pending:
            c.slow = None

    def slow_closed(self, c, t):
        self.counts["slow readers closed past max_output"] += 1
        self.gone(c, "closed by dlockd (a slow reader, %s)"
                  % (c.slow["phase"] if c.slow else "-"))

    # ---- faults and reloads ----------------------------------------------------------

    def a_fault(self):
        r = self.rng
        kind = r.choice(self.knob("fault_kinds"))
        t = time.monotonic()
        if kind in ("pause", "stop") and not self.redis_ok():
            kind = "kill"
        ms = r.randint(*PAUSE_MS)
        if self.knob("outlast_timeout"):
            # past every daemon's command_timeout_ms: what is sent then fails
            ms = max(d.conf["command_timeout_ms"] for d in self.daemons) + r.randint(200, 1200)
        if kind == "pause":
            how = r.choice(("ALL", "WRITE"))
            self.rc_call("CLIENT", "PAUSE", ms, how)
            self.blocked_until = t + ms / 1000.0 + 0.05
            self.faults.append(("pause", t, t + ms / 1000.0))
            self.log("fault: CLIENT PAUSE %d %s" % (ms, how))
        elif kind == "stop":
            self.redis.pause(0)
            self.stopped = True
            self.faults.append(("stop", t, t + ms / 1000.0))
            self.at(t + ms / 1000.0, self.resume_redis)
            self.log("fault: SIGSTOP redis for %d ms" % ms)
        elif kind == "kill":
            if not self.redis_ok():
                return
            try:
                lst = self.rc_call("CLIENT", "LIST")
            except (OSError, redisproc.RespError):
                return
            ids = [m.group(1) for m in re.finditer(r"id=(\d+) .*?name=dlockd:\S*", lst)]
            chosen = [i for i in ids if r.random() < 0.7] or ids
            for i in chosen:
                try:
                    self.rc_call("CLIENT", "KILL", "ID", i)
                except (OSError, redisproc.RespError):
                    pass
            self.faults.append(("kill", t, t + 0.5))
            self.log("fault: CLIENT KILL %d of %d dlockd connections" % (len(chosen), len(ids)))
        elif kind == "latency":
            d = r.choice(self.daemons)
            ms = r.randint(*LATENCY_MS)
            dur = r.uniform(*LATENCY_S)
            d.link.latency(ms, ms // 4)
            self.faults.append(("latency", t, t + dur + ms / 1000.0))
            self.at(t + dur, d.link.heal)
            self.log("fault: d%d's link %d ms late for %.1f s" % (d.i, ms, dur))
        elif kind == "reset":
            d = r.choice(self.daemons)
            d.link.reset()
            self.faults.append(("reset", t, t + 0.5))
            self.log("fault: d%d's link reset" % d.i)
        self.counts["fault " + kind] += 1
        # waiters leave while it lasts (their leave meets it): a killed or
        # reset connection is back within about 0.1 s
        if r.random() < FAULT_CLOSE_P:
            span = self.faults[-1][2] - t if kind in ("pause", "stop", "latency") else 0.1
            for _ in range(r.randint(*self.knob("fault_closes"))):
                self.at(t + r.uniform(0, span), self.fault_close)

    def fault_close(self):
        fair = lambda c: c.waiting() and c.pending[0].verb in ("FAIRLOCK", "TRYFAIRLOCK",
                                                                "ELECT")
        c = self.pick_client(fair) or self.pick_client(lambda c: c.waiting())
        if c is None:
            return
        if self.rng.random() < 0.3 and len(c.pending) == 1 and not c.half:
            self.counts["CANCEL in a fault"] += 1
            self.send(c, Req("CANCEL", "CANCEL", kind=LOCAL))
        else:
            self.counts["closed mid-wait in a fault"] += 1
            self.close_client(c, "closed mid-wait in a fault")

    def resume_redis(self):
        self.redis.resume(0)
        self.stopped = False

    def at(self, t, fn):
        self.scheduled.append((t, fn))

    def a_reload(self):
        r = self.rng
        for d in self.daemons:
            if r.random() < 0.6:
                continue
            keys = r.sample(sorted(CONF_CHOICES), r.randint(1, 3))
            old = dict(d.conf)
            for k in keys:
                d.conf[k] = r.choice(self.knob("conf")[k])
            if d.conf == old:
                continue
            t = time.monotonic()
            d.timeouts.append((t, d.conf["command_timeout_ms"]))
            d.reloads_sent += 1
            for k, measures in LIMITS.items():
                for tag in ((k, m) for m in measures):
                    if d.conf[k] >= d.allow[tag]:
                        d.allow[tag] = d.conf[k]
                        d.lower.pop(tag, None)
                    else:
                        d.lower[tag] = (d.conf[k], d.reloads_sent)
            self.write_conf(d)
            d.proc.send_signal(signal.SIGHUP)
            self.counts["reloads"] += 1
            self.log("reload d%d: %s" % (d.i, " ".join("%s %s->%s" % (k, old[k], d.conf[k])
                                                         for k in keys if old[k] != d.conf[k])))

    def phases(self):
        t = time.monotonic()
        if t < self.phase_end:
            return
        if self.phase_end == 0.0:       # a first calm: clients come and queue
            self.phase_end = t + WARMUP_S
            self.log("a calm until %.1f" % (self.phase_end - self.t0))
            return
        self.storm = not self.storm and "faults" not in self.no
        self.phase_end = t + self.rng.uniform(*self.knob("storm_s" if self.storm else "calm_s"))
        self.log("a %s until %.1f" % ("storm" if self.storm else "calm",
                                      self.phase_end - self.t0))

    def events(self):
        """What comes at a rate in time rather than per step: faults (in a
        storm), reloads, bursts, slow readers."""
        t = time.monotonic()
        for what, rate in RATES:
            rate = self.knob("rates").get(what, rate)
            if what in self.no or (what == "fault" and not self.storm):
                continue
            if what == "burst" and "CLIENTS" in self.no:
                continue
            due = self.due.get(what)
            if due is None:
                self.due[what] = t + self.rng.expovariate(rate)
            elif t >= due:
                self.due[what] = t + self.rng.expovariate(rate)
                self.step += 1
                getattr(self, "a_" + what.replace("-", "_"))()

    def service(self):
        t = time.monotonic()
        due = [x for x in self.scheduled if x[0] <= t]
        if due:
            self.scheduled = [x for x in self.scheduled if x[0] > t]
            for _, fn in sorted(due, key=lambda x: x[0]):
                fn()
        for c in list(self.clients.values()):
            if c.slow is not None and not c.closed:
                self.service_slow(c)

    # ---- the checks ------------------------------------------------------------------

    def quiet_since(self):
        """The end of the latest fault (its effects included)."""
        return max([f[2] for f in self.faults] + [0.0])

    def timeout_s(self, d, since):
        """The longest command_timeout_ms that may have been in force since."""
        vals = [v for t, v in d.timeouts if t >= since - 2.0]
        before = [v for t, v in d.timeouts if t < since - 2.0]
        if before:
            vals.append(before[-1])
        return max(vals) / 1000.0

    def check_answers(self):
        now = time.monotonic()
        self.waits = [(c, c.pending[0]) for c in self.clients.values()
                      if not c.closed and c.slow is None and c.pending and
                      c.pending[0].kind in (WAIT, TWAIT) and c.pending[0].t_head is not None]
        for c in list(self.clients.values()):
            if c.closed or c.slow is not None or not c.pending:
                continue
            q = c.pending[0]
            if q.t_head is None:
                q.t_head = now
            d = self.daemons[c.d]
            waited = now - q.t_head
            if q.kind == LOCAL:
                bound = SLACK_S
            elif q.kind == REDIS:
                bound = self.timeout_s(d, q.t_head) + SLACK_S
            elif q.kind == LISTING:
                bound = LIST_TIMEOUTS * self.timeout_s(d, q.t_head) + SLACK_S
            elif q.kind == TWAIT:
                bound = q.wait_ms / 1000.0 + self.timeout_s(d, q.t_head) + SLACK_S
            else:
                bound = None
            if bound is not None and waited > bound:
                self.read_client(c, now)
                if c.closed or not c.pending or c.pending[0] is not q:
                    continue
                self.fail("every request is answered in time",
                          "%s on d%d: %r unanswered after %.1f s (bound %.1f s: command_timeout_ms"
                          " %d in force); %d requests behind it"
                          % (c.proc, c.d, q.line, waited, bound,
                             1000 * self.timeout_s(d, q.t_head), len(c.pending) - 1))
            if bound is None and self.mode == "normal":
                # judged once in front of its queues for HANG_S: a wait ahead
                # that just ended leaves it a moment to be granted
                if not self.in_front(c, q):
                    q.front_since = None
                elif q.front_since is None:
                    q.front_since = now
                elif now - q.front_since > HANG_S and waited > HANG_S:
                    self.judge_wait(c, q, now)

    def wait_window(self, q):
        if any(n in FAIR or n in ELECT for n in q.names):
            return HANG_S + self.lease_s() / 3.0
        return HANG_S

    def in_front(self, c, q):
        """q waits in front of every queue it is in: no wait of ours came
        before it (or so close that its daemon may have read the other
        first) on one of its names. A queue is a daemon's, but for fair
        locks and elections, whose queue is Redis's: one behind a set that
        waits for another name rightly waits while its own name is free."""
        for n in q.names:
            shared = n in FAIR or n in ELECT
            for o, w in self.waits:
                if w is q or n not in w.names or (o.d != c.d and not shared):
                    continue
                if w.t_head < q.t_head + FRONT_S:
                    return False
        return True

    def judge_wait(self, c, q, now):
        """A wait that may last for ever hangs once nothing blocks it: its
        names free in Redis at every sample for HANG_S, no grant of them
        meanwhile, no fault, both daemons connected. A fair lock's or an
        election's waiters also ask again every renew_every_ms (lease_ms /
        3), which bounds a wake-up their daemon missed: theirs is judged
        after that too."""
        window = self.wait_window(q)
        if now - q.t_head < window or (q.front_since and now - q.front_since < window):
            return
        since = now - window
        if self.quiet_since() > since - self.timeout_s(self.daemons[c.d], since) - 1.0:
            return
        if not all(d.up for d in self.daemons):
            return
        if not q.judged:
            q.judged = True
            self.counts["waits judged in a calm"] += 1
        for n in q.names:
            if self.grants.get(n, 0) > since or self.taint.get(n, 0) > since or \
                    self.forced.get(n, 0) > since - (self.forced_s() if
                                                     self.forced_holders.get(n) else 0):
                return
            ss = [s for s in self.samples.get(n, ()) if s[0] >= since]
            if len(ss) < 3 or not all(free for _, free in ss):
                return
        self.read_client(c, now)
        if c.closed or not c.pending or c.pending[0] is not q:
            return
        d = self.daemons[c.d]
        notes = []
        for n in q.names:
            if self.forced.get(n, 0) > 0:
                notes.append("%s forced %.1f s ago" % (n, now - self.forced[n]))
        queues = self.queues_of(q.names)
        self.fail("no wait hangs while its names are free",
                  "%s on d%d: %r waiting %.1f s while %s free in Redis for %.1f s, no grant, "
                  "no fault; INFO waiters=%s locks_held=%s%s%s"
                  % (c.proc, c.d, q.line, now - q.t_head, " ".join(q.names), now - since,
                     d.info.get("waiters"), d.info.get("locks_held"),
                     "; " + "; ".join(notes) if notes else "",
                     "; Redis queues: " + queues if queues else ""))

    def queues_of(self, names):
        out = []
        for n in names:
            for k in ("redisson_lock_queue:{%s%s}" % (KEY_PREFIX, n),
                      "dlock_elect_queue:{%s%s}" % (KEY_PREFIX, n)):
                try:
                    v = self.rc_call("LRANGE", k, 0, -1)
                except (OSError, redisproc.RespError):
                    continue
                if v:
                    out.append("%s=%s" % (k, ",".join(self.owner_name(x) for x in v)))
        return " ".join(out)

    def owner_name(self, field):
        """A Redis owner field as d<i>:<connection id>."""
        for d in self.daemons:
            if d.uuid and field.startswith(d.uuid + ":"):
                return "d%d:%s" % (d.i, field[len(d.uuid) + 1:])
        return field

    def sample(self):
        """Which names are free in Redis now."""
        t = time.monotonic()
        if t < self.next_sample or not self.redis_ok():
            return
        self.next_sample = t + SAMPLE_S
        cmds = [("EXISTS", KEY_PREFIX + n) for n in MUTEXES + RW + tuple(self.quiet[-8:])]
        now_ms = int(time.time() * 1000)
        cmds += [("ZCOUNT", "{%s%s}:timeout" % (KEY_PREFIX, n), now_ms, "+inf")
                 for n in sorted(SEMS)]
        res = self.rc_pipe(cmds, timeout=0.5)
        if res is None or any(isinstance(x, redisproc.RespError) for x in res):
            return
        t = time.monotonic()
        for (cmd, key, *rest), v in zip(cmds, res):
            name = key[len(KEY_PREFIX):] if cmd == "EXISTS" else key[1 + len(KEY_PREFIX):
                                                                       key.index("}")]
            self.samples[name].append((t, v == 0))

    def check_info(self):
        t = time.monotonic()
        if t < self.next_info:
            return
        self.next_info = t + INFO_S
        for d in self.daemons:
            self.scan_log(d)
            try:
                info = self.probe_info(d)
            except OSError as e:
                self.check_daemons()
                self.fail("dlockd %d answers INFO" % d.i, str(e), fatal=True)
            self.limit(d, "max_clients_per_uid", int(info["connections"]), "INFO connections")
            self.limit(d, "max_locks_per_uid", int(info["locks_held"]), "INFO locks_held")
            self.limit(d, "max_waiters_per_uid", int(info["waiters"]), "INFO waiters")

    def limit(self, d, key, n, what):
        if "limits" in self.no:
            return
        tag = (key, what)
        low = d.lower.get(tag)
        if low is not None and d.reloads_seen >= low[1] and n <= low[0]:
            self.log("d%d: %s %d judged on %s (%d) from now" % (d.i, key, low[0], what, n))
            d.allow[tag] = low[0]
            del d.lower[tag]
        if n > d.allow[tag]:
            d.over[tag] += 1
            if d.over[tag] >= LIMIT_SAMPLES:
                self.fail("%s is never exceeded" % key,
                          "dlockd %d: %s %d > %d, %d samples in a row"
                          % (d.i, what, n, d.allow[tag], d.over[tag]))
        else:
            d.over[tag] = 0

    def check_holds(self):
        """Each daemon's holds in Redis, against max_locks_per_uid (every
        client is this uid)."""
        t = time.monotonic()
        if t < self.next_holds or not self.redis_ok() or t - self.quiet_since() < 1.0 or \
                self.mode != "normal":
            return
        self.next_holds = t + HOLDS_S
        cmds = [("HKEYS", KEY_PREFIX + n) for n in MUTEXES + RW + tuple(self.quiet[-8:])]
        now_ms = int(time.time() * 1000)
        cmds += [("ZRANGEBYSCORE", "{%s%s}:timeout" % (KEY_PREFIX, n), now_ms, "+inf")
                 for n in sorted(SEMS)]
        res = self.rc_pipe(cmds, timeout=0.5)
        if res is None:
            return
        per = collections.Counter()
        for v in res:
            if not isinstance(v, list):
                continue
            owners = set()
            for f in v:
                if f == "mode":
                    continue
                parts = f.split(":")
                owners.add((parts[0], parts[1] if len(parts) > 1 else "", f.endswith(":write")))
            for o in owners:
                per[o[0]] += 1
        for d in self.daemons:
            self.limit(d, "max_locks_per_uid", per.get(d.uuid, 0), "holds in Redis")

    def checks(self):
        self.check_daemons()
        self.check_answers()
        self.sample()
        self.check_info()
        self.check_holds()

    # ---- the run ----------------------------------------------------------------------

    def run(self):
        t_end = time.monotonic() + self.seconds
        try:
            while time.monotonic() < t_end:
                self.phases()
                self.events()
                self.act()
                self.pump(STEP_MS)
                self.service()
                self.checks()
        finally:
            self.walk_s = self.now()

    def finish(self):
        """The end: faults healed, every client closed, everything back to 0."""
        self.log("the end")
        for t, fn in sorted(self.scheduled, key=lambda x: x[0]):
            if fn == self.resume_redis or getattr(fn, "__name__", "") == "heal":
                fn()
        self.scheduled = []
        if self.stopped:
            self.resume_redis()
        for d in self.daemons:
            d.link.heal()
        if self.mangler is not None:
            self.mangler.rate = 0
        while time.monotonic() < self.blocked_until:
            time.sleep(0.05)
        for c in list(self.clients.values()):
            self.close_client(c, "the end")
        t_closed = time.monotonic()
        t_end = max(self.quiet_since(), t_closed)  # a fault's planned end, though healed now
        bound = END_S + max(self.timeout_s(d, self.t0) for d in self.daemons)
        if self.mode == "hostile":
            bound += self.lease_s()     # a mangled grant stays until its lease ends
        deadline = t_end + bound
        said = 0.0
        while True:
            self.check_daemons()
            zero, left = self.leftovers()
            if not zero and not left:
                break
            if time.monotonic() - said > 1.0:
                said = time.monotonic()
                self.log("the end: %s" % "; ".join(zero + left))
            if time.monotonic() > deadline:
                if zero:
                    self.fail("every counter is back to 0 once every client closed",
                              "; ".join(zero))
                if left:
                    self.fail("nothing is left in Redis once every client closed",
                              "; ".join(left[:20]))
                break
            time.sleep(0.1)
        self.say("converged %.1f s after the last close (bound %.1f s from %.1f s after it)"
                 % (time.monotonic() - t_closed, bound, t_end - t_closed))

    def leftovers(self):
        zero = []
        for d in self.daemons:
            info = self.probe_info(d)
            for k in ("locks_held", "waiters", "observers", "observed", "candidates"):
                if info.get(k, "0") != "0":
                    zero.append("dlockd %d %s=%s" % (d.i, k, info.get(k)))
            if info.get("connections") != "1":
                zero.append("dlockd %d connections=%s (the probe only)"
                            % (d.i, info.get("connections")))
        left = []
        try:
            keys = []
            cursor = "0"
            while True:
                cursor, page = self.rc_call("SCAN", cursor, "COUNT", 1000)
                keys += page
                if cursor == "0":
                    break
            now_ms = int(time.time() * 1000)
            for k in sorted(set(keys)):
                why = self.leftover(k, now_ms)
                if why:
                    left.append(why)
        except (OSError, redisproc.RespError) as e:
            left.append("Redis: %s" % e)
        return zero, left

    def places_ended(self, kind, key, now_ms):
        """places_ended of a fair lock's (kind redisson_lock) or an
        election's (dlock_elect) queue in Redis."""
        queue = self.rc_call("LRANGE", "%s_queue:{%s}" % (kind, key), 0, -1) or []
        ends = self.rc_call("ZRANGE", "%s_timeout:{%s}" % (kind, key), 0, -1, "WITHSCORES") or []
        return places_ended(queue, dict(zip(ends[::2], (float(x) for x in ends[1::2]))), now_ms)

    def leftover(self, k, now_ms):
        """Why key k should not be there, or None if it stays by design."""
        p = KEY_PREFIX
        if k == p + "dlockd daemons" or k.startswith("redisson_lock_token:{" + p) or \
                k.startswith("dlock_forced:{" + p):
            return None
        name = k[len(p):] if k.startswith(p) else None
        if name in SEMS:
            avail = int(self.rc_call("GET", k) or 0)
            tk = "{%s}:timeout" % k
            live = self.rc_call("ZCOUNT", tk, now_ms, "+inf")
            members = self.rc_call("ZCARD", tk)
            if live == 0 and avail + members == SEMS[name]:
                return None
            return "%s: %d available, %d permits held (%d live) of %d" % (
                k, avail, members, live, SEMS[name])
        if k.startswith("{" + p) and k.endswith("}:timeout"):
            n = k[1 + len(p):-len("}:timeout")]
            if n in SEMS:
                return None             # judged with its semaphore
        m = re.match(r"\{%s(\w+)\}:.*:rwlock_timeout:\d+$" % re.escape(p), k)
        if m and self.forced.get(m.group(1), 0) > 0 and self.rc_call("PTTL", k) > 0:
            # FORCEUNLOCK removes a read/write lock's hash only, as
            # Redisson's does: its read holds' timeout keys go with their lease
            return None
        m = re.match(r"(redisson_lock|dlock_elect)_(queue|timeout):\{%s(\w+)\}$" % re.escape(p), k)
        if m and self.mode == "hostile" and self.places_ended(m.group(1), p + m.group(3), now_ms):
            # a place taken by an acquire whose reply was mangled: dlockd
            # reads it as a failure that did not run, so no leave goes; it
            # holds nobody up once it has ended, and the next op on its
            # name drops it (fair.lua, elect.lua), as a grant hidden so
            # stays for its lease
            return None
        if k.startswith("dlock_leader:{" + p):
            n = k[len("dlock_leader:{") + len(p):-1]
            if not self.rc_call("EXISTS", p + n):
                return None             # an expired leader's record stays until the next
        t = self.rc_call("TYPE", k)
        if t == "hash":
            v = self.rc_call("HGETALL", k)
            what = " ".join("%s=%s" % (self.owner_name(a), b) for a, b in zip(v[::2], v[1::2]))
        elif t == "list":
            what = ",".join(self.owner_name(x) for x in self.rc_call("LRANGE", k, 0, -1))
        elif t == "zset":
            v = self.rc_call("ZRANGE", k, 0, -1, "WITHSCORES")
            what = ",".join("%s@%+d ms" % (self.owner_name(a), int(float(b)) - now_ms)
                            for a, b in zip(v[::2], v[1::2]))
        elif t == "set":
            what = ",".join(self.owner_name(x) for x in self.rc_call("SMEMBERS", k))
        else:
            what = str(self.rc_call("GET", k)) if t == "string" else t
        return "%s (%s, pttl %s): %s" % (k, t, self.rc_call("PTTL", k), what)

    def check_histories(self):
        for h in self.hist.values():
            h.close()
        ops = {k: history.load(h.path) for k, h in self.hist.items()}
        res = [("mutex", history.check(ops["mutex"], excuse=self.excuse_forced)),
               ("rw", history.check_rwlock(ops["rw"], excuse=self.excuse_forced))]
        for n, size in sorted(SEMS.items()):
            res.append(("sem " + n, history.check_semaphore(
                [r for r in ops["sem"] if r["name"] == n], size, tol_s=0.05)))
        res.append(("elect", history.check_election(ops["elect"])))
        total = sum(r.ops for _, r in res)
        sections = sum(r.sections for _, r in res)
        bad = [(k, v) for k, r in res for v in r.violations]
        if self.mode == "hostile":
            # a mangled reply gives the client a fence Redis never made:
            # only the exclusion is judged
            bad = [(k, v) for k, v in bad if "fence" not in v.split(":", 2)[1][:40]]
        excused = sum(len(r.excused) for _, r in res)
        self.say("history: %d operations, %d sections over %d names%s" % (
            total, sections, len(ALL_NAMES),
            "; %d overlaps excused by a FORCEUNLOCK between the grants" % excused
            if excused else ""))
        if bad:
            self.fail("the history checker: no two holders at once, fences rising",
                      "%d violations; first (%s): %s" % (len(bad), bad[0][0], bad[0][1]))
        return total, sections

    def stop_daemons(self):
        gone = [d for d in self.daemons if d.proc.poll() is not None]   # said already
        for d in self.daemons:
            if d.proc.poll() is None:
                d.proc.terminate()
        for d in self.daemons:
            if d in gone:
                continue
            try:
                rc = d.proc.wait(STOP_S)
            except Exception:
                rc = None
            self.scan_log(d)
            if rc != 0:
                self.fail("dlockd %d exits 0 on SIGTERM" % d.i, "rc %s%s" % (
                    rc, " (ASan's exitcode: a report or a leak): " + self.report_of(d)
                    if rc == 86 else ": " + self.report_of(d)))

    def cleanup(self):
        """Every process of the run ended, every socket closed (once)."""
        if self.cleaned:
            return
        self.cleaned = True
        try:
            if self.px is not None:
                self.px.close()
        except Exception:
            pass
        for c in list(self.clients.values()):
            try:
                c.sock.close()
            except OSError:
                pass
        if self.rc is not None:
            self.rc.close()
        self.spawner.stop()
        self.walklog.close()
        for h in self.hist.values():
            try:
                h.close()
            except Exception:
                pass


def classify(sig, detail):
    """Which of issue 36's bugs a failure looks like (a hint, not a proof)."""
    t = sig + " " + detail
    hints = []
    if "leader_done" in t:
        hints.append("bug 1 (LEADER/OBSERVE answer past max_output)")
    if "tell_one" in t or "obs_new" in t:
        hints.append("bug 2 (an observation on a dropped owner)")
    if "mwait_grant" in t:
        hints.append("bug 3 (MLOCK's grant of a reentry whose hold ended)")
    if "send_clients" in t or "lockmgr_owner_held" in t or "lockmgr_owner_waiting" in t:
        hints.append("bug 6 (CLIENTS during a close)")
    if "proto_next_is" in t:
        hints.append("memchr(NULL, .., 0) in proto_next_is: a pipeline of over 4 KiB kept, "
                     "consumed whole while the last request waits (not among the nine)")
    if "semaphore.c" in t or "sem_kick" in t or "allocation-size-too-big" in t or \
            "requested allocation size" in t:
        hints.append("a hostile reply")
    if "accepts" in sig and "gone" in detail:
        hints.append("not dlockd's doing: its socket file was removed under it")
    if "max_locks_per_uid" in sig or "max_waiters_per_uid" in sig or \
            "max_clients_per_uid" in sig:
        hints.append("bug 5 (a per-uid limit not a bound)")
    if "hangs" in sig:
        if "FAIRLOCK" in detail or "ELECT" in detail:
            hints.append("bug 7 (a fair or election place outliving its waiter)")
        elif "MLOCK" in detail or "forced" in detail:
            hints.append("bug 4 (a waiter not woken after HOLD_GONE)")
    if "nothing is left in Redis" in sig and ("queue" in detail or "timeout" in detail):
        hints.append("bug 7 (a fair or election place outliving its waiter)")
    if "answered in time" in sig:
        if "MLOCK" in detail:
            hints.append("bug 4 (a set's HOLD_GONE: a reentered name gone, the set never "
                         "answered)")
        elif "LIST" in detail:
            hints.append("a hostile reply (LIST without an end)")
        elif any(v in detail for v in WAITING_VERBS) or "TRY" in detail:
            hints.append("bug 8 (an acquire answered HOLD_GONE never answered)")
        else:
            hints.append("bug 9 (command_timeout_ms lowered by SIGHUP)")
    return hints


def run_one(args, seed, mode, profile, seconds):
    w = Walk(args, seed, mode, seconds, profile)
    ok = False
    t0 = time.monotonic()
    print("fuzz-state: seed %d, mode %s, profile %s, %d daemon(s), %.0f s, dlockd %s, dir %s"
          % (seed, mode, profile, args.daemons, seconds, args.dlockd, w.tmp), flush=True)
    try:
        try:
            w.start()
            w.run()
        except Failed:
            pass
        if not w.crashed:
            try:
                w.finish()
                w.check_histories()
            except Failed:
                pass
            except OSError as e:
                w.failures.append(("the end ran", str(e), w.step, w.now()))
        try:
            w.stop_daemons()
        except Failed:
            pass
        ok = not w.failures
    except KeyboardInterrupt:
        print("fuzz-state: interrupted at step %d; removed %s" % (w.step, w.tmp), flush=True)
        w.cleanup()
        if not args.keep:
            shutil.rmtree(w.tmp, ignore_errors=True)
        raise
    finally:
        w.cleanup()
    secs = time.monotonic() - t0
    walk_s = max(w.walk_s, 1e-3)
    print("fuzz-state: seed %d, mode %s: %d steps in %.1f s of walk (%.0f steps/s), %d requests; "
          "%s; %s" % (seed, mode, w.step, walk_s, w.step / walk_s, sum(w.verbs.values()),
                      ", ".join("%s %d" % kv for kv in sorted(w.counts.items())),
                      "mangled: " + ", ".join("%s %d" % kv for kv in sorted(
                          w.mangler.counts.items())) if w.mangler else "no mangling"),
          flush=True)
    if args.verbs:
        print("  verbs: " + ", ".join("%s %d" % kv for kv in sorted(w.verbs.items())))
    if ok:
        print("fuzz-state: seed %d, mode %s: PASS (%.1f s)" % (seed, mode, secs), flush=True)
        if not args.keep:
            shutil.rmtree(w.tmp, ignore_errors=True)
        else:
            print("kept %s" % w.tmp)
        return True, w
    for sig, detail, step, t in w.failures:
        hints = classify(sig, detail)
        print("fuzz-state: FAILED %s at step %d (%.1f s)%s" % (
            sig, step, t, "; looks like " + ", ".join(hints) if hints else ""), flush=True)
    print("fuzz-state: replay: python3 tests/fuzz/fuzz_state.py --seed %d --mode %s --profile %s "
          "--seconds %.0f --daemons %d%s\nkept %s (d*.log: the daemons, walk.log: every step)"
          % (seed, mode, profile, seconds, args.daemons,
             " --no " + ",".join(sorted(args.no)) if args.no else "", w.tmp), flush=True)
    return False, w


def on_sigterm(signum, frame):
    raise KeyboardInterrupt()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--mode", choices=("normal", "hostile"), default="normal")
    ap.add_argument("--profile", choices=sorted(PROFILES), default=None,
                    help="default mixed; a long walk without one rotates them (LONG_ROTATION)")
    ap.add_argument("--daemons", type=int, choices=(1, 2), default=2)
    ap.add_argument("--short", action="store_true",
                    help="the short run: fixed seeds and modes (SHORT_RUNS), about 30 s")
    ap.add_argument("--dlockd", default=os.environ.get("DLOCKD_BIN") or
                    os.path.join(ROOT, "build", "san", "dlockd"))
    ap.add_argument("--keep", action="store_true", help="keep the run's directory")
    ap.add_argument("--keep-going", action="store_true",
                    help="go on after a failure that leaves the daemons running")
    ap.add_argument("--no", type=lambda s: set(s.split(",")), default=set(),
                    help="verbs the walk leaves out, and 'slow' (slow readers), 'faults' "
                    "(no storms), 'limits' (the per-uid limits not judged)")
    ap.add_argument("--mangle-rate", type=float, default=0.02)
    ap.add_argument("--mangle-kinds", type=lambda s: tuple(s.split(",")), default=None,
                    help="hostile mode: which of mangle.KINDS (default all)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--verbs", action="store_true", help="print the verbs sent")
    args = ap.parse_args()
    if not os.path.exists(args.dlockd):
        print("no %s: make sanitize-build" % args.dlockd, file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)   # also when started in the background
    if args.short:
        runs = SHORT_RUNS
    else:
        seed = args.seed if args.seed is not None else random.randrange(1 << 30)
        secs = args.seconds or float(os.environ.get("FUZZ_STATE_SECONDS", "600"))
        if args.profile is None and args.mode == "normal" and secs >= 2 * LONG_SEGMENT_S:
            # a long walk: segments of LONG_SEGMENT_S, each its own seed,
            # daemons and Redis, through LONG_ROTATION
            n = int(secs // LONG_SEGMENT_S)
            runs = tuple((seed + i,) + LONG_ROTATION[i % len(LONG_ROTATION)] +
                         (secs / n,) for i in range(n))
        else:
            runs = ((seed, args.mode, args.profile or "mixed", secs),)
    ok = True
    for seed, mode, profile, secs in runs:
        try:
            good, _ = run_one(args, seed, mode, profile, secs)
        except KeyboardInterrupt:
            return 130
        ok = ok and good
        if not good and not args.keep_going:
            break
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
