#!/usr/bin/python3
"""asyncio lock clients for `make bench`: redis-py's asyncio Lock against
dlockd's own asyncio client, many tasks on one client object.

    /usr/bin/python3 asyncio_peers.py redisaio --socket REDIS_SOCK [--tasks 50] [--seconds 8]
    /usr/bin/python3 asyncio_peers.py dlockaio --socket DLOCKD_SOCK [--tasks 50] [--seconds 8]

One process, one event loop, --tasks tasks sharing ONE client object, each
looping on a lock name of its own (no contention):

    redisaio: lock = r.lock(name, timeout=30); await lock.acquire();
              await lock.release()      (redis.asyncio.lock.Lock; r one
              redis.asyncio.Redis: one connection pool, which opens a
              connection for each task that needs one at once)
    dlockaio: h = await c.lock(name); await h.unlock()     (c one
              dlock_asyncio.Client from clients/python of this tree: one
              connection, every request tagged)

After a one-second warm-up (--warmup) the pairs completed within the next
--seconds are counted. Output, one line: pairs_per_sec=<n> (those pairs
over --seconds), cpu_us_per_pair=<x> (this process's CPU time over the
counted window, per counted pair), all_pairs=<n> (every pair made, warm-up
and the last ones included, for per-pair figures of dlockd and Redis taken
around the whole run), pair_p50_us and pair_p99_us (each counted pair's
lock+unlock time).

redisaio needs redis-py 4.2 or newer (Debian: python3-redis); dlockaio
needs nothing but the standard library and Python 3.11.
SPDX-License-Identifier: MIT
"""
import argparse
import asyncio
import importlib.util
import os
import sys
import time

CLIENT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                          "clients", "python")


async def redisaio(sock):
    """(pair(idx) coroutine, close) over one redis.asyncio.Redis."""
    import redis.asyncio

    r = redis.asyncio.Redis(unix_socket_path=sock)
    await r.ping()

    async def pair(idx):
        lock = r.lock("bench:redisaio:%d" % idx, timeout=30)
        if not await lock.acquire():
            raise RuntimeError("acquire of bench:redisaio:%d failed" % idx)
        await lock.release()

    async def close():
        await (r.aclose() if hasattr(r, "aclose") else r.close())
    return pair, close


async def dlockaio(sock):
    """(pair(idx) coroutine, close) over one dlock_asyncio.Client."""
    sys.path.insert(0, CLIENT_DIR)
    import dlock_asyncio

    c = await dlock_asyncio.connect(sock)
    await c.ping()

    async def pair(idx):
        h = await c.lock("bench:dlockaio:%d" % idx)
        if h.holds != 1 or await h.unlock() != 0:
            raise RuntimeError("bench:dlockaio:%d: reentered or not released" % idx)
    return pair, c.close


PEERS = {"redisaio": redisaio, "dlockaio": dlockaio}


async def run(a):
    pair, close = await PEERS[a.peer](a.socket)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    counted_from, end = t0 + a.warmup, t0 + a.warmup + a.seconds
    counted, made, lat = [0], [0], []
    cpu = {}

    async def task(idx):
        while True:
            start = loop.time()
            if start >= end:
                return
            await pair(idx)
            now = loop.time()
            made[0] += 1
            if counted_from <= start and now < end:
                counted[0] += 1
                lat.append(now - start)

    async def clock():
        await asyncio.sleep(counted_from - loop.time())
        cpu["from"] = time.process_time()
        await asyncio.sleep(end - loop.time())
        cpu["to"] = time.process_time()

    try:
        await asyncio.gather(clock(), *(task(i) for i in range(a.tasks)))
    finally:
        await close()
    lat.sort()

    def pct(p):     # nearest rank, in microseconds, as dlock-bench's
        if not lat:
            return -1
        rank = min(len(lat), max(1, int(p / 100.0 * len(lat) + 0.999999)))
        return round(lat[rank - 1] * 1e6)
    n = counted[0]
    print("pairs_per_sec=%.0f pairs=%d tasks=%d seconds=%.1f cpu_us_per_pair=%.1f all_pairs=%d"
          " pair_p50_us=%d pair_p99_us=%d"
          % (n / a.seconds, n, a.tasks, a.seconds,
             (cpu["to"] - cpu["from"]) * 1e6 / n if n else 0, made[0], pct(50), pct(99)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("peer", choices=sorted(PEERS))
    ap.add_argument("--socket", required=True,
                    help="Redis's (redisaio) or dlockd's (dlockaio) Unix socket")
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=1)
    a = ap.parse_args()
    if a.peer == "redisaio" and importlib.util.find_spec("redis") is None:
        print("asyncio_peers.py: redis-py is missing (apt-get install python3-redis)",
              file=sys.stderr)
        return 1
    if sys.version_info < (3, 11):
        print("asyncio_peers.py: Python 3.11 or newer is needed", file=sys.stderr)
        return 1
    asyncio.run(run(a))
    return 0


if __name__ == "__main__":
    sys.exit(main())
