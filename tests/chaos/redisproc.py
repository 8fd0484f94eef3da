"""What the chaos suite's private Redis topologies share (sentinel.py,
cluster.py, and chaos.py itself): a blocking RESP2 client, free TCP ports of
127.0.0.1, and child processes that die with the orchestrator.

    r = call(port, "CLUSTER", "INFO")          # one command, fresh connection
    inf = info(port, "replication")            # INFO as a dict
    ports = free_ports(6)
    spawn = Spawner(tmpdir); p = spawn(argv, "x.log"); spawn.stop()
    stop_procs([p, ...])                       # SIGCONT + SIGKILL + reap
    running(p)                                 # alive, neither stopped nor a zombie

Standard library only.
"""
# SPDX-License-Identifier: MIT

import os
import signal
import socket
import subprocess
import time


# ---- RESP ----------------------------------------------------------------------

class RespError(Exception):
    pass


class Resp(object):
    """One blocking RESP2 connection to 127.0.0.1:port."""

    def __init__(self, port, timeout=2.0, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def send(self, *args):
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(req)

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            d = self.sock.recv(65536)
            if not d:
                raise OSError("redis closed the connection")
            self.buf += d

    def _exact(self, n):
        while len(self.buf) < n + 2:
            d = self.sock.recv(65536)
            if not d:
                raise OSError("redis closed the connection")
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n + 2:]
        return out

    def read(self):
        """One reply: str, int, None, list, or RespError (returned, not raised)."""
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RespError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode("utf-8", "replace")
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise OSError("bad RESP line %r" % line)

    def call(self, *args):
        self.send(*args)
        r = self.read()
        if isinstance(r, RespError):
            raise r
        return r


def call(port, *args, timeout=1.0):
    """One command on a fresh connection."""
    with Resp(port, timeout) as r:
        return r.call(*args)


def info(port, section="replication", timeout=1.0):
    """INFO as a dict."""
    out = {}
    for line in call(port, "INFO", section, timeout=timeout).splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def free_ports(n):
    """n distinct free TCP ports on 127.0.0.1 (held open together, so distinct)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# ---- processes -------------------------------------------------------------------

def pdeathsig():
    """preexec_fn: the child dies with the orchestrator, even if it is
    SIGKILLed (PDEATHSIG follows the thread that forked: spawn from the
    main thread)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() == 1:
        os._exit(1)


def stop_procs(procs, wait_s=5):
    """SIGCONT (a stopped process must be able to die) and SIGKILL every
    process still running, latest first, then reaps them all."""
    for p in reversed(procs):
        if p is not None and p.poll() is None:
            try:
                p.send_signal(signal.SIGCONT)
                p.kill()
            except OSError:
                pass
    for p in procs:
        if p is None:
            continue
        try:
            p.wait(wait_s)
        except Exception:
            pass


def running(p):
    """True if Popen p runs and is neither stopped (SIGSTOP) nor a zombie."""
    if p is None or p.poll() is not None:
        return False
    try:
        with open("/proc/%d/stat" % p.pid) as f:
            stat = f.read()
    except OSError:
        return False
    rest = stat[stat.rfind(")") + 1:].split()      # "pid (comm) S ..."
    return not rest or rest[0] not in ("T", "t", "Z", "X")


class Spawner(object):
    """A spawn(argv, logname, env=None) whose children die with this process,
    log to <tmp>/<logname> (appended) and run in tmp; stop() ends them."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def __call__(self, argv, logname, env=None):
        log = open(os.path.join(self.tmp, logname), "ab")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=self.tmp, env=env,
                                 preexec_fn=pdeathsig, close_fds=True)
        finally:
            log.close()
        p.logname = logname
        self.procs.append(p)
        return p

    def stop(self):
        stop_procs(self.procs)


class NodeSignals(object):
    """Faults for a topology that keeps its redis-servers in self.nodes, a
    dict per node with its process under "proc". Each returns the time
    (time.monotonic()) the signal went."""

    def kill(self, i):
        """SIGKILL node i (SIGCONT first, should it be stopped). The process
        is reaped: its port is free."""
        p = self.nodes[i]["proc"]
        t = time.monotonic()
        p.send_signal(signal.SIGCONT)
        p.kill()
        p.wait()
        return t

    def pause(self, i):
        t = time.monotonic()
        self.nodes[i]["proc"].send_signal(signal.SIGSTOP)
        return t

    def resume(self, i):
        t = time.monotonic()
        self.nodes[i]["proc"].send_signal(signal.SIGCONT)
        return t
