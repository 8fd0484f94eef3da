#!/usr/bin/env python3
"""Clock skew for the chaos suite: a quorum node whose clock runs fast
(skewclock.c preloaded into that redis-server: its TIME and its key expiry
both run at rate r), against clock_drift_ms. Debian's libfaketime cannot
start Debian's redis-server (its jemalloc calls clock_gettime() while
libfaketime initialises: libfaketime's issue 130), so the suite builds its
own small LD_PRELOAD clock.

Five redis-servers, node 0 at rate r; two dlockd, A and B, through
faultproxy links (netfaults.Stage). A's links to nodes 3 and 4 are
black-holed until A counts only 0, 1 and 2, so that A's grant of `q-skew`
(LOCK with an explicit lease CS_LEASE_MS, no watchdog) lands on exactly
those three, the fast node among them. Then B asks for it: B needs three
free nodes, and node 0 lets go after CS_LEASE_MS / r. A's holder hears
`!LOST q-skew expired` when dlockd's validity ends (lease - clock_drift_ms,
counted from the LOCK's sending).

  within   r such that the lease shrinks by less than clock_drift_ms
           (auto: lease/100 + 2): B is granted only after A's !LOST; the
           history checker passes
  beyond   r = CS_FAST_RATE: node 0 drops the lock early, B is granted
           while A still holds it: two holders; the history checker must
           find it, and the fence still stops A's late write

    DLOCKD_BIN=$PWD/build/dlockd python3 tests/chaos/clockskew.py [--keep]

Needs a C compiler (cc). Exit 0 only if every check held.
"""
# SPDX-License-Identifier: MIT

import argparse
import os
import random
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import history  # noqa: E402
import netfaults  # noqa: E402
import sentinel  # noqa: E402

CS_LEASE_MS = 2000
CS_DRIFT_MS = CS_LEASE_MS // 100 + 2          # clock_drift_ms = auto
CS_SLOW_RATE = 1.0 + (CS_DRIFT_MS / 2.0) / CS_LEASE_MS   # shrinks the lease by drift/2
CS_FAST_RATE = 1.5                            # shrinks it by a third
CS_NAME = "q-skew"
CS_CUT = (3, 4)                               # A's links black-holed before its grant
CS_WAIT_S = 10.0
CS_DETECT_S = 10.0                            # daemon start -> the fast node set aside
CS_SNAME = "s-skew"
CS_SGRANTS = 10
CS_SWITCH_S = 30.0
CS_BEHIND_MS = {"within": 300, "beyond": 60000}   # the promoted replica's clock, behind
SKEWCLOCK_C = os.path.join(HERE, "skewclock.c")


def build_skewclock(tmp):
    """skewclock.c as an LD_PRELOAD library in tmp; its path, or None."""
    out = os.path.join(tmp, "skewclock.so")
    cc = os.environ.get("CC", "cc")
    r = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-shared",
                        "-fPIC", "-o", out, SKEWCLOCK_C],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.stderr.write(r.stdout.decode("utf-8", "replace"))
        return None
    return out


class SkewStage(netfaults.Stage):
    """netfaults' quorum stage with node 0's redis-server under skewclock.so."""

    def __init__(self, nf, label, rate):
        self.rate = rate
        self.first = True
        super().__init__(nf, "quorum", "skew-" + label)
        self.skew_label = label

    def spawn_node(self, argv, logname, env=None):
        if self.first:
            self.first = False           # node 0, the first started
            env = dict(os.environ if env is None else env, LD_PRELOAD=self.nf.skewclock,
                       SKEWCLOCK_RATE="%.6f" % self.rate)
        return self.nf.spawn(argv, logname, env)

    def up(self, d):
        """Up, every node counting but one set aside for its clock."""
        try:
            i = self.info(d)
        except OSError:
            return False
        down = [x for x in i.get("redis_down", "-").split(",") if x != "-"]
        return i.get("redis") == "up" and all(x.endswith("/clock") for x in down) and \
            int(i.get("redis_nodes_up", "0")) + len(down) == netfaults.NF_Q_NODES

    def clock_flagged(self, d):
        return [x for x in self.info(d).get("redis_down", "-").split(",") if x.endswith("/clock")]

    def run_skew(self):
        nf = self.nf
        t_start = time.monotonic()
        self.start()
        if self.skew_label == "beyond":
            # dlockd must set the fast node aside (INFO redis_down .../clock)
            t = None
            while time.monotonic() < t_start + CS_DETECT_S:
                if all(self.clock_flagged(d) == ["127.0.0.1:%d/clock" % self.links[d][0].port]
                       for d in range(2)):
                    t = time.monotonic()
                    break
                time.sleep(0.02)
            nf.check("quorum, a node fast by more than clock_drift_ms: both dlockd set it aside "
                     "(redis_down <its link>/clock) within %.0f s of their start" % CS_DETECT_S,
                     t is not None, "after %.1f s" % (t - t_start) if t else
                     "INFO redis_down: %s" % [self.info(d).get("redis_down") for d in range(2)])
        for i in CS_CUT:
            self.links[0][i].blackhole()
        deadline = time.monotonic() + CS_WAIT_S
        while time.monotonic() < deadline:
            if self.info(0).get("redis_nodes_up") == str(netfaults.NF_Q_NODES - len(CS_CUT)):
                break
            time.sleep(0.02)
        a = netfaults.Conn(self.dsock(0), self.hist, "d0/skew")
        b = netfaults.Conn(self.dsock(1), self.hist, "d1/skew")
        op = self.hist.invoke(a.proc, CS_NAME, "lock")
        r = a.call("LOCK %s %d" % (CS_NAME, CS_LEASE_MS), CS_WAIT_S)
        if self.skew_label == "beyond":
            # A counts only 1 and 2 now: no majority, no grant to lose.
            self.hist.complete(op, "info" if r is None else r)
            nf.check("quorum, the fast node set aside: A (cut from nodes 3 and 4) is refused "
                     "rather than granted on the fast node", r is not None and
                     r.startswith("ERR BACKEND no quorum"), "LOCK %s -> %r" % (CS_NAME, r))
            for ln in self.links[0]:
                ln.heal()
            a.close()
            b.close()
            self.hist.close()
            return
        if r is None or not r.startswith("OK "):
            self.hist.complete(op, "info" if r is None else r)
            nf.fail("%s: A's LOCK %s answered %r" % (self.skew_label, CS_NAME, r))
            return
        fa = int(r.split()[1])
        self.hist.complete(op, "ok", fence=fa)
        t_a = op["t0"]
        self.store.write(a.proc, CS_NAME, fa)
        opb = self.hist.invoke(b.proc, CS_NAME, "lock")
        b.s.sendall(("LOCK %s\n" % CS_NAME).encode())
        out, t_b = None, None
        while time.monotonic() < t_a + CS_WAIT_S and (out is None or not a.lost(CS_NAME)):
            a.poll(0.005)
            if out is None:
                b._lines(0.005)
                out = b._take()
                if out is not None:
                    t_b = time.monotonic()
        lost = a.lost(CS_NAME)
        for ln in self.links[0]:
            ln.heal()
        if out is None or not out.startswith("OK "):
            self.hist.complete(opb, "info" if out is None else out)
            nf.fail("%s: B's LOCK %s answered %r" % (self.skew_label, CS_NAME, out))
            return
        fb = int(out.split()[1])
        self.hist.complete(opb, "ok", t1=t_b, fence=fb)
        self.store.write(b.proc, CS_NAME, fb)
        stale = self.store.write(a.proc, CS_NAME, fa)
        op = self.hist.invoke(b.proc, CS_NAME, "unlock")
        self.hist.complete(op, b.call("UNLOCK %s" % CS_NAME, 2.0) or "info")
        a.close()
        b.close()
        self.hist.close()
        res = history.check(history.load(self.hist.path))
        nf.ops_checked += res.ops
        t_lost = (lost[0] - t_a) * 1000 if lost else None
        detail = ("node 0 at x%.4f: B granted %.0f ms after A's LOCK was sent, A's !LOST %s; "
                  "fences A %d, B %d; checker: %d ops, %s"
                  % (self.rate, (t_b - t_a) * 1000,
                     "at %.0f ms" % t_lost if t_lost is not None else "never", fa, fb, res.ops,
                     res.first() or "no violation"))
        nf.skew[self.skew_label] = detail
        nf.check("quorum, a node fast by less than clock_drift_ms (%d ms of a %d ms lease): "
                 "no two holders, and the node still counts" % (CS_DRIFT_MS, CS_LEASE_MS),
                 not res.violations and bool(lost) and not any(self.clock_flagged(d)
                                                               for d in range(2)), detail)


class BehindStage(netfaults.Stage):
    """netfaults' Sentinel stage with the replica's clock behind by offset_ms;
    a forced failover promotes it."""

    def __init__(self, nf, label, offset_ms):
        self.offset_ms = offset_ms
        super().__init__(nf, "sentinel", "behind-" + label)
        self.skew_label = label

    def spawn_node(self, argv, logname, env=None):
        if "--replicaof" in argv:
            env = dict(os.environ if env is None else env, LD_PRELOAD=self.nf.skewclock,
                       SKEWCLOCK_OFFSET_MS=str(-self.offset_ms))
        return self.nf.spawn(argv, logname, env)

    def take_grants(self, c, n):
        out = []
        for _ in range(n):
            op = self.hist.invoke(c.proc, CS_SNAME, "lock")
            r = c.call("LOCK %s" % CS_SNAME, CS_WAIT_S)
            if r is None or not r.startswith("OK "):
                self.hist.complete(op, "info" if r is None else r)
                return out, r
            f = int(r.split()[1])
            self.hist.complete(op, "ok", fence=f)
            self.store.write(c.proc, CS_SNAME, f)
            out.append(f)
            op = self.hist.invoke(c.proc, CS_SNAME, "unlock")
            self.hist.complete(op, c.call("UNLOCK %s" % CS_SNAME, CS_WAIT_S) or "info")
        return out, None

    def run_behind(self):
        nf = self.nf
        self.start()
        c = netfaults.Conn(self.dsock(1), self.hist, "d1/behind")
        before, err = self.take_grants(c, CS_SGRANTS)
        if err is not None or not before:
            nf.fail("sentinel %s: grants before the failover: %r" % (self.skew_label, err))
            return
        old = self.qu.primary
        t = self.qu.force_failover()
        sw = self.qu.wait_switch(t, CS_SWITCH_S)
        if sw is None:
            nf.fail("sentinel %s: no +switch-master within %.0f s" % (self.skew_label,
                                                                     CS_SWITCH_S))
            return
        new_port = sw[2]
        # the daemon follows: grants again on the promoted replica
        deadline = time.monotonic() + CS_SWITCH_S
        after = []
        while time.monotonic() < deadline and not after:
            after, err = self.take_grants(c, 1)
            if not after:
                time.sleep(0.1)
        t_fo = time.monotonic() - t
        more, err = self.take_grants(c, CS_SGRANTS - 1)
        after += more
        nf.check("sentinel, a promoted replica %d ms behind: fences still rise across the "
                 "failover (the counter reached it)" % self.offset_ms,
                 after and min(after) > max(before),
                 "last before %d, first after %s, failover to a grant %.1f s (old primary :%d, "
                 "new :%s)" % (max(before), after[0] if after else "-", t_fo,
                               self.qu.nodes[old]["port"], new_port))
        # The counter's last write lost in the failover (async replication):
        # fences fall back to the promoted node's TIME.
        for key in netfaults_keys(new_port, "*" + CS_SNAME + "*"):
            if "token" in key:
                sentinel.call(new_port, "DEL", key)
        lost, err = self.take_grants(c, 1)
        if not lost:
            nf.fail("sentinel %s: no grant after the counter was lost: %r" % (self.skew_label,
                                                                             err))
            return
        back = max(after) - lost[0]
        accepted = self.store.top.get(CS_SNAME) == lost[0]
        nf.skew["sentinel-" + self.skew_label] = back
        if self.offset_ms * 1000 < t_fo * 1e6:
            nf.check("sentinel, the counter lost and the clock behind by less than the failover "
                     "took: fences still rise", lost[0] > max(after),
                     "fence %d after %d" % (lost[0], max(after)))
        else:
            nf.check("sentinel, the counter lost and the clock behind by more than the failover "
                     "took: the fence goes back %.1f s and the fenced store refuses the new "
                     "holder (documented)" % (back / 1e6), lost[0] < max(after) and not accepted,
                     "fence %d after %d: store %s" % (lost[0], max(after),
                                                      "accepted" if accepted else "refused"))
        c.close()
        self.hist.close()
        res = history.check(history.load(self.hist.path))
        nf.ops_checked += res.ops
        expect = self.offset_ms * 1000 >= t_fo * 1e6
        nf.check("sentinel %s: the history checker %s" % (
            self.skew_label, "finds the fence going back" if expect else "finds nothing"),
            bool(res.violations) == expect, res.first() or "%d ops, no violation" % res.ops)


def netfaults_keys(port, pattern):
    return sentinel.call(port, "KEYS", pattern) or []


class NF(netfaults.NetFaults):
    def __init__(self, args):
        args.dlockd = args.dlockd
        super().__init__(args)
        self.skew = {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--dlockd", default=None)
    ap.add_argument("--only", choices=("quorum", "sentinel"), default=None)
    args = ap.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 30)
    nf = NF(args)
    t0 = time.monotonic()
    print("dlockd clock skew (seed %d), temp dir %s" % (args.seed, nf.tmp), flush=True)
    nf.skewclock = build_skewclock(nf.tmp)
    if nf.skewclock is None:
        nf.fail("skewclock.c does not build")
    else:
        try:
            for label, rate in (("within", CS_SLOW_RATE), ("beyond", CS_FAST_RATE)):
                if args.only not in (None, "quorum"):
                    break
                st = SkewStage(nf, label, rate)
                try:
                    st.run_skew()
                except (RuntimeError, OSError) as e:
                    nf.fail("%s: the stage ran to its end: %s" % (label, e))
                finally:
                    st.close()
            for label, ms in sorted(CS_BEHIND_MS.items(), reverse=True):
                if args.only not in (None, "sentinel"):
                    break
                st = BehindStage(nf, label, ms)
                try:
                    st.run_behind()
                except (RuntimeError, OSError) as e:
                    nf.fail("sentinel %s: the stage ran to its end: %s" % (label, e))
                finally:
                    st.close()
        finally:
            nf.spawner.stop()
    failed = sum(1 for _, ok, _ in nf.checks if not ok)
    if failed or args.keep:
        print("kept %s" % nf.tmp)
    else:
        shutil.rmtree(nf.tmp, ignore_errors=True)
    print("clockskew: %.1f s, %d passed, %d failed"
          % (time.monotonic() - t0, len(nf.checks) - failed, failed), flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
