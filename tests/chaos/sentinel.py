"""A private Redis Sentinel topology for the chaos suite's failover stage and
for `make bench`'s failover row: one primary and N replicas (redis-server on
TCP ports of 127.0.0.1, no persistence) watched by M redis-sentinel
processes, each with its own writable configuration file in a temporary
directory.

    topo = Topology(tmpdir, spawn=..., name="dlock-chaos")
    topo.start()                      # returns when Sentinel sees it all healthy
    topo.events.wait(...)             # every Sentinel pub/sub event, timestamped
    t_kill = topo.kill(topo.primary)  # SIGKILL the current primary
    ev = topo.wait_switch(t_kill, timeout)   # +switch-master seen on a sentinel
    topo.restart(old)                 # same port, empty; Sentinel demotes it
    topo.wait_healthy(timeout)        # 1 primary, every replica online again

Standard library only (and redisproc.py). Times are time.monotonic().
"""
# SPDX-License-Identifier: MIT

import os
import shutil
import socket
import threading
import time

# The RESP client, ports and processes live in redisproc.py (cluster.py uses
# them too); they stay importable from here (sentinel.RespError, ...).
from redisproc import (Resp, RespError, Spawner, call, free_ports, info,  # noqa: F401
                       stop_procs)

DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000


# ---- Sentinel replies ------------------------------------------------------------

def pairs(flat):
    """SENTINEL's flat [k1, v1, k2, v2, ...] as a dict."""
    return dict(zip(flat[0::2], flat[1::2]))


# ---- Sentinel events -------------------------------------------------------------

class Events(object):
    """Every message Sentinel publishes (PSUBSCRIBE *) on each sentinel, as
    (t_monotonic, sentinel index, channel, message), in arrival order, also
    appended to <tmp>/sentinel-events.log."""

    def __init__(self, tmp):
        self.cond = threading.Condition()
        self.items = []
        self.subscribed = set()
        self.closed = False
        self.conns = []
        self.log = open(os.path.join(tmp, "sentinel-events.log"), "a")

    def listen(self, idx, port):
        r = Resp(port, timeout=5.0)
        r.send("PSUBSCRIBE", "*")
        r.read()
        r.sock.settimeout(None)
        self.conns.append(r)
        with self.cond:
            self.subscribed.add(idx)
            self.cond.notify_all()
        t = threading.Thread(target=self._loop, args=(idx, r), name="sentinel-events",
                             daemon=True)
        t.start()

    def _loop(self, idx, r):
        while not self.closed:
            try:
                m = r.read()
            except (OSError, ValueError):
                return
            now = time.monotonic()
            if isinstance(m, list) and len(m) == 4 and m[0] == "pmessage":
                with self.cond:
                    self.items.append((now, idx, m[2], m[3]))
                    try:
                        self.log.write("%.3f s%d %s %s\n" % (now, idx, m[2], m[3]))
                        self.log.flush()
                    except (OSError, ValueError):
                        pass
                    self.cond.notify_all()

    def wait(self, pred, timeout):
        """The first event (t, idx, channel, msg) with pred(event) true, or
        None after timeout seconds."""
        def find():
            for e in self.items:
                if pred(e):
                    return e
            return None
        with self.cond:
            return self.cond.wait_for(find, timeout)

    def first(self, channel, since, prefix=""):
        """The first event on channel at or after `since` whose message
        starts with prefix (e.g. "master <name> "), or None."""
        with self.cond:
            for e in self.items:
                if e[2] == channel and e[0] >= since and e[3].startswith(prefix):
                    return e
        return None

    def close(self):
        self.closed = True
        for r in self.conns:
            try:
                r.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            r.close()
        try:
            self.log.close()
        except OSError:
            pass


# ---- the topology --------------------------------------------------------------------

class TopologyError(RuntimeError):
    pass


class Topology(object):
    def __init__(self, tmp, name="dlock", replicas=2, sentinels=3, quorum=2,
                 down_after_ms=DOWN_AFTER_MS, failover_timeout_ms=FAILOVER_TIMEOUT_MS,
                 spawn=None, say=None):
        self.tmp = tmp
        self.name = name
        self.nrep = replicas
        self.nsen = sentinels
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.own_spawner = None
        if spawn is None:
            spawn = self.own_spawner = Spawner(tmp)
        self.spawn = spawn
        self.say = say or (lambda text: None)
        self.redis_bin = shutil.which("redis-server")
        # redis-sentinel (Debian's package of that name) is redis-server
        # under another name; `redis-server <conf> --sentinel` is the same.
        self.sentinel_bin = shutil.which("redis-sentinel")
        self.nodes = []           # dict(port, proc, dir)
        self.sentinels = []       # dict(port, proc, conf)
        self.primary = 0          # index into nodes, as Sentinel last said
        self.events = Events(tmp)

    # -- addresses --

    def sentinel_addrs(self):
        return ["127.0.0.1:%d" % s["port"] for s in self.sentinels]

    def node_of_port(self, port):
        for i, n in enumerate(self.nodes):
            if n["port"] == int(port):
                return i
        return None

    # -- processes --

    def _start_node(self, i, replicaof=None):
        n = self.nodes[i]
        argv = [self.redis_bin, "--port", str(n["port"]), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", n["dir"],
                "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
                "--logfile", ""]
        if replicaof is not None:
            argv += ["--replicaof", "127.0.0.1", str(self.nodes[replicaof]["port"])]
        n["proc"] = self.spawn(argv, "redis-%d.log" % i)
        deadline = time.monotonic() + 10
        while True:
            try:
                if call(n["port"], "PING") == "PONG":
                    return
            except (OSError, RespError):
                pass
            if n["proc"].poll() is not None or time.monotonic() > deadline:
                raise TopologyError("redis-server %d (port %d) did not start" % (i, n["port"]))
            time.sleep(0.01)

    def _start_sentinel(self, j):
        s = self.sentinels[j]
        with open(s["conf"], "w") as f:
            f.write("port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\nlogfile \"\"\n"
                    "sentinel monitor %s 127.0.0.1 %d %d\n"
                    "sentinel down-after-milliseconds %s %d\n"
                    "sentinel failover-timeout %s %d\n"
                    "sentinel parallel-syncs %s 1\n"
                    % (s["port"], s["dir"], self.name, self.nodes[self.primary]["port"],
                       self.quorum, self.name, self.down_after_ms, self.name,
                       self.failover_timeout_ms, self.name))
        argv = ([self.sentinel_bin, s["conf"]] if self.sentinel_bin else
                [self.redis_bin, s["conf"], "--sentinel"])
        s["proc"] = self.spawn(argv, "sentinel-%d.log" % j)
        deadline = time.monotonic() + 10
        while True:
            try:
                if call(s["port"], "PING") == "PONG":
                    break
            except (OSError, RespError):
                pass
            if s["proc"].poll() is not None or time.monotonic() > deadline:
                raise TopologyError("redis-sentinel %d (port %d) did not start" % (j, s["port"]))
            time.sleep(0.01)
        self.events.listen(j, s["port"])

    def start(self, timeout=30.0):
        if self.redis_bin is None:
            raise TopologyError("redis-server not found in PATH")
        ports = free_ports(1 + self.nrep + self.nsen)
        for i in range(1 + self.nrep):
            d = os.path.join(self.tmp, "redis-%d" % i)
            os.makedirs(d, exist_ok=True)
            self.nodes.append(dict(port=ports[i], proc=None, dir=d))
        for j in range(self.nsen):
            d = os.path.join(self.tmp, "sentinel-%d" % j)
            os.makedirs(d, exist_ok=True)
            self.sentinels.append(dict(port=ports[1 + self.nrep + j], proc=None, dir=d,
                                       conf=os.path.join(d, "sentinel.conf")))
        self.primary = 0
        self._start_node(0)
        for i in range(1, 1 + self.nrep):
            self._start_node(i, replicaof=0)
        for j in range(self.nsen):
            self._start_sentinel(j)
        t0 = time.monotonic()
        why = self.wait_healthy(timeout)
        if why:
            raise TopologyError("the Sentinel topology did not become healthy within %.0f s: "
                                "%s" % (timeout, why))
        self.say("sentinel topology up in %.1f s: primary :%d, replicas %s, sentinels %s"
                 % (time.monotonic() - t0, self.nodes[0]["port"],
                    " ".join(":%d" % n["port"] for n in self.nodes[1:]),
                    " ".join(":%d" % s["port"] for s in self.sentinels)))

    def stop(self):
        """Ends the topology: its event listeners and every process of it
        (with spawn= given, those the caller's spawn started for it)."""
        self.events.close()
        if self.own_spawner is not None:
            self.own_spawner.stop()
        else:
            stop_procs([x["proc"] for x in self.sentinels + self.nodes])

    def kill(self, i):
        """SIGKILL node i; returns the time of the kill."""
        p = self.nodes[i]["proc"]
        t = time.monotonic()
        p.kill()
        p.wait()
        return t

    def restart(self, i):
        """Starts node i again on its port, empty and as a primary of its own,
        as an operator's restart would: Sentinel is to make it a replica."""
        self._start_node(i)
        return time.monotonic()

    # -- what Sentinel says --

    def master_port(self, j, timeout=1.0):
        r = call(self.sentinels[j]["port"], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name,
                 timeout=timeout)
        return int(r[1]) if r else None

    def role(self, i, timeout=1.0):
        """(role, master port or None, link up) of node i, from INFO replication."""
        inf = info(self.nodes[i]["port"], timeout=timeout)
        role = inf.get("role")
        if role == "slave":
            return role, int(inf.get("master_port", 0)), inf.get("master_link_status") == "up"
        return role, None, True

    def health(self):
        """None if healthy: every sentinel names the same primary, which is a
        primary with every other node an online replica, and each sentinel
        knows every replica (none down) and the other sentinels, with a quorum
        for failover. Otherwise what is not so."""
        try:
            ports = [self.master_port(j) for j in range(self.nsen)]
            if len(set(ports)) != 1 or ports[0] is None:
                return "sentinels disagree on the primary: %s" % ports
            p = self.node_of_port(ports[0])
            if p is None:
                return "sentinels name an unknown primary :%s" % ports[0]
            if self.nodes[p]["proc"] is None or self.nodes[p]["proc"].poll() is not None:
                return "the primary :%d Sentinel names is not running" % ports[0]
            role = self.role(p)
            if role[0] != "master":
                return "node :%d is %s, not master" % (ports[0], role[0])
            inf = info(self.nodes[p]["port"])
            online = sum(1 for k, v in inf.items() if k.startswith("slave") and k[5:].isdigit()
                         and "state=online" in v)
            if online != self.nrep:
                return "primary :%d has %d online replicas of %d" % (ports[0], online, self.nrep)
            for i in range(len(self.nodes)):
                if i == p:
                    continue
                r = self.role(i)
                if r[0] != "slave" or r[1] != ports[0] or not r[2]:
                    return "node :%d is %s of :%s (link %s)" % (self.nodes[i]["port"], r[0],
                                                                r[1], "up" if r[2] else "down")
            for j in range(self.nsen):
                sp = self.sentinels[j]["port"]
                reps = [pairs(x) for x in call(sp, "SENTINEL", "REPLICAS", self.name)]
                good = [x for x in reps if x.get("flags") == "slave" and
                        x.get("master-link-status") == "ok" and
                        int(x.get("master-port", 0)) == ports[0]]
                if len(good) != self.nrep:
                    return "sentinel %d sees %d healthy replicas (%s)" % (
                        j, len(good), ", ".join("%s:%s" % (x.get("port"), x.get("flags"))
                                                for x in reps))
                sens = call(sp, "SENTINEL", "SENTINELS", self.name)
                if len(sens) != self.nsen - 1:
                    return "sentinel %d knows %d other sentinels" % (j, len(sens))
                m = pairs(call(sp, "SENTINEL", "MASTER", self.name))
                if m.get("flags") != "master":
                    return "sentinel %d flags the primary %s" % (j, m.get("flags"))
                call(sp, "SENTINEL", "CKQUORUM", self.name)
            self.primary = p
            return None
        except (OSError, RespError, ValueError, IndexError, TypeError) as e:
            return "%s: %s" % (type(e).__name__, e)

    def wait_healthy(self, timeout):
        """None once healthy (Topology.primary is then the primary), or the
        last reason it was not, after timeout seconds."""
        deadline = time.monotonic() + timeout
        while True:
            why = self.health()
            if why is None or time.monotonic() >= deadline:
                return why
            time.sleep(0.05)

    def wait_switch(self, since, timeout):
        """The first +switch-master seen on any sentinel at or after `since`:
        (t, sentinel, new primary port), or None. Updates Topology.primary."""
        e = self.events.wait(lambda e: e[2] == "+switch-master" and e[0] >= since, timeout)
        if e is None:
            return None
        # "<name> <old ip> <old port> <new ip> <new port>"
        w = e[3].split()
        port = int(w[4])
        i = self.node_of_port(port)
        if i is not None:
            self.primary = i
        return e[0], e[1], port

    def force_failover(self, j=0):
        """SENTINEL FAILOVER on sentinel j; returns the time it was sent."""
        t = time.monotonic()
        call(self.sentinels[j]["port"], "SENTINEL", "FAILOVER", self.name, timeout=5.0)
        return t


if __name__ == "__main__":  # pragma: no cover - a manual check of the Sentinel side
    import sys
    import tempfile
    tmp = tempfile.mkdtemp(prefix="dlock-sentinel-")
    topo = Topology(tmp, name="check", say=print)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    try:
        topo.start()
        for k in range(rounds):
            old = topo.primary
            t = topo.kill(old)
            sw = topo.wait_switch(t, 30)
            od = topo.events.first("+odown", t)
            print("kill :%d -> +odown %s ms, +switch-master %s ms (to :%s)"
                  % (topo.nodes[old]["port"], "-" if od is None else "%.0f" % ((od[0] - t) * 1e3),
                     "-" if sw is None else "%.0f" % ((sw[0] - t) * 1e3), sw and sw[2]))
            tr = topo.restart(old)
            why = topo.wait_healthy(40)
            cv = topo.events.first("+convert-to-slave", tr)
            print("restarted :%d: healthy again after %.1f s (%s), +convert-to-slave %s s"
                  % (topo.nodes[old]["port"], time.monotonic() - tr, why or "ok",
                     "-" if cv is None else "%.1f" % (cv[0] - tr)))
        t = topo.force_failover()
        sw = topo.wait_switch(t, 30)
        print("SENTINEL FAILOVER -> +switch-master %s ms"
              % ("-" if sw is None else "%.0f" % ((sw[0] - t) * 1e3)))
        why = topo.wait_healthy(40)
        print("healthy after forced failover: %s, %.1f s" % (why or "ok", time.monotonic() - t))
    finally:
        topo.stop()
        shutil.rmtree(tmp, ignore_errors=True)
