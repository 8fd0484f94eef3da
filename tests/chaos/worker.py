#!/usr/bin/env python3
"""One chaos worker: LOCK, read the fenced counter, sleep 1-5 ms, write
counter+1 with the fence, UNLOCK; forever, reconnecting after any trouble.

    worker.py <wid> <inc> <daemon> <dlockd-socket> <store-socket> <lease_ms> <seed> [<name>]

lease_ms 0 is watchdog mode; the lock is "chaos" unless <name> says otherwise
(the cluster stage has a fenced store per name). The worker reports each
grant to the store with its first read, and the end of each critical section
(the moment before UNLOCK is sent) with the outcome of the UNLOCK and the
moment its reply came. It deliberately does not check for a loss before
writing: a stale write must be stopped by the fence.
After a loss, ERR BACKEND or a broken connection it reconnects and goes on.
"""
# SPDX-License-Identifier: MIT

import os
import random
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

import dlock  # noqa: E402

LOCK_NAME = "chaos"
RETRY_S = 0.02        # back-off after a failed connect or ERR BACKEND


class Store(object):
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.buf = b""

    def call(self, line):
        self.sock.sendall(line.encode("ascii") + b"\n")
        while True:
            i = self.buf.find(b"\n")
            if i >= 0:
                out, self.buf = self.buf[:i], self.buf[i + 1:]
                return out.decode("ascii")
            data = self.sock.recv(4096)
            if not data:
                raise SystemExit(0)      # the orchestrator is gone
            self.buf += data


def main():
    wid, inc, daemon = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    dsock, spath = sys.argv[4], sys.argv[5]
    lease_ms, seed = int(sys.argv[6]), int(sys.argv[7])
    name = sys.argv[8] if len(sys.argv) > 8 else LOCK_NAME
    rnd = random.Random(seed)
    st = Store(spath)
    st.call("H %d %d %d %d" % (wid, inc, os.getpid(), daemon))

    def note(kind):
        st.call("N %d %d %s %r" % (wid, inc, kind, time.monotonic()))

    client = None
    it = 0
    while True:
        if client is None:
            try:
                client = dlock.Client(dsock, timeout=10.0)
            except dlock.ConnectFailed:
                note("connect_failed")
                time.sleep(RETRY_S)
                continue
        t_req = time.monotonic()
        try:
            fence, holds = client.lock(name, lease_ms)
        except (dlock.DlockError, OSError) as e:
            # ERR BACKEND, a late !LOST, a broken connection: start over on
            # a new connection.
            note("lock_backend_error" if isinstance(e, dlock.BackendError) else
                 "late_lost" if isinstance(e, dlock.LockLost) else "lock_conn_error")
            client.close()
            client = None
            time.sleep(RETRY_S)
            continue
        t_grant = time.monotonic()
        it += 1
        if holds != 1:
            note("reentrant_grant")
        r = st.call("R %d %d %d %d %d %r %r" % (wid, inc, it, daemon, fence, t_grant, t_req))
        stop = r == "Q"
        if not stop:
            value = int(r.split()[1])
            time.sleep(rnd.uniform(0.001, 0.005))
            st.call("W %d %d %d %d %d %d" % (wid, inc, it, fence, value, value + 1))
        t_end = time.monotonic()
        try:
            left = client.unlock(name)
            outcome = "ok" if left == 0 else "holds_left_%d" % left
        except dlock.LockLost as e:
            outcome = "lost:" + e.reason
        except dlock.NotHeld:
            outcome = "notheld"
        except dlock.BackendError:
            outcome = "backend"
        except (dlock.DlockError, OSError):
            outcome = "closed"
        t_done = time.monotonic()
        if outcome != "ok":
            client.close()        # reconnect after any trouble
            client = None
        st.call("E %d %d %d %r %s %r" % (wid, inc, it, t_end, outcome, t_done))
        if stop:
            if client is not None:
                client.close()
            return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (KeyboardInterrupt, BrokenPipeError, ConnectionResetError):
        sys.exit(0)
