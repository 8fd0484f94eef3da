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
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import history  # noqa: E402
import netfaults  # noqa: E402

CS_LEASE_MS = 2000
CS_DRIFT_MS = CS_LEASE_MS // 100 + 2          # clock_drift_ms = auto
CS_SLOW_RATE = 1.0 + (CS_DRIFT_MS / 2.0) / CS_LEASE_MS   # shrinks the lease by drift/2
CS_FAST_RATE = 1.5                            # shrinks it by a third
CS_NAME = "q-skew"
CS_CUT = (3, 4)                               # A's links black-holed before its grant
CS_WAIT_S = 10.0
CS_DETECT_S = 10.0                            # daemon start -> the fast node set aside
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
                st = SkewStage(nf, label, rate)
                try:
                    st.run_skew()
                except (RuntimeError, OSError) as e:
                    nf.fail("%s: the stage ran to its end: %s" % (label, e))
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
