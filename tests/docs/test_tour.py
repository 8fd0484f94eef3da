#!/usr/bin/env python3
"""Replays the README's socat tour against a live dlockd and checks each reply's shape.

Run: DLOCKD_BIN=$PWD/build/dlockd python3 tests/docs/test_tour.py

The tour is the fenced block whose first line is TOUR_FIRST_LINE. It is looked
for in README.md first, then in every other tracked Markdown file (so that it
may move); every block found is replayed. After that line, a line starting with
OK, ERR, TIMEOUT or ! is what the daemon sends (a reply, or an event); any other
line is a request. The requests go, one at a time, over one connection to a
private dlockd (on a private redis-server, both on Unix sockets in a temporary
directory); each line the daemon sends must have the shape of the one shown:
the same words, except that a number shown matches any number (also inside a
word: uptime_s=12 matches uptime_s=0), and a last word ... (or the ellipsis
character) matches any rest of the line. QUIT's reply must be the last line,
after which the daemon closes the connection. Exits 1 on a mismatch, naming the
file, the line and both replies.
"""
# SPDX-License-Identifier: MIT

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TOUR_FIRST_LINE = "$ socat - UNIX-CONNECT:run/dlockd.sock"
SENT_PREFIXES = ("OK", "ERR", "TIMEOUT", "!")
ELLIPSES = ("\u2026", "...")
START_TIMEOUT = 15.0     # seconds for redis-server and dlockd to come up
REPLY_TIMEOUT = 5.0      # seconds to wait for one line from dlockd
POLL_INTERVAL = 0.02     # seconds between readiness checks


class TourError(Exception):
    pass


# ---- finding the tour ------------------------------------------------------

def markdown_files():
    """README.md first, then the other tracked Markdown files."""
    try:
        out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = []
        for d, dirs, files in os.walk(ROOT):
            dirs[:] = [x for x in dirs if not x.startswith(".") and x != "build"]
            out += [os.path.relpath(os.path.join(d, f), ROOT) for f in files if f.endswith(".md")]
    return sorted(out, key=lambda p: (p != "README.md", p))


def find_tours(path):
    """Each tour in path: a list of (line number, text) after its first line."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    tours, i = [], 0
    while i < len(lines):
        fence = re.match(r"^ {0,3}(`{3,}|~{3,})", lines[i])
        if not fence:
            i += 1
            continue
        close = fence.group(1)[0] * len(fence.group(1))
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(close):
            j += 1
        if i + 1 < j and lines[i + 1].strip() == TOUR_FIRST_LINE:
            tours.append([(n + 1, lines[n]) for n in range(i + 2, j) if lines[n].strip()])
        i = j + 1
    return tours


def steps_of(path, tour):
    """[(line number, request, [(line number, shown line), ...])]: what each request gets."""
    steps = []
    for lineno, text in tour:
        text = text.strip()
        if text.startswith(SENT_PREFIXES):
            if not steps:
                raise TourError("%s:%d: %r comes before any request" % (path, lineno, text))
            steps[-1][2].append((lineno, text))
        else:
            steps.append((lineno, text, []))
    for lineno, req, shown in steps:
        if not shown or shown[-1][1].startswith("!"):
            raise TourError("%s:%d: request %r shows no reply" % (path, lineno, req))
        if any(not s.startswith("!") for _, s in shown[:-1]):
            raise TourError("%s:%d: request %r shows two replies" % (path, lineno, req))
    if not steps or steps[-1][1] != "QUIT":
        raise TourError("%s: the tour does not end with QUIT and its reply" % path)
    return steps


# ---- matching a reply's shape -------------------------------------------------

def word_pattern(word):
    """A shown word as a regex: each run of digits matches any number."""
    return "".join(r"\d+" if part.isdigit() else re.escape(part)
                   for part in re.split(r"(\d+)", word) if part)


def shape_matches(shown, got):
    words = shown.split()
    rest = False
    if words and words[-1] in ELLIPSES:
        words, rest = words[:-1], True
    pattern = r"\s+".join(word_pattern(w) for w in words)
    pattern += r"(\s.*)?" if rest else ""
    return re.fullmatch(pattern, got.strip()) is not None


# ---- the servers ---------------------------------------------------------------

def _pdeathsig():
    # Linux: the child dies with us even if we are killed.
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Servers:
    """A private redis-server and dlockd on Unix sockets in a temporary directory."""

    def __init__(self, dlockd):
        self.tmp = tempfile.mkdtemp(prefix="dlock-docs-")
        self.procs = []
        self.sock = os.path.join(self.tmp, "d.sock")
        rsock = os.path.join(self.tmp, "redis.sock")
        conf = os.path.join(self.tmp, "dlockd.conf")
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n[redis]\nurl = unix://%s\n" % (self.sock, rsock))
        os.chmod(conf, 0o600)  # dlockd refuses, as root, a file others can write
        try:
            self.spawn(["redis-server", "--port", "0", "--unixsocket", rsock, "--save", "",
                        "--appendonly", "no", "--dir", self.tmp], "redis.log")
            self.spawn([dlockd, "-c", conf], "dlockd.log")
        except OSError as e:
            self.close()
            raise TourError("cannot start %s: %s" % (e.filename, e.strerror))

    def spawn(self, argv, logname):
        log = open(os.path.join(self.tmp, logname), "wb")
        kw = {"preexec_fn": _pdeathsig} if sys.platform.startswith("linux") else {}
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=self.tmp, **kw)
        finally:
            log.close()
        self.procs.append((p, logname))

    def logs(self):
        out = []
        for _, logname in self.procs:
            try:
                with open(os.path.join(self.tmp, logname), "rb") as f:
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
                    raise TourError("%s exited with %s\n%s" % (logname, p.returncode,
                                                                self.logs()))
            try:
                with Conn(self.sock) as c:
                    last = c.request("INFO")
                    if " redis=up" in last:
                        return
            except (OSError, TourError) as e:
                last = e
            time.sleep(POLL_INTERVAL)
        raise TourError("dlockd not ready within %ss (%s)\n%s" % (START_TIMEOUT, last,
                                                                 self.logs()))

    def close(self):
        for p, _ in reversed(self.procs):        # dlockd first, then redis
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Conn:
    """One connection to dlockd, read a line at a time."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(REPLY_TIMEOUT)
        self.s.connect(path)
        self.buf = b""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.s.close()

    def send(self, line):
        self.s.sendall(line.encode() + b"\n")

    def line(self):
        """The next line, or None at end of stream."""
        while b"\n" not in self.buf:
            try:
                chunk = self.s.recv(4096)
            except socket.timeout:
                raise TourError("no line from dlockd within %ss" % REPLY_TIMEOUT)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("utf-8", "replace").rstrip("\r")

    def request(self, line):
        self.send(line)
        return self.line()


# ---- the replay ----------------------------------------------------------------------

def replay(path, steps, sock):
    with Conn(sock) as c:
        for lineno, req, shown in steps:
            print("  > %s" % req)
            c.send(req)
            for shown_lineno, want in shown:
                got = c.line()
                print("  < %s" % got)
                if got is None:
                    raise TourError("%s:%d: %r: dlockd closed the connection, the tour shows "
                                    "%r" % (path, shown_lineno, req, want))
                if not shape_matches(want, got):
                    raise TourError("%s:%d: %r: dlockd answered\n    %s\nthe tour shows\n    %s"
                                    % (path, shown_lineno, req, got, want))
        extra = c.line()
        if extra is not None:
            raise TourError("%s: after QUIT's reply dlockd sent %r and did not close the "
                            "connection" % (path, extra))


def main():
    dlockd = os.path.abspath(os.environ.get("DLOCKD_BIN") or os.path.join(ROOT, "build", "dlockd"))
    if not os.access(dlockd, os.X_OK):
        print("test_tour: dlockd binary %s not found; run `make build/dlockd` or set DLOCKD_BIN"
              % dlockd, file=sys.stderr)
        return 1
    if shutil.which("redis-server") is None:
        print("test_tour: redis-server not found in PATH", file=sys.stderr)
        return 1
    tours = [(p, t) for p in markdown_files() for t in find_tours(p)]
    if not tours:
        print("test_tour: no Markdown file has a fenced block starting with %r (README.md "
              "should)" % TOUR_FIRST_LINE, file=sys.stderr)
        return 1
    servers = None
    try:
        parsed = [(p, steps_of(p, t)) for p, t in tours]
        servers = Servers(dlockd)
        servers.wait_ready()
        for path, steps in parsed:
            print("%s: replaying the socat tour (%d requests)" % (path, len(steps)))
            replay(path, steps, servers.sock)
    except TourError as e:
        print("test_tour: FAIL: %s" % e, file=sys.stderr)
        return 1
    finally:
        if servers is not None:
            servers.close()
    print("test_tour: ok, %d tour(s) replayed" % len(parsed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
