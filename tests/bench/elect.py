#!/usr/bin/env python3
"""make bench, section 13: an election's hand-over time when its leader's connection closes.

    python3 tests/bench/elect.py SOCK_A SOCK_B REDIS_SOCK [ROUNDS] [PREFIX]

Two dlockd (A and B) on one Redis. Each round: a leader on A; the next
candidate waits (its ELECT queued, INFO candidates=1 on its daemon, its
daemon subscribed to the name's channel: PUBSUB NUMSUB), on A in the
same-daemon rounds and on B in the others; an observer on B (OBSERVE) has
been told the leader. The clock (CLOCK_MONOTONIC) starts just before the
leader's close() and stops when the candidate's OK is read, and when the
observer's !LEADER naming the new fence is read. Prints one line of
key=value: p50/p99 in microseconds of each, and the rounds.
"""
# SPDX-License-Identifier: MIT

import socket
import sys
import time


class Conn(object):
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(10.0)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def send(self, line):
        self.s.sendall((line + "\n").encode())

    def line(self):
        r = self.f.readline()
        if not r:
            raise EOFError("connection closed")
        return r.decode().strip()

    def req(self, line):
        self.send(line)
        return self.line()

    def close(self):
        self.f.close()
        self.s.close()


def info(c, key):
    for kv in c.req("INFO").split():
        if kv.startswith(key + "="):
            return int(kv.split("=", 1)[1])
    raise RuntimeError("INFO has no %s" % key)


def numsub(rsock, channel):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(rsock)
    cmd = "*3\r\n$6\r\nPUBSUB\r\n$6\r\nNUMSUB\r\n$%d\r\n%s\r\n" % (len(channel), channel)
    s.sendall(cmd.encode())
    data = b""
    while data.count(b"\r\n") < 4:
        data += s.recv(4096)
    s.close()
    return int(data.split(b"\r\n")[3][1:])


def wait_until(fn, what, timeout=10.0):
    end = time.monotonic() + timeout
    while not fn():
        if time.monotonic() > end:
            raise RuntimeError("timed out waiting for %s" % what)
        time.sleep(0.0005)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100.0))]


def main():
    a, b, rsock = sys.argv[1], sys.argv[2], sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    prefix = sys.argv[5] if len(sys.argv) > 5 else "dlock:"
    name = "bench-election"
    channel = "redisson_lock__channel:{%s%s}" % (prefix, name)
    adm = {a: Conn(a), b: Conn(b)}
    obs = Conn(b)
    first = obs.req("OBSERVE %s" % name)
    if not first.startswith("OK"):
        raise RuntimeError("OBSERVE: %s" % first)
    same, other, told = [], [], []
    leader = Conn(a)
    r = leader.req("ELECT %s L0" % name)
    if not r.startswith("OK "):
        raise RuntimeError("ELECT: %s" % r)
    for i in range(rounds):
        where = a if i % 2 == 0 else b
        cand = Conn(where)
        cand.send("ELECT %s c%d" % (name, i))
        wait_until(lambda: info(adm[where], "candidates") == 1, "the candidate queued")
        wait_until(lambda: numsub(rsock, channel) >= (2 if where == a else 1),
                   "the channel subscribed")
        # the observer has been told the current leader
        t0 = time.monotonic()
        leader.close()
        r = cand.line()
        t1 = time.monotonic()
        if not r.startswith("OK "):
            raise RuntimeError("ELECT: %s" % r)
        fence = r.split()[1]
        while True:
            ev = obs.line().split()
            if len(ev) >= 3 and ev[0] == "!LEADER" and ev[2] == fence:
                break
        t2 = time.monotonic()
        (same if where == a else other).append((t1 - t0) * 1e6)
        if where == b:
            told.append((t2 - t0) * 1e6)
        # the new leader is the next round's, on A: move it there
        if where == b:
            cand2 = Conn(a)
            cand2.send("ELECT %s m%d" % (name, i))
            wait_until(lambda: info(adm[a], "candidates") == 1, "the move queued")
            cand.close()
            r = cand2.line()
            fence = r.split()[1]
            while True:
                ev = obs.line().split()
                if len(ev) >= 3 and ev[0] == "!LEADER" and ev[2] == fence:
                    break
            cand = cand2
        leader = cand
    leader.close()
    print("rounds=%d same_p50_us=%.0f same_p99_us=%.0f other_p50_us=%.0f other_p99_us=%.0f "
          "observer_p50_us=%.0f observer_p99_us=%.0f"
          % (rounds, pct(same, 50), pct(same, 99), pct(other, 50), pct(other, 99),
             pct(told, 50), pct(told, 99)))


if __name__ == "__main__":
    main()
