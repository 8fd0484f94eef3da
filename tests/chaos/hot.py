"""The chaos suite's hot-name stage (issue 40): several daemons whose
workers all contend on a few names, daemons SIGSTOPped and SIGKILLed while
their workers wait, judged by the history checker.

HN_DAEMONS dlockd on one Redis (watchdog mode, lease HN_LEASE_MS renewed
every HN_RENEW_MS, command_timeout_ms HN_CMD_TIMEOUT_MS), HN_WORKERS threads
on each, one connection each, loop: LOCK one of HN_NAMES drawn at random
-> write the fenced store with the fence -> stay 1-5 ms -> UNLOCK; every
operation, !LOST and store verdict goes to history-<label>.jsonl. Every
release of a hot name thus has waiters on other daemons.

Faults, each on a daemon that has a worker waiting at that moment (short
run: one of each; full run: HN_FULL_FAULTS):

  pause  SIGSTOP for the bound below + HN_PAUSE_OVER_S, the hot names'
         holders read from Redis (the daemon's own owner fields), SIGCONT:
         shorter than the lease (its holds survive), so a daemon woken by a
         release while stopped must not keep the others from the name
  kill   SIGSTOP, a moment for what it sent to reach Redis, the hot names'
         holders read from Redis (the daemon's own owner fields), SIGKILL,
         restart: a woken daemon that is dead

Judged (history.py): no two holders at once, fences unique and rising in
grant order, the store taking only the highest (check); no hot name left
free while a worker of a live daemon waited for it, for longer than
HN_FALLBACK_MS + HN_SLACK_MS (x2 in the short run, which make test runs
beside other jobs), the grant's moment read from its fence (Redis
TIME in microseconds) and the release's from its UNLOCK's answer
(free_with_waiters); a waiter whose daemon is stopped or dead is none, and
a name Redis showed held by a stopped or killed daemon (an acquire it had
sent, granted after a release, whose reply the daemon never reads: dead,
or timed out by its own clock once it runs again) is excused from the
SIGSTOP to the name's next grant. Then: every daemon granted again within
HN_PROGRESS_S of each fault; once the workers are told to stop, each one's
last LOCK answered within HN_DRAIN_S (a LOCK that never comes back hangs);
the daemons exit 0 on SIGTERM (with the suite's log checks).

Runs on one redis-server and on a Redis Cluster of HN_PRIMARIES primaries
(no replicas) with the names on different primaries (sharded pub/sub).
"""
# SPDX-License-Identifier: MIT

import os
import random
import select
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, keyslot  # noqa: E402
from kinds import _wait  # noqa: E402
from netfaults import Conn  # noqa: E402
from redisproc import call, free_ports  # noqa: E402
import history  # noqa: E402

HN_DAEMONS = 4
HN_WORKERS = 3               # per daemon
HN_NAMES = ("chaos-hot-a", "chaos-hot-b")
HN_PRIMARIES = 3
HN_LEASE_MS = 5000
HN_RENEW_MS = 500            # a hold outlives a pause: 0.9 x lease - renewal > pause
HN_CMD_TIMEOUT_MS = 500
HN_FALLBACK_MS = HN_CMD_TIMEOUT_MS  # the daemon's bound: a woken daemon that does not try
HN_SLACK_MS = 1000           # scheduling on top of it (short run, make test's busy machine: x2)
HN_PAUSE_OVER_S = 0.7        # a pause lasts fallback + slack + this: holding the others up shows
HN_KILL_PEEK_S = 0.2         # SIGSTOP -> SIGKILL: what the daemon sent reaches Redis
HN_DOWN_S = 0.3              # killed -> restarted
HN_RESUME_S = 0.3            # SIGCONT -> the daemon acts again (its backlog)
HN_PROGRESS_S = HN_LEASE_MS / 1000.0 + 3.0   # a fault -> every daemon granted (short run: x2)
HN_DRAIN_S = HN_LEASE_MS / 1000.0 + 5.0      # stop -> every worker's last LOCK answered
HN_REPLY_S = 60.0            # a LOCK's reply awaited at most this long
HN_STOP_S = 10.0             # daemons end within this
HN_FULL_FAULTS = ("pause", "kill", "pause", "pause", "kill", "pause")
HN_SHORT_FAULTS = ("pause", "kill")
HN_KEY_PREFIX = "dlock:"     # dlockd's default key_prefix
HN_RELAY = "chaos-hot-relay"  # the relay's name, at each fault
HN_QUEUE_S = 5.0             # a relay waiter seen in the wake queue within this
HN_RELAY_WAIT_S = 10.0       # a relay waiter granted within this (else it hangs)


class Relay(object):
    """At each fault, on HN_RELAY (no worker's): a holder on one daemon,
    then a waiter on the fault's victim p, first in the name's wake queue
    (PROTOCOL.md: dlock_wq:{<key>}), then one on each other daemon. Once p
    is stopped (or killed), the holder's UNLOCK names p: the others must
    get the name within the fallback. Every operation goes to the stage's
    history, judged with the workers'."""

    def __init__(self, st, p):
        self.st = st
        self.p = p
        self.conns = {}            # daemon -> (Conn, proc, op of its LOCK or None)
        self.grants = []           # (daemon, t)
        self.t_rel = None
        self.queued = True
        others = [d for d in range(HN_DAEMONS) if d != p]
        self.holder = others[0]
        key = HN_KEY_PREFIX + HN_RELAY
        self.qkey = "dlock_wq:{%s}" % key
        self.qport = st.redis_port(HN_RELAY)
        c, proc = Conn(st.dsock[self.holder], st.hist, "d%d/relay" % self.holder), \
            "d%d/relay" % self.holder
        op = st.hist.invoke(proc, HN_RELAY, "lock")
        r = c.call("LOCK %s" % HN_RELAY, HN_RELAY_WAIT_S)
        if r is None or not r.startswith("OK "):
            raise RuntimeError("hot stage: relay holder on dlockd %d: %s" % (self.holder, r))
        st.hist.complete(op, "ok", fence=int(r.split()[1]))
        self.conns[self.holder] = (c, proc, None)
        for k, d in enumerate([p] + others[1:]):
            proc = "d%d/relay" % d
            c = Conn(st.dsock[d], st.hist, proc)
            op = st.hist.invoke(proc, HN_RELAY, "lock")
            c.s.sendall(("LOCK %s\n" % HN_RELAY).encode())
            self.conns[d] = (c, proc, op)
            # each in the queue before the next asks: p first
            if not _wait(lambda: self.queue_len() >= k + 1, HN_QUEUE_S, 0.005):
                self.queued = False
            time.sleep(0.002)     # the queue's scores are in ms

    def queue_len(self):
        try:
            return len(call(self.qport, "ZRANGE", self.qkey, "0", "-1", timeout=1.0) or [])
        except Exception:
            return 0

    def release(self, until):
        """The holder's UNLOCK (p stopped or dead by now), then the other
        waiters' grants, each UNLOCKed at once, until the moment until (a
        pause must not last longer for them: its holds would run out)."""
        st = self.st
        c, proc, _ = self.conns.pop(self.holder)
        op = st.hist.invoke(proc, HN_RELAY, "unlock")
        r = c.call("UNLOCK %s" % HN_RELAY, HN_RELAY_WAIT_S)
        st.hist.complete(op, "info" if r is None else r)
        self.t_rel = time.monotonic()
        c.close()
        self.collect([d for d in self.conns if d != self.p], until, False)

    def collect(self, ds, deadline, last):
        """The LOCK replies of the waiters on daemons ds, in the order they
        come (each grant UNLOCKed at once, so the next can follow), until
        deadline; then, if last, those still waiting hang."""
        st = self.st
        pending = {d: self.conns.pop(d) for d in ds}
        while pending:
            left = deadline - time.monotonic()
            ready = []
            if left > 0:
                try:
                    ready, _, _ = select.select([x[0].s for x in pending.values()], [], [], left)
                except OSError:
                    ready = [x[0].s for x in pending.values()]
            if not ready:
                for d, (c, proc, op) in pending.items():
                    if not last:
                        self.conns[d] = (c, proc, op)
                        continue
                    st.unanswered.append((proc, HN_RELAY, op["t0"]))
                    st.hist.complete(op, "info")
                    c.close()
                return
            for d in [d for d, x in pending.items() if x[0].s in ready]:
                c, proc, op = pending[d]
                try:
                    r = c.reply(0.0)
                except OSError:
                    r = ""
                if r is None:
                    continue          # only an event, or part of a line
                del pending[d]
                if not r.startswith("OK "):
                    st.hist.complete(op, r or "info")
                    c.close()
                    continue
                st.hist.complete(op, "ok", fence=int(r.split()[1]))
                self.grants.append((d, time.monotonic()))
                op = st.hist.invoke(proc, HN_RELAY, "unlock")
                try:
                    r = c.call("UNLOCK %s" % HN_RELAY, HN_RELAY_WAIT_S)
                except OSError:
                    r = None
                st.hist.complete(op, "info" if r is None else r)
                c.close()

    def finish(self):
        """p's waiter (granted once p runs again, or gone with it), and any
        other still waiting."""
        self.collect(list(self.conns), time.monotonic() + HN_RELAY_WAIT_S, True)

    def summary(self):
        first = min((t for d, t in self.grants if d != self.p), default=None)
        return "relay: %s, first other grant %s after the release" % (
            "queue order seen" if self.queued else "queue order NOT seen",
            "%.0f ms" % ((first - self.t_rel) * 1000) if first and self.t_rel else "none")


class Stage(object):
    def __init__(self, c, spawn, short, cluster=False):
        self.c = c
        self.spawn = spawn
        self.short = short
        self.on_cluster = cluster
        self.cluster = None
        self.label = "hot-cluster" if cluster else "hot"
        self.tmp = os.path.join(c.tmp, self.label)
        os.makedirs(self.tmp, exist_ok=True)
        self.rnd = random.Random(c.args.seed + 40 + (1 if cluster else 0))
        self.slack_ms = HN_SLACK_MS * (2 if short else 1)
        self.pause_s = (HN_FALLBACK_MS + self.slack_ms) / 1000.0 + HN_PAUSE_OVER_S
        self.names = list(HN_NAMES)
        self.daemons = [None] * HN_DAEMONS
        self.uuid = [None] * HN_DAEMONS
        self.dsock = [os.path.join(self.tmp, "d%d.sock" % i) for i in range(HN_DAEMONS)]
        self.hist = history.History(os.path.join(c.tmp, "history-%s.jsonl" % self.label))
        self.store = history.FencedStore(self.hist)
        self.stop = threading.Event()
        self.mu = threading.Lock()
        self.waiting = [0] * HN_DAEMONS       # workers with a LOCK outstanding, per daemon
        self.grants = [[] for _ in range(HN_DAEMONS)]   # completion times
        self.conns = {}                       # proc -> its Conn, to end the stuck at the end
        self.threads = []
        self.unanswered = []                  # (proc, name, t0): no reply in HN_REPLY_S
        self.faults = []                      # dict(kind, daemon, t0, t1, held)
        self.hidden = []                      # (name, t0, t1): held by a stopped or dead daemon
        self.progress_late = []
        self.port = None
        self.redis = None

    # -- processes --

    def redis_port(self, name):
        """The port of the node that has name's key."""
        if self.cluster is None:
            return self.port
        return self.cluster.owner(keyslot(HN_KEY_PREFIX + name))

    def start_dlockd(self, i):
        conf = os.path.join(self.tmp, "d%d.conf" % i)
        where = ("cluster = %s\n" % self.cluster.addrs() if self.cluster is not None
                 else "url = redis://127.0.0.1:%d\n" % self.port)
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n%s[redis]\n%scommand_timeout_ms = %d\n"
                    "[lock]\nlease_ms = %d\nrenew_every_ms = %d\n"
                    % (self.dsock[i], self.c.log_level(), where, HN_CMD_TIMEOUT_MS,
                       HN_LEASE_MS, HN_RENEW_MS))
        os.chmod(conf, 0o600)
        self.daemons[i] = self.spawn([self.c.dlockd_bin, "-c", conf],
                                     "dlockd-%s%d.log" % (self.label, i))
        if not _wait(lambda: self.all_up(i), 10.0):
            raise RuntimeError("%s stage: dlockd %d did not come up" % (self.label, i))
        self.uuid[i] = self.learn_uuid(i)

    def all_up(self, i):
        """dlockd i says redis=up and counts every node up (a Cluster's
        nodes connect one by one)."""
        try:
            c = Conn(self.dsock[i])
        except OSError:
            return False
        try:
            r = c.call("INFO", 2.0) or ""
        except OSError:
            return False
        finally:
            c.close()
        kv = dict(x.split("=", 1) for x in r.split()[1:] if "=" in x)
        return kv.get("redis") == "up" and kv.get("redis_nodes_up") == kv.get("redis_nodes")

    def learn_uuid(self, i):
        """The daemon's id, the owner fields' prefix: from a hold of a name
        of its own, read in Redis."""
        name = "chaos-hot-id-%d" % i
        c = Conn(self.dsock[i])
        try:
            r = c.call("LOCK %s" % name, 10.0)
            if r is None or not r.startswith("OK "):
                raise RuntimeError("%s stage: dlockd %d: LOCK %s: %s" % (self.label, i, name, r))
            fields = call(self.redis_port(name), "HKEYS", HN_KEY_PREFIX + name, timeout=2.0)
            c.call("UNLOCK %s" % name, 10.0)
        finally:
            c.close()
        owners = [f for f in fields if ":" in f and f != "mode"]
        if len(owners) != 1:
            raise RuntimeError("%s stage: dlockd %d: owner fields %r" % (self.label, i, fields))
        return owners[0].rsplit(":", 1)[0]

    def holds_in_redis(self, i):
        """The hot names whose key in Redis has an owner field of daemon i."""
        out = []
        for n in self.names + [HN_RELAY]:
            try:
                fields = call(self.redis_port(n), "HKEYS", HN_KEY_PREFIX + n, timeout=2.0)
            except Exception:     # a name we cannot read: held, to be safe
                out.append(n)
                continue
            if any(f.startswith(self.uuid[i] + ":") for f in fields or []):
                out.append(n)
        return out

    # -- the workload --

    def worker(self, d, wid):
        proc = "d%d/w%d" % (d, wid)
        rnd = random.Random(self.rnd.randrange(1 << 30))
        c = None
        while not self.stop.is_set():
            if c is None:
                try:
                    c = Conn(self.dsock[d], self.hist, proc)
                except OSError:
                    time.sleep(0.05)
                    continue
                self.conns[proc] = c
            name = rnd.choice(self.names)
            with self.mu:
                self.waiting[d] += 1
            op = self.hist.invoke(proc, name, "lock")
            try:
                r = c.call("LOCK %s" % name, HN_REPLY_S)
            except OSError:
                r = ""
            with self.mu:
                self.waiting[d] -= 1
            if r is None:
                self.unanswered.append((proc, name, op["t0"]))
            if not r or not r.startswith("OK "):
                self.hist.complete(op, "info" if not r else r)
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
                c.poll(rnd.uniform(0.001, 0.005))
                op = self.hist.invoke(proc, name, "unlock")
                r = c.call("UNLOCK %s" % name, HN_REPLY_S)
            except OSError:
                r = ""
            self.hist.complete(op, "info" if not r else r)
            if not r or r.startswith("ERR") or c.events:
                c.close()
                c = None
        if c is not None:
            c.close()

    def start_workers(self):
        for d in range(HN_DAEMONS):
            for w in range(HN_WORKERS):
                t = threading.Thread(target=self.worker, args=(d, w), daemon=True)
                t.start()
                self.threads.append((t, "d%d/w%d" % (d, w)))

    def all_granted_since(self, t0, timeout):
        """Every daemon granted a LOCK since t0, within timeout; the late."""
        late = []

        def every():
            late[:] = [d for d in range(HN_DAEMONS) if not any(t >= t0 for t in self.grants[d])]
            return not late
        _wait(every, timeout, 0.01)
        return late

    # -- faults --

    def victim(self):
        """A daemon with a worker waiting now (the stage's point), at random."""
        with self.mu:
            busy = [d for d in range(HN_DAEMONS) if self.waiting[d] > 0]
        return self.rnd.choice(busy or list(range(HN_DAEMONS)))

    def pause(self):
        d = self.victim()
        p = self.daemons[d]
        rl = Relay(self, d)
        t0 = time.monotonic()
        p.send_signal(signal.SIGSTOP)
        rl.release(t0 + self.pause_s)
        time.sleep(max(0.0, t0 + self.pause_s - time.monotonic()))
        # An acquire it sent just before may have been granted in Redis
        # after a release: held by a stopped daemon, unseen by its worker.
        held = self.holds_in_redis(d)
        p.send_signal(signal.SIGCONT)
        t1 = time.monotonic()
        self.faults.append(dict(kind="pause", daemon=d, t0=t0, t1=t1, held=held))
        rl.finish()
        self.c.say("%s: dlockd %d SIGSTOPped %.1f s (holding %s in Redis); %s"
                   % (self.label, d, t1 - t0, ", ".join(held) or "nothing", rl.summary()))
        return t1

    def kill(self):
        d = self.victim()
        p = self.daemons[d]
        rl = Relay(self, d)
        t0 = time.monotonic()
        p.send_signal(signal.SIGSTOP)
        time.sleep(HN_KILL_PEEK_S)
        held = self.holds_in_redis(d)
        p.kill()
        p.wait()
        self.c.killed_daemons.add(p)
        rl.release(time.monotonic() + HN_RELAY_WAIT_S)
        time.sleep(HN_DOWN_S)
        self.start_dlockd(d)
        t1 = time.monotonic()
        self.faults.append(dict(kind="kill", daemon=d, t0=t0, t1=t1, held=held))
        rl.finish()
        self.c.say("%s: dlockd %d SIGKILLed (holding %s in Redis), restarted; %s"
                   % (self.label, d, ", ".join(held) or "nothing", rl.summary()))
        return t1

    # -- the run --

    def run(self):
        c = self.c
        if self.on_cluster:
            self.cluster = Cluster(self.tmp, primaries=HN_PRIMARIES, replicas=0,
                                   spawn=self.spawn, say=c.say)
            self.cluster.start()
            self.names = self.pick_names()
        else:
            self.port = free_ports(1)[0]
            self.redis = self.spawn(["redis-server", "--port", str(self.port), "--bind",
                                     "127.0.0.1", "--save", "", "--appendonly", "no",
                                     "--dir", self.tmp], "%s-redis.log" % self.label)
            if not _wait(lambda: self._ping(), 10.0):
                raise RuntimeError("hot stage: redis-server did not start")
        for i in range(HN_DAEMONS):
            self.start_dlockd(i)
        self.offset0 = time.time() - time.monotonic()
        self.start_workers()
        c.say("%s: %s, %d dlockd x %d workers on %s"
              % (self.label, "a %d-primary cluster" % HN_PRIMARIES if self.on_cluster
                 else "redis-server", HN_DAEMONS, HN_WORKERS, " ".join(self.names)))
        t0 = time.monotonic()
        bound = HN_PROGRESS_S * (2 if self.short else 1)
        late = self.all_granted_since(t0, bound)
        if late:
            self.progress_late.append("the start: dlockd %s" % " ".join(map(str, late)))
        time.sleep(1.0 if self.short else 2.0)
        for kind in (HN_SHORT_FAULTS if self.short else HN_FULL_FAULTS):
            t = self.pause() if kind == "pause" else self.kill()
            late = self.all_granted_since(t, bound)
            if late:
                self.progress_late.append("after the %s of dlockd %d: dlockd %s"
                                          % (kind, self.faults[-1]["daemon"],
                                             " ".join(map(str, late))))
            time.sleep(0.5 if self.short else 1.5)
        t_stop = time.monotonic()
        self.stop.set()
        stuck = []
        for t, proc in self.threads:
            t.join(max(0.0, t_stop + HN_DRAIN_S - time.monotonic()))
            if t.is_alive():
                stuck.append(proc)
        for proc in stuck:            # end them: their LOCK never came back
            try:
                self.conns[proc].close()
            except OSError:
                pass
        self.offset1 = time.time() - time.monotonic()
        self.stop_daemons()
        self.hist.close()
        self.analyse(stuck, time.monotonic() - t0)

    def _ping(self):
        try:
            return call(self.port, "PING") == "PONG"
        except OSError:
            return False

    def pick_names(self):
        """Two names on different primaries."""
        out, owners = [], set()
        for k in range(1000):
            n = "chaos-hot-%d" % k
            o = self.cluster.owner(keyslot(HN_KEY_PREFIX + n))
            if o not in owners:
                out.append(n)
                owners.add(o)
            if len(out) == len(HN_NAMES):
                return out
        raise RuntimeError("hot stage: no names on %d primaries" % len(HN_NAMES))

    def stop_daemons(self):
        for i, p in enumerate(self.daemons):
            alive = p.poll() is None
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(HN_STOP_S)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "no exit within %.0f s" % HN_STOP_S
            self.c.daemon_stops.append(("%s dlockd %d" % (self.label, i), alive, rc))
        if self.cluster is not None:
            self.cluster.stop()
        else:
            self.redis.terminate()
            self.redis.wait()

    # -- the judgement --

    def daemon_of(self, proc):
        return int(proc.split("/")[0][1:])

    def live(self, proc, t0, t1):
        """proc's daemon could act over [t0, t1]: not stopped, not dead."""
        d = self.daemon_of(proc)
        for f in self.faults:
            if f["daemon"] == d and f["t0"] < t1 and t0 < f["t1"] + HN_RESUME_S:
                return False
        return True

    def excused(self, name, t0, t1):
        """A daemon stopped or killed while Redis showed it holding name:
        a grant its worker may never hear of (its reply died with the
        daemon, or came after the command timeout the stop ran out) holds
        the name until the name's next grant."""
        return any(name == n and w0 < t1 and t0 < w1 for n, w0, w1 in self.hidden)

    def hidden_windows(self, ops, grant_at):
        """(name, from, to) for each name a stopped or killed daemon held
        in Redis: from the SIGSTOP (a kill begins with one) to the name's
        first grant after it, and at most a lease (+ slack) after the
        SIGCONT or the restart."""
        lease = (HN_LEASE_MS + self.slack_ms) / 1000.0
        out = []
        for f in self.faults:
            for n in f["held"]:
                after = [grant_at(r) for r in ops if r["name"] == n and r["op"] == "lock"
                         and r["res"] == "ok" and grant_at(r) > f["t0"]]
                out.append((n, f["t0"], min([f["t1"] + lease] + after)))
        return out

    def analyse(self, stuck, seconds):
        c = self.c
        ops = history.load(self.hist.path)
        offset = (self.offset0 + self.offset1) / 2.0
        drift = abs(self.offset1 - self.offset0)
        faults = ", ".join("%s d%d" % (f["kind"], f["daemon"]) for f in self.faults)
        r = history.check(ops)
        per_d = [len(g) for g in self.grants]
        c.check("%s: the history checker: no two holders at once, fences unique and rising, "
                "the store takes only the highest (%d dlockd x %d workers on %d names; %s)"
                % (self.label, HN_DAEMONS, HN_WORKERS, len(self.names), faults),
                not r.violations and r.sections > 0,
                "%d ops, %d sections in %.1f s, grants by daemon %s%s"
                % (r.ops, r.sections, seconds, "/".join(map(str, per_d)),
                   "; first violation: " + r.violations[0] if r.violations else ""))
        bound = (HN_FALLBACK_MS + self.slack_ms) / 1000.0

        def grant_at(s):
            return s["fence"] / 1e6 - offset
        self.hidden = self.hidden_windows(ops, grant_at)
        g = history.free_with_waiters(ops, bound, grant_at=grant_at, live=self.live,
                                      excused=self.excused)
        c.check("%s: no hot name left free with a live daemon's worker waiting for longer "
                "than %d ms (fallback %d ms + slack %d ms; the grant's moment from its fence)"
                % (self.label, bound * 1000, HN_FALLBACK_MS, self.slack_ms),
                not g.violations and g.judged > 0 and drift < 0.01,
                "%d hand-offs judged, longest %.0f ms, %d while a stopped or killed "
                "daemon held the name in Redis (%s)%s%s"
                % (g.judged, g.longest * 1000, g.excused, ", ".join(
                    "%s %.0f ms" % (n, (w1 - w0) * 1000) for n, w0, w1 in self.hidden)
                    or "none",
                   "" if drift < 0.01 else "; the wall clock moved %.3f s against the "
                   "monotonic one" % drift,
                   "; " + "; ".join(g.violations[:3]) if g.violations else ""))
        c.check("%s: every daemon granted again within %.0f s of each fault, every LOCK "
                "answered, every worker's last LOCK within %.0f s of the stop"
                % (self.label, HN_PROGRESS_S * (2 if self.short else 1), HN_DRAIN_S),
                not self.progress_late and not stuck and not self.unanswered,
                "late: %s; stuck at the stop: %s; unanswered: %s"
                % ("; ".join(self.progress_late) or "none", " ".join(stuck) or "none",
                   "; ".join("%s LOCK %s at %.3f" % x for x in self.unanswered[:3]) or "none"))


def run_stage(c, spawn, short):
    Stage(c, spawn, short).run()
    Stage(c, spawn, short, cluster=True).run()
