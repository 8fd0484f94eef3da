#!/usr/bin/python3
"""Python lock clients for `make bench`: redis-py's Lock (what a program
gets without dlockd), and dlockd's own Python client, in the same shape.

    /usr/bin/python3 peers.py redispy --socket REDIS_SOCK [--procs 8] [--seconds 8]
    /usr/bin/python3 peers.py dlockpy --socket DLOCKD_SOCK [--procs 8] [--seconds 8]
    ... [--names K]   the fleet of `make bench`: each pair on a name drawn
                      at random among fleet:0 .. fleet:<K-1>, shared by all

Each of --procs processes opens its own connection over the Unix socket and
loops, on a lock name of its own (no contention; or, with --names, on
shared names, waiting as the client does: redis-py polls every 0.1 s):

    redispy: lock = r.lock(name, timeout=30); lock.acquire(); lock.release()
    dlockpy: c.lock(name); c.unlock(name)     (a dlock.Client, from
             clients/python/dlock.py of this tree)

After a one-second warm-up every process counts pairs for --seconds; the
output is the sum of the processes' rates, pairs_per_sec=<n>, and
cpu_us_per_pair=<x>: the processes' own CPU time (time.process_time) over
the counted pairs; all_pairs=<n>, every pair made, warm-up included; and
pair_p50_us, pair_p99_us over the counted pairs of all processes.

redispy needs redis-py (Debian: python3-redis); run.sh installs it when
missing. dlockpy needs nothing but the standard library.
SPDX-License-Identifier: MIT
"""
import argparse
import importlib.util
import multiprocessing as mp
import os
import random
import sys
import time

CLIENT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                          "clients", "python")


def pick_name(prefix, idx, names):
    """A name of its own, or (names > 0) one drawn among the shared ones."""
    if names <= 0:
        own = "%s%d" % (prefix, idx)
        return lambda: own
    rnd = random.Random(idx)    # forked processes must not draw alike
    return lambda: "fleet:%d" % rnd.randrange(names)


def redispy_pair(sock, idx, names):
    import redis

    r = redis.Redis(unix_socket_path=sock)
    r.ping()
    pick = pick_name("bench:redispy:", idx, names)

    def pair():
        name = pick()
        lock = r.lock(name, timeout=30)
        if not lock.acquire():
            raise RuntimeError("acquire of %s failed" % name)
        lock.release()
    return pair


def dlockpy_pair(sock, idx, names):
    sys.path.insert(0, CLIENT_DIR)
    import dlock

    c = dlock.Client(sock)
    c.ping()
    pick = pick_name("bench:dlockpy:", idx, names)

    def pair():
        name = pick()
        _, holds = c.lock(name)
        if holds != 1 or c.unlock(name) != 0:
            raise RuntimeError("%s: reentered or not released" % name)
    return pair


PEERS = {"redispy": redispy_pair, "dlockpy": dlockpy_pair}


def worker(peer, sock, idx, seconds, warmup, names, barrier, out):
    try:
        pair = PEERS[peer](sock, idx, names)
    except BaseException:
        barrier.abort()     # the others stop waiting
        raise
    barrier.wait()
    warm = 0
    end = time.monotonic() + warmup
    while time.monotonic() < end:
        pair()
        warm += 1
    n = 0
    lat = []
    c0 = time.process_time()
    t0 = time.monotonic()
    end = t0 + seconds
    now = t0
    while now < end:
        pair()
        n += 1
        before, now = now, time.monotonic()
        lat.append(now - before)
    out.put((n, now - t0, time.process_time() - c0, warm + n, lat))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("peer", choices=sorted(PEERS))
    ap.add_argument("--socket", required=True, help="Redis's (redispy) or dlockd's (dlockpy) Unix socket")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--names", type=int, default=0,
                    help="draw each pair's name among this many shared names (0: one of its own)")
    a = ap.parse_args()

    if a.peer == "redispy" and importlib.util.find_spec("redis") is None:
        print("peers.py: redis-py is missing (apt-get install python3-redis)", file=sys.stderr)
        return 1
    if a.peer == "redispy":
        importlib.import_module("redis.lock")   # once here, not in each forked process

    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(a.procs)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=worker,
                    args=(a.peer, a.socket, i, a.seconds, a.warmup, a.names, barrier, out))
        for i in range(a.procs)
    ]
    for p in procs:
        p.start()
    results = []
    deadline = time.monotonic() + a.seconds + a.warmup + 60
    while len(results) < a.procs:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            results.append(out.get(timeout=min(left, 1.0)))
        except Exception:
            if all(not p.is_alive() for p in procs) and out.empty():
                break
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.terminate()
    if len(results) != a.procs:
        print("peers.py: only %d of %d processes finished" % (len(results), a.procs),
              file=sys.stderr)
        return 1
    rate = sum(r[0] / r[1] for r in results)
    pairs = sum(r[0] for r in results)
    cpu = sum(r[2] for r in results)
    all_pairs = sum(r[3] for r in results)
    lat = sorted(x for r in results for x in r[4])

    def pct(p):     # nearest rank, in microseconds, as dlock-bench's
        if not lat:
            return -1
        rank = min(len(lat), max(1, int(p / 100.0 * len(lat) + 0.999999)))
        return round(lat[rank - 1] * 1e6)
    print("pairs_per_sec=%.0f pairs=%d procs=%d seconds=%.1f cpu_us_per_pair=%.1f all_pairs=%d"
          " pair_p50_us=%d pair_p99_us=%d"
          % (rate, pairs, a.procs, a.seconds, cpu * 1e6 / pairs if pairs else 0, all_pairs,
             pct(50), pct(99)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
