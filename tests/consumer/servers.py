"""What the consumer tests share: a private redis-server and dlockd on Unix
sockets in a directory of their own, and running one step of a README.

Imported by tests/consumer/go.py and node.py.
"""
# SPDX-License-Identifier: MIT

import os
import signal
import socket
import subprocess
import time

START_TIMEOUT = 15.0   # seconds for redis-server and dlockd to come up
STEP_TIMEOUT = 180     # seconds for one command (go, npm, tsc, a consumer)
POLL_INTERVAL = 0.02   # seconds between readiness checks


class Failed(Exception):
    pass


def run(what, argv, cwd, env, timeout=STEP_TIMEOUT):
    """Runs argv; its output, or Failed naming what with the output."""
    try:
        p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode("utf-8", "replace")
        raise Failed("%s: no end within %d s\n%s" % (what, timeout, out))
    out = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        raise Failed("%s: exit status %d\n%s" % (what, p.returncode, out))
    return out


def _pdeathsig():
    # Linux: the child dies with us even if we are killed.
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Servers:
    """A private redis-server and dlockd on Unix sockets in directory d."""

    def __init__(self, d, dlockd):
        self.dir = d
        self.procs = []
        self.sock = os.path.join(d, "d.sock")
        rsock = os.path.join(d, "redis.sock")
        conf = os.path.join(d, "dlockd.conf")
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n[redis]\nurl = unix://%s\n" % (self.sock, rsock))
        os.chmod(conf, 0o600)  # dlockd refuses, as root, a file others can write
        try:
            self.spawn(["redis-server", "--port", "0", "--unixsocket", rsock, "--save", "",
                        "--appendonly", "no", "--dir", d], "redis.log")
            self.spawn([dlockd, "-c", conf], "dlockd.log")
        except OSError as e:
            self.close()
            raise Failed("cannot start %s: %s" % (e.filename, e.strerror))

    def spawn(self, argv, logname):
        log = open(os.path.join(self.dir, logname), "wb")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=self.dir, preexec_fn=_pdeathsig)
        finally:
            log.close()
        self.procs.append((p, logname))

    def logs(self):
        out = []
        for _, logname in self.procs:
            try:
                with open(os.path.join(self.dir, logname), "rb") as f:
                    out.append("--- %s ---\n%s" % (logname, f.read().decode("utf-8", "replace")))
            except OSError:
                pass
        return "\n".join(out)

    def wait_ready(self):
        """Until INFO says redis=up."""
        deadline = time.monotonic() + START_TIMEOUT
        last = None
        while time.monotonic() < deadline:
            for p, logname in self.procs:
                if p.poll() is not None:
                    raise Failed("%s exited with %s\n%s" % (logname, p.returncode, self.logs()))
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(5)
                    s.connect(self.sock)
                    s.sendall(b"INFO\n")
                    last = s.makefile("rb").readline().decode("utf-8", "replace")
                    if " redis=up" in last:
                        return
            except OSError as e:
                last = e
            time.sleep(POLL_INTERVAL)
        raise Failed("dlockd not ready within %ss (%s)\n%s" % (START_TIMEOUT, last, self.logs()))

    def close(self):
        for p, _ in reversed(self.procs):        # dlockd first, then redis
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
