#!/usr/bin/python3
"""Peer lock clients for `make bench`: what a program gets without dlockd.

    /usr/bin/python3 peers.py redispy --socket REDIS_SOCK [--procs 8] [--seconds 8]

Each of --procs processes opens its own redis-py connection over the Unix
socket and loops, on a lock name of its own (no contention):

    lock = r.lock(name, timeout=30); lock.acquire(); lock.release()

After a one-second warm-up every process counts pairs for --seconds; the
output is the sum of the processes' rates: pairs_per_sec=<n>.

Needs redis-py (Debian: python3-redis); run.sh installs it when missing.
SPDX-License-Identifier: MIT
"""
import argparse
import multiprocessing as mp
import sys
import time


def redispy_worker(sock, idx, seconds, warmup, barrier, out):
    import redis

    r = redis.Redis(unix_socket_path=sock)
    r.ping()
    name = "bench:redispy:%d" % idx
    barrier.wait()

    def pair():
        lock = r.lock(name, timeout=30)
        if not lock.acquire():
            raise RuntimeError("acquire of %s failed" % name)
        lock.release()

    end = time.monotonic() + warmup
    while time.monotonic() < end:
        pair()
    n = 0
    t0 = time.monotonic()
    end = t0 + seconds
    now = t0
    while now < end:
        pair()
        n += 1
        now = time.monotonic()
    out.put((n, now - t0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("peer", choices=["redispy"])
    ap.add_argument("--socket", required=True, help="Redis Unix socket")
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=1)
    a = ap.parse_args()

    try:
        import redis  # noqa: F401
    except ImportError:
        print("peers.py: redis-py is missing (apt-get install python3-redis)", file=sys.stderr)
        return 1

    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(a.procs)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=redispy_worker,
                    args=(a.socket, i, a.seconds, a.warmup, barrier, out))
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
    rate = sum(n / t for n, t in results)
    pairs = sum(n for n, _ in results)
    print("pairs_per_sec=%.0f pairs=%d procs=%d seconds=%.1f" % (rate, pairs, a.procs, a.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
