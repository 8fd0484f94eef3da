"""A private Redis Cluster for the chaos suite's cluster stage: N primaries
with R replicas each (redis-server --cluster-enabled yes on TCP ports of
127.0.0.1, each with its own cluster bus port and nodes-<port>.conf in its own
directory, no persistence), made with redis-cli --cluster create.

    cl = Cluster(tmpdir, primaries=3, replicas=1, spawn=..., say=...)
    cl.start()                      # returns when every node agrees on the map
    cl.owner(keyslot("dlock:x"))    # the primary's port, as the nodes last agreed
    t = cl.kill(i)                  # SIGKILL node i (cl.pause(i)/cl.resume(i): SIGSTOP/SIGCONT)
    t, port = cl.wait_failover(old_port, timeout)   # its replica took over its slots
    cl.restart(i)                   # same port, empty, its nodes.conf kept
    cl.wait_rejoined(i, port, timeout)              # ROLE: a replica of port, link up
    rec = cl.migrate(slot, to_port) # the slot moved as redis-cli --cluster reshard does
    cl.redirections(port)           # MOVED/ASK/TRYAGAIN/CLUSTERDOWN it answered, ASKING taken

"Agree" means what a client relies on: every running node (not stopped, not
dead) answers, says cluster_state:ok and names the same primary for every
slot in CLUSTER SLOTS; "full" adds every node running, knowing every other,
the same current epoch, every range listing R replicas and every replica's
link up. Polled with a deadline: nothing announces it.

Standard library only (and redisproc.py). Times are time.monotonic().
"""
# SPDX-License-Identifier: MIT

import bisect
import os
import shutil
import time

from redisproc import NodeSignals, RespError, Spawner, call, free_ports, info, running, stop_procs

SLOTS = 16384
NODE_TIMEOUT_MS = 1000        # cluster-node-timeout
CREATE_TIMEOUT = 30.0         # redis-cli --cluster create
POLL_S = 0.02


# ---- key slots ---------------------------------------------------------------------

def _crc16_table():
    t = []
    for i in range(256):
        c = i << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x1021) if c & 0x8000 else (c << 1)
        t.append(c & 0xFFFF)
    return t


_CRC16 = _crc16_table()


def keyslot(key):
    """Redis Cluster's slot of key (CRC16/XMODEM, the {hash tag} rule)."""
    k = key.encode() if isinstance(key, str) else key
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    crc = 0
    for b in k:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[((crc >> 8) ^ b) & 0xFF]
    return crc & (SLOTS - 1)


# ---- the cluster ---------------------------------------------------------------------

class ClusterError(RuntimeError):
    pass


class Cluster(NodeSignals):
    def __init__(self, tmp, primaries=3, replicas=1, node_timeout_ms=NODE_TIMEOUT_MS,
                 spawn=None, say=None):
        self.tmp = tmp
        self.nprim = primaries
        self.nrep = replicas
        self.node_timeout_ms = node_timeout_ms
        self.own_spawner = None
        if spawn is None:
            spawn = self.own_spawner = Spawner(tmp)
        self.spawn = spawn
        self.say = say or (lambda text: None)
        self.redis_bin = shutil.which("redis-server")
        self.cli_bin = shutil.which("redis-cli")
        self.nodes = []           # dict(port, bus, proc, dir, id)
        self.ranges = []          # the agreed map: sorted [(start, end, primary port)]
        self._starts = []

    # -- addresses --

    def addrs(self):
        """Every node, "127.0.0.1:port ...": seeds for dlockd's cluster =."""
        return " ".join("127.0.0.1:%d" % n["port"] for n in self.nodes)

    def node_of_port(self, port):
        for i, n in enumerate(self.nodes):
            if n["port"] == int(port):
                return i
        return None

    def owner(self, slot):
        """slot's primary port as the nodes last agreed (see lacks), or None."""
        i = bisect.bisect_right(self._starts, slot) - 1
        if i >= 0 and self.ranges[i][0] <= slot <= self.ranges[i][1]:
            return self.ranges[i][2]
        return None

    def primaries(self):
        """The primaries' ports, as last agreed, in order of their first slot."""
        out = []
        for _, _, port in self.ranges:
            if port not in out:
                out.append(port)
        return out

    def slots_of(self, port):
        """port's slot ranges [(start, end)], as last agreed."""
        return [(s, e) for s, e, p in self.ranges if p == port]

    # -- processes --

    def _start_node(self, i):
        n = self.nodes[i]
        argv = [self.redis_bin, "--port", str(n["port"]), "--bind", "127.0.0.1",
                "--cluster-enabled", "yes",
                "--cluster-config-file", os.path.join(n["dir"], "nodes-%d.conf" % n["port"]),
                "--cluster-node-timeout", str(self.node_timeout_ms),
                "--cluster-port", str(n["bus"]),
                # Redis 7.0 leaves a replica out of CLUSTER SLOTS until its
                # replication offset is not 0: the primary's first PING to
                # its replicas, 10 s later by default.
                "--repl-ping-replica-period", "1",
                "--save", "", "--appendonly", "no", "--dir", n["dir"],
                "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
                "--logfile", ""]
        n["proc"] = self.spawn(argv, "cluster-%d.log" % n["port"])
        deadline = time.monotonic() + 10
        while True:
            try:
                if call(n["port"], "PING") == "PONG":
                    return
            except (OSError, RespError):
                pass
            if n["proc"].poll() is not None or time.monotonic() > deadline:
                raise ClusterError("redis-server %d (port %d) did not start" % (i, n["port"]))
            time.sleep(0.01)

    def start(self, timeout=30.0):
        if self.redis_bin is None or self.cli_bin is None:
            raise ClusterError("redis-server or redis-cli not found in PATH")
        n = self.nprim * (1 + self.nrep)
        ports = free_ports(2 * n)
        for i in range(n):
            d = os.path.join(self.tmp, "cluster-%d" % ports[i])
            os.makedirs(d, exist_ok=True)
            self.nodes.append(dict(port=ports[i], bus=ports[n + i], proc=None, dir=d, id=None))
        t0 = time.monotonic()
        for i in range(n):
            self._start_node(i)
            self.nodes[i]["id"] = call(self.nodes[i]["port"], "CLUSTER", "MYID")
        # The first nprim become primaries; redis-cli picks each replica's
        # primary (all on one IP: not in order).
        argv = ([self.cli_bin, "--cluster", "create"] +
                ["127.0.0.1:%d" % x["port"] for x in self.nodes] +
                ["--cluster-replicas", str(self.nrep), "--cluster-yes"])
        p = self.spawn(argv, "cluster-create.log")
        try:
            rc = p.wait(CREATE_TIMEOUT)
        except Exception:
            stop_procs([p])
            raise ClusterError("redis-cli --cluster create did not end within %.0f s"
                               % CREATE_TIMEOUT)
        if rc != 0:
            raise ClusterError("redis-cli --cluster create failed (rc %s); see %s"
                               % (rc, os.path.join(self.tmp, "cluster-create.log")))
        why = self.wait_agree(timeout, full=True)
        if why:
            raise ClusterError("the cluster did not come up within %.0f s: %s" % (timeout, why))
        self.say("cluster up in %.1f s: primaries %s, replicas %s"
                 % (time.monotonic() - t0, " ".join(":%d" % x for x in self.primaries()),
                    " ".join(":%d" % x["port"] for x in self.nodes
                             if x["port"] not in self.primaries())))

    def stop(self):
        if self.own_spawner is not None:
            self.own_spawner.stop()
        else:
            stop_procs([x["proc"] for x in self.nodes])

    def restart(self, i):
        """Node i again on its port, empty (no persistence) but with its
        nodes.conf: it rejoins, and the cluster makes it a replica of
        whoever took its slots."""
        self._start_node(i)
        return time.monotonic()

    # -- what the nodes say --

    def role(self, i, timeout=1.0):
        """(role, primary port or None, replication state) from ROLE."""
        r = call(self.nodes[i]["port"], "ROLE", timeout=timeout)
        if r[0] == "slave":
            return r[0], int(r[2]), r[3]
        return r[0], None, None

    def redirections(self, port):
        """What port's node told its clients so far: counts of the errors
        MOVED, ASK, TRYAGAIN and CLUSTERDOWN (INFO errorstats) and of ASKING
        commands it took."""
        out = dict(MOVED=0, ASK=0, TRYAGAIN=0, CLUSTERDOWN=0, ASKING=0)
        for k, v in info(port, "errorstats").items():
            if k.startswith("errorstat_") and k[10:] in out:
                out[k[10:]] = int(v.split("=")[1].split(",")[0])
        v = info(port, "commandstats").get("cmdstat_asking")
        if v:
            out["ASKING"] = int(v.split("calls=")[1].split(",")[0])
        return out

    def lacks(self, full=False):
        """None if the running nodes agree (self.ranges is then their map),
        else what keeps them from it."""
        try:
            first = None
            epoch = None
            for i, n in enumerate(self.nodes):
                port = n["port"]
                if not running(n["proc"]):
                    if full:
                        return "node :%d is not running" % port
                    continue
                inf = {}
                for line in call(port, "CLUSTER", "INFO").splitlines():
                    k, _, v = line.partition(":")
                    inf[k] = v.strip()
                if inf.get("cluster_state") != "ok":
                    return "node :%d says cluster_state:%s" % (port, inf.get("cluster_state"))
                if full:
                    if (inf.get("cluster_slots_ok") != str(SLOTS) or
                            inf.get("cluster_known_nodes") != str(len(self.nodes))):
                        return "node :%d: cluster_slots_ok:%s cluster_known_nodes:%s" % (
                            port, inf.get("cluster_slots_ok"), inf.get("cluster_known_nodes"))
                    if epoch is not None and inf.get("cluster_current_epoch") != epoch:
                        return "node :%d: cluster_current_epoch %s, others' %s" % (
                            port, inf.get("cluster_current_epoch"), epoch)
                    epoch = inf.get("cluster_current_epoch")
                view = []
                for r in call(port, "CLUSTER", "SLOTS"):
                    view.append((int(r[0]), int(r[1]), int(r[2][1])))
                    if full and len(r) - 3 != self.nrep:
                        return "node :%d: slots %s-%s list %d replicas of %d" % (
                            port, r[0], r[1], len(r) - 3, self.nrep)
                view.sort()
                if first is None:
                    first = (port, view)
                elif view != first[1]:
                    diff = [(a, b) for a, b in zip(first[1], view) if a != b][:1]
                    return "nodes :%d and :%d disagree on CLUSTER SLOTS (%s)" % (
                        first[0], port, diff or "number of ranges")
                if full:
                    r = self.role(i)
                    if r[0] == "slave" and r[2] != "connected":
                        return "replica :%d: link to :%d is %s" % (port, r[1], r[2])
            if first is None:
                return "no node is running"
            covered = sum(e - s + 1 for s, e, _ in first[1])
            if covered != SLOTS:
                return "the map covers %d of %d slots" % (covered, SLOTS)
            self.ranges = first[1]
            self._starts = [s for s, _, _ in self.ranges]
            return None
        except (OSError, RespError, ValueError, IndexError, TypeError) as e:
            return "%s: %s" % (type(e).__name__, e)

    def wait_agree(self, timeout, full=False, pred=None):
        """None once the running nodes agree (and pred(), if given, is true
        of the agreed map), or the last reason they did not after timeout
        seconds."""
        deadline = time.monotonic() + timeout
        while True:
            why = self.lacks(full)
            if why is None and pred is not None and not pred():
                why = "the agreed map is not the one awaited"
            if why is None or time.monotonic() >= deadline:
                return why
            time.sleep(POLL_S)

    def wait_failover(self, old_port, timeout):
        """After old_port's primary was killed or stopped: waits until the
        running nodes agree that all of its slots (as last agreed) went to one
        other node, whose ROLE is master. Returns (t, new port), or
        (None, the last reason) after timeout seconds."""
        was = self.slots_of(old_port)
        if not was:
            return None, "port %d was the primary of no slot" % old_port
        deadline = time.monotonic() + timeout
        last = "?"
        while True:
            why = self.lacks(False)
            if why is None:
                owners = set(self.owner(s) for s, _ in was)
                port = owners.pop() if len(owners) == 1 else None
                if port is None:
                    last = "port %d's slots went to several primaries" % old_port
                elif port == old_port:
                    last = "its slots are still on :%d" % old_port
                else:
                    i = self.node_of_port(port)
                    try:
                        role = self.role(i)[0]
                    except (OSError, RespError) as e:
                        role = str(e)
                    if role == "master":
                        return time.monotonic(), port
                    last = ":%d has the slots but ROLE says %s" % (port, role)
            else:
                last = why
            if time.monotonic() >= deadline:
                return None, last
            time.sleep(POLL_S)

    def wait_rejoined(self, i, primary, timeout):
        """Waits until node i is a replica of primary (ROLE, link connected)
        and the whole cluster agrees in full. Returns (t ROLE said so, t all
        agreed) with None for what did not happen, and the last reason."""
        deadline = time.monotonic() + timeout
        t_role = None
        why = "?"
        while True:
            if t_role is None:
                try:
                    r = self.role(i)
                    if r[0] == "slave" and r[1] == primary and r[2] == "connected":
                        t_role = time.monotonic()
                    else:
                        why = "ROLE of :%d: %s of :%s (%s)" % (self.nodes[i]["port"], r[0],
                                                               r[1], r[2])
                except (OSError, RespError, IndexError, ValueError) as e:
                    why = "ROLE of :%d: %s" % (self.nodes[i]["port"], e)
            if t_role is not None:
                why = self.lacks(True)
                if why is None:
                    return t_role, time.monotonic(), None
            if time.monotonic() >= deadline:
                return t_role, None, why
            time.sleep(POLL_S)

    # -- resharding --

    def _setslot(self, port, slot, how, node_id):
        r = call(port, "CLUSTER", "SETSLOT", slot, how, node_id, timeout=2.0)
        if r != "OK":
            raise ClusterError("CLUSTER SETSLOT %d %s on :%d: %r" % (slot, how, port, r))

    def migrate(self, slot, to_port, batch=1, between_s=0.0, hold=None, timeout=20.0):
        """Moves slot to the primary on to_port as redis-cli --cluster
        reshard does: SETSLOT IMPORTING on the target, MIGRATING on the source,
        GETKEYSINSLOT + MIGRATE `batch` keys at a time (between_s apart), then
        SETSLOT NODE on the target, the source and the other primaries, and
        waits until every running node names the target. hold(), if given,
        runs while the slot is half moved (after MIGRATING, before the keys).
        Returns a dict of the times of each step and the keys moved."""
        src = self.owner(slot)
        if src is None or src == to_port:
            raise ClusterError("slot %d: owner :%s, target :%d" % (slot, src, to_port))
        a, b = self.node_of_port(src), self.node_of_port(to_port)
        sid, tid = self.nodes[a]["id"], self.nodes[b]["id"]
        rec = dict(slot=slot, src=src, dst=to_port, keys=0, batches=0, nokey=0)
        rec["t0"] = time.monotonic()
        self._setslot(to_port, slot, "IMPORTING", sid)
        self._setslot(src, slot, "MIGRATING", tid)
        rec["t_begun"] = time.monotonic()
        if hold is not None:
            hold()
        rec["t_keys0"] = time.monotonic()
        deadline = rec["t_keys0"] + timeout
        while True:
            keys = call(src, "CLUSTER", "GETKEYSINSLOT", slot, batch, timeout=2.0)
            if not keys:
                break
            r = call(src, "MIGRATE", "127.0.0.1", to_port, "", 0, 2000, "KEYS", *keys,
                     timeout=5.0)
            rec["batches"] += 1
            if r == "OK":
                rec["keys"] += len(keys)
            elif r == "NOKEY":
                rec["nokey"] += 1
            else:
                raise ClusterError("MIGRATE of slot %d to :%d: %r" % (slot, to_port, r))
            if time.monotonic() > deadline:
                raise ClusterError("slot %d still has keys on :%d after %.0f s"
                                   % (slot, src, timeout))
            if between_s:
                time.sleep(between_s)
        rec["t_keys"] = time.monotonic()
        # The target first: it bumps its config epoch, so its claim wins
        # everywhere; then the source; then the other primaries.
        self._setslot(to_port, slot, "NODE", tid)
        self._setslot(src, slot, "NODE", tid)
        for port in self.primaries():
            if port not in (src, to_port):
                i = self.node_of_port(port)
                if running(self.nodes[i]["proc"]):
                    self._setslot(port, slot, "NODE", tid)
        rec["t_node"] = time.monotonic()
        why = self.wait_agree(timeout, pred=lambda: self.owner(slot) == to_port)
        if why:
            raise ClusterError("slot %d not on :%d everywhere within %.0f s: %s"
                               % (slot, to_port, timeout, why))
        rec["t_agreed"] = time.monotonic()
        return rec


if __name__ == "__main__":  # pragma: no cover - a manual check of the cluster side
    import tempfile
    tmp = tempfile.mkdtemp(prefix="dlock-cluster-")
    cl = Cluster(tmp, say=print)
    try:
        cl.start()
        for key in ("dlock:{hot}n1", "dlock:chaos", "redisson_lock__channel:{dlock:x}"):
            want = call(cl.nodes[0]["port"], "CLUSTER", "KEYSLOT", key)
            assert keyslot(key) == want, (key, keyslot(key), want)
        slot = keyslot("{hot}")
        src = cl.owner(slot)
        dst = [p for p in cl.primaries() if p != src][0]
        call(src, "SET", "{hot}a", "1")
        rec = cl.migrate(slot, dst)
        print("slot %d :%d -> :%d, %d keys: %.0f ms (agreed after %.0f ms)"
              % (slot, src, dst, rec["keys"], (rec["t_node"] - rec["t0"]) * 1e3,
                 (rec["t_agreed"] - rec["t0"]) * 1e3))
        for how in ("kill", "pause"):
            old = cl.primaries()[0]
            i = cl.node_of_port(old)
            t = cl.kill(i) if how == "kill" else cl.pause(i)
            tf, new = cl.wait_failover(old, 30)
            print("%s :%d -> :%s promoted after %s ms" % (how, old, new, "-" if tf is None
                                                          else "%.0f" % ((tf - t) * 1e3)))
            tr = cl.restart(i) if how == "kill" else cl.resume(i)
            t_role, t_all, why = cl.wait_rejoined(i, new, 30)
            print("  back as a replica of :%s: ROLE after %s ms, all agree after %s ms %s"
                  % (new, "-" if t_role is None else "%.0f" % ((t_role - tr) * 1e3),
                     "-" if t_all is None else "%.0f" % ((t_all - tr) * 1e3), why or ""))
    finally:
        cl.stop()
        shutil.rmtree(tmp, ignore_errors=True)
