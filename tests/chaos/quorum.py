"""Independent Redis primaries for the chaos suite's quorum stage (dlockd's
`quorum = URL ...`, Redlock): N plain redis-servers on TCP ports of
127.0.0.1, no replication, no persistence (--save "", appendonly no), each
in its own directory and log.

    q = Quorum(tmpdir, n=5, spawn=..., say=...)
    q.start()                        # returns when every node answers PING
    q.urls()                         # "redis://127.0.0.1:P1 ...", for quorum =
    t = q.kill(i)                    # SIGKILL node i (q.pause(i)/q.resume(i): SIGSTOP/SIGCONT)
    t = q.restart(i)                 # same port, empty: it answers PING again
    q.label(i)                       # "127.0.0.1:P", as dlockd's INFO redis_down names it
    q.holding(key)                   # the nodes on which lock key has its holder's field
    q.pttl(i, key)                   # node i's PTTL of key

A restarted node is empty and has a new run_id and uptime 0: dlockd lets it
count toward a majority only rejoin_delay_ms later, which the suite reads from
INFO redis_nodes_up (polled with a deadline: nothing announces it).

Standard library only (and redisproc.py). Times are time.monotonic().
"""
# SPDX-License-Identifier: MIT

import os
import selectors
import shutil
import socket
import threading
import time

from redisproc import NodeSignals, RespError, Spawner, call, free_ports, running, stop_procs

START_TIMEOUT = 10.0
POLL_S = 0.01


class QuorumError(RuntimeError):
    pass


class Quorum(NodeSignals):
    def __init__(self, tmp, n=5, spawn=None, say=None):
        self.tmp = tmp
        self.n = n
        self.own_spawner = None
        if spawn is None:
            spawn = self.own_spawner = Spawner(tmp)
        self.spawn = spawn
        self.say = say or (lambda text: None)
        self.redis_bin = shutil.which("redis-server")
        self.nodes = []           # dict(port, proc, dir, starts)

    # -- addresses --

    def urls(self):
        return " ".join("redis://127.0.0.1:%d" % x["port"] for x in self.nodes)

    def label(self, i):
        return "127.0.0.1:%d" % self.nodes[i]["port"]

    def port(self, i):
        return self.nodes[i]["port"]

    # -- processes --

    def _start_node(self, i):
        x = self.nodes[i]
        argv = [self.redis_bin, "--port", str(x["port"]), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", x["dir"], "--logfile", ""]
        x["proc"] = self.spawn(argv, "quorum-%d.log" % x["port"])
        x["starts"] += 1
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if call(x["port"], "PING", timeout=0.5) == "PONG":
                    return time.monotonic()
            except (OSError, RespError):
                pass
            if x["proc"].poll() is not None or time.monotonic() > deadline:
                raise QuorumError("redis-server %d (port %d) did not start (rc %s); see %s"
                                  % (i, x["port"], x["proc"].poll(),
                                     os.path.join(self.tmp, "quorum-%d.log" % x["port"])))
            time.sleep(POLL_S)

    def start(self):
        if self.redis_bin is None:
            raise QuorumError("redis-server not found in PATH")
        t0 = time.monotonic()
        for i, port in enumerate(free_ports(self.n)):
            d = os.path.join(self.tmp, "quorum-%d" % port)
            os.makedirs(d, exist_ok=True)
            self.nodes.append(dict(port=port, proc=None, dir=d, starts=0))
        for i in range(self.n):
            self._start_node(i)
        self.say("%d independent redis-servers up in %.1f s: %s"
                 % (self.n, time.monotonic() - t0,
                    " ".join(":%d" % x["port"] for x in self.nodes)))
        return time.monotonic()

    def stop(self):
        if self.own_spawner is not None:
            self.own_spawner.stop()
        else:
            stop_procs([x["proc"] for x in self.nodes])

    def restart(self, i):
        """Node i again on its port, empty; returns when it answers PING."""
        return self._start_node(i)

    def running(self, i):
        return running(self.nodes[i]["proc"])

    # -- what the nodes hold --

    def holding(self, key, majority=None, timeout=0.5):
        """The indexes of the running nodes on which the lock hash key has
        the field of its holder: the owner field present on a majority (by
        default n/2 + 1) of the nodes. Fields of a contender's attempt (on
        a few nodes, until it is undone) do not count. [] if no field is on
        a majority."""
        majority = majority or self.n // 2 + 1
        where = {}
        for i, x in enumerate(self.nodes):
            if not self.running(i):
                continue
            try:
                fields = call(x["port"], "HKEYS", key, timeout=timeout) or []
            except (OSError, RespError):
                continue
            for f in fields:
                where.setdefault(f, []).append(i)
        best = max(where.values(), key=len) if where else []
        return best if len(best) >= majority else []

    def pttl(self, i, key, timeout=0.5):
        """Node i's PTTL of key (ms; -2 absent, -1 no expiry), None if it
        does not answer."""
        try:
            v = call(self.nodes[i]["port"], "PTTL", key, timeout=timeout)
        except (OSError, RespError):
            return None
        return v if isinstance(v, int) else None


# ---- raw dlockd connections, timed ---------------------------------------------------

class Lines(object):
    """Raw dlockd connections read by one thread, every line timestamped
    when select() said it came: events (!LOST) and replies of different
    connections are ordered by their arrival, and lines read in the same
    select() round share a round number (their order is then unknown).

    lp = Lines(); c = lp.connect(path); c.send("LOCK x")
    t, rnd, line = c.wait(lambda l: l.startswith("OK"), timeout)
    lp.close()
    """

    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.cond = threading.Condition()
        self.closed = False
        self.rnd = 0
        self.r, self.w = os.pipe()             # wakes the thread for (un)registering
        self.sel.register(self.r, 1, None)
        self.thread = threading.Thread(target=self._run, name="quorum-lines", daemon=True)
        self.thread.start()

    def connect(self, path, timeout=5.0):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(path)
        s.setblocking(False)
        c = LineConn(self, s)
        with self.cond:
            self.sel.register(s, 1, c)
        os.write(self.w, b"x")
        return c

    def _run(self):
        while not self.closed:
            try:
                events = self.sel.select(0.5)
            except (OSError, ValueError):
                return
            t = time.monotonic()
            with self.cond:
                self.rnd += 1
                for key, _ in events:
                    if key.data is None:
                        try:
                            os.read(self.r, 4096)
                        except OSError:
                            pass
                        continue
                    key.data._readable(t, self.rnd)
                self.cond.notify_all()

    def close(self):
        self.closed = True
        os.write(self.w, b"x")
        self.thread.join(2)
        with self.cond:
            for key in list(self.sel.get_map().values()):
                if key.data is not None:
                    key.data._close()
        try:
            self.sel.close()
        except OSError:
            pass
        for fd in (self.r, self.w):
            try:
                os.close(fd)
            except OSError:
                pass


class LineConn(object):
    def __init__(self, lp, sock):
        self.lp = lp
        self.sock = sock
        self.buf = b""
        self.lines = []           # (t, round, line)
        self.eof = None           # time of the end of stream
        self.pos = 0              # wait() looks from here on

    def _readable(self, t, rnd):
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.eof = t
            try:
                self.lp.sel.unregister(self.sock)
            except (KeyError, ValueError):
                pass
            return
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            self.lines.append((t, rnd, line.decode("latin-1").rstrip("\r")))

    def send(self, line):
        """Sends one request; returns the time it was sent."""
        t = time.monotonic()
        self.sock.setblocking(True)
        try:
            self.sock.sendall(line.encode("ascii") + b"\n")
        finally:
            self.sock.setblocking(False)
        return t

    def wait(self, pred, timeout, since_start=False):
        """The first line (t, round, line) satisfying pred, from the last one
        wait() returned on (or from the first, with since_start), or None
        after timeout seconds (or at the end of the stream)."""
        deadline = time.monotonic() + timeout
        with self.lp.cond:
            i = 0 if since_start else self.pos
            while True:
                while i < len(self.lines):
                    if pred(self.lines[i][2]):
                        if not since_start:
                            self.pos = i + 1
                        return self.lines[i]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or self.eof is not None:
                    return None
                self.lp.cond.wait(left)

    def _close(self):
        try:
            self.lp.sel.unregister(self.sock)
        except (KeyError, ValueError):
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def close(self):
        with self.lp.cond:
            self._close()
