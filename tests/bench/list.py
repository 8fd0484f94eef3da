#!/usr/bin/env python3
"""make bench, section 16: LIST over 100,000 held locks.

    python3 tests/bench/list.py populate REDIS_SOCK N [PREFIX]
    python3 tests/bench/list.py measure SOCK ROUNDS PATTERN [LIMIT]
    python3 tests/bench/list.py loop SOCK SECONDS PATTERN [LIMIT]
    python3 tests/bench/list.py contend SOCK SECONDS PATTERN [LIMIT]

populate: N Redisson-style lock hashes dlock:<PREFIX><i> (PREFIX "bl/"),
each with one owner field "<uuid>:1" = 1 and a 10-minute PEXPIRE, written
by a Lua loop, 10,000 keys per EVAL (holding them through dlockd would
have its watchdog renew 100,000 leases). Prints keys=<dbsize>.

contend: a probe connection's LOCK times (LOCK, UNLOCK, back to back, on
names of its own) for SECONDS alone, then for SECONDS while another
connection runs LIST PATTERN LIMIT back to back: alone_p50_ms,
alone_p99_ms, listing_p50_ms, listing_p99_ms, listing_max_ms.

measure: ROUNDS sequential LIST PATTERN LIMIT on one connection; loop:
the same, back to back, for SECONDS. Each prints one line of key=value:
rounds, entries (of the last reply), more, p50_ms, p99_ms, max_ms (each
LIST's time from the request's write to its last entry line's read).
"""
# SPDX-License-Identifier: MIT

import os
import socket
import subprocess
import sys
import time

BATCH = 10000        # keys per EVAL: each call blocks Redis for a few ms
LEASE_MS = 600000    # the hashes outlive any run
POPULATE = """
for i = tonumber(ARGV[1]), tonumber(ARGV[2]) do
  local k = ARGV[3] .. string.format('%06d', i)
  redis.call('hset', k, '0b1e7b9c-0000-4000-8000-00000000b1e7:1', 1)
  redis.call('pexpire', k, tonumber(ARGV[4]))
end
return redis.call('dbsize')
"""


def populate(rsock, n, prefix):
    size = "0"
    for lo in range(0, n, BATCH):
        hi = min(n, lo + BATCH) - 1
        size = subprocess.run(
            ["redis-cli", "-s", rsock, "EVAL", POPULATE, "0", str(lo), str(hi),
             "dlock:" + prefix, str(LEASE_MS)],
            check=True, capture_output=True, text=True).stdout.strip()
    print("keys=%s" % size)


class Conn(object):
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(30.0)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def line(self):
        r = self.f.readline()
        if not r:
            raise EOFError("connection closed")
        return r.decode().rstrip("\n")

    def list(self, pattern, limit):
        """One LIST: (seconds, entries, more)."""
        t0 = time.monotonic()
        self.s.sendall(("LIST %s %d\n" % (pattern, limit)).encode())
        head = self.line()
        while head.startswith("!"):
            head = self.line()
        w = head.split()
        if len(w) != 4 or w[:2] != ["OK", "LIST"]:
            raise RuntimeError("LIST %s %d: %s" % (pattern, limit, head))
        n = int(w[2])
        for _ in range(n):
            if not self.line().startswith("= "):
                raise RuntimeError("LIST: an entry line without '= '")
        return time.monotonic() - t0, n, int(w[3])


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, (len(v) * p) // 100)]


def report(times, n, more):
    ms = [t * 1000 for t in times]
    print("rounds=%d entries=%d more=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f"
          % (len(ms), n, more, pct(ms, 50), pct(ms, 99), max(ms)))


def probe(path, seconds, prefix):
    """LOCK and UNLOCK names of its own, back to back, for seconds; the
    LOCKs' times (request written to OK read), in seconds."""
    c = Conn(path)
    times, i = [], 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        name = "%s%d" % (prefix, i % 64)
        i += 1
        t0 = time.monotonic()
        c.s.sendall(("LOCK %s\n" % name).encode())
        r = c.line()
        while r.startswith("!"):
            r = c.line()
        times.append(time.monotonic() - t0)
        if not r.startswith("OK "):
            raise RuntimeError("LOCK %s: %s" % (name, r))
        c.s.sendall(("UNLOCK %s\n" % name).encode())
        if not c.line().startswith("OK"):
            raise RuntimeError("UNLOCK %s" % name)
    return times


def contend(path, seconds, pattern, limit):
    """A probe's LOCK times alone, then with LIST running back to back on
    another connection (a child process): one line of key=value."""
    alone = [t * 1000 for t in probe(path, seconds, "probe/a")]
    pid = os.fork()
    if pid == 0:
        c = Conn(path)
        end = time.monotonic() + seconds + 1
        n = 0
        while time.monotonic() < end:
            c.list(pattern, limit)
            n += 1
        os._exit(0 if n > 0 else 1)
    time.sleep(0.2)  # the first LIST is under way
    busy = [t * 1000 for t in probe(path, seconds, "probe/b")]
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise RuntimeError("the LIST loop failed")
    print("alone_locks=%d alone_p50_ms=%.2f alone_p99_ms=%.2f listing_locks=%d "
          "listing_p50_ms=%.2f listing_p99_ms=%.2f listing_max_ms=%.2f"
          % (len(alone), pct(alone, 50), pct(alone, 99), len(busy), pct(busy, 50),
             pct(busy, 99), max(busy)))


def main(argv):
    if len(argv) >= 3 and argv[0] == "populate":
        populate(argv[1], int(argv[2]), argv[3] if len(argv) > 3 else "bl/")
        return 0
    if len(argv) >= 4 and argv[0] in ("measure", "loop"):
        c = Conn(argv[1])
        pattern = argv[3]
        limit = int(argv[4]) if len(argv) > 4 else 1000
        times, n, more = [], 0, 0
        if argv[0] == "measure":
            for _ in range(int(argv[2])):
                t, n, more = c.list(pattern, limit)
                times.append(t)
        else:
            end = time.monotonic() + float(argv[2])
            while time.monotonic() < end:
                t, n, more = c.list(pattern, limit)
                times.append(t)
        report(times, n, more)
        return 0
    if len(argv) >= 4 and argv[0] == "contend":
        contend(argv[1], float(argv[2]), argv[3], int(argv[4]) if len(argv) > 4 else 1000)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
