#!/usr/bin/python3
"""dlockd's live board (GET /) rendered by a real headless Chromium.

Starts a private redis-server and dlockd with a metrics listener on a
loopback TCP port, a holder and a waiter of one lock (each a child process
of its own, so their pids differ), then loads http://127.0.0.1:<port>/ in
Debian's chromium --headless, driven over --remote-debugging-pipe (the
Chrome DevTools Protocol, NUL-separated JSON on fds 3 and 4; stdlib only).
It reads the live DOM after the page's script ran, polling: the lock's row,
its holder's pid and the waiter's pid appear; after the holder closes (and
the waiter, granted, closes too), the row and both pids are gone within two
of the page's refreshes (it counts them in body[data-refreshes]). On
failure the page's screenshot, DOM and the logs are kept in
/tmp/dlockd-test-logs (board.png, board.dom.html, board.*.log).
BOARD_SCREENSHOT=<path> saves a screenshot of the board with the lock shown.

    DLOCKD_BIN=$PWD/build/dlockd /usr/bin/python3 tests/metrics/test_board.py
"""
# SPDX-License-Identifier: MIT

import base64
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

DLOCKD = os.environ.get("DLOCKD_BIN", os.path.abspath("build/dlockd"))
CHROMIUM = os.environ.get("CHROMIUM_BIN", "chromium")
KEEP_DIR = "/tmp/dlockd-test-logs"  # where the C harness keeps logs (H_KEEP_DIR)
WAIT_S = 30.0        # generous bound on anything awaited (Chromium starts slowly)
POLL_S = 0.05
NAME = "board/held"

# A client in a child process: LOCK NAME, say the reply on stdout; a holder
# keeps the connection until its stdin closes, a waiter closes it as soon as
# it is granted.
CLIENT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(("LOCK %s\n" % sys.argv[2]).encode())
f = s.makefile("r")
line = f.readline()
while line.startswith("!"):
    line = f.readline()
print(line.strip(), flush=True)
if sys.argv[3] == "hold":
    sys.stdin.read()
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(what, fn, timeout=WAIT_S):
    end = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(POLL_S)


def ask(sock, line):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(WAIT_S)
    s.connect(sock)
    s.sendall((line + "\n").encode())
    reply = s.makefile("r").readline().rstrip("\n")
    s.close()
    return reply


class Browser(object):
    """Headless Chromium over --remote-debugging-pipe, one page attached."""

    def __init__(self, dirname, log):
        to_r, self.to_w = os.pipe()       # our commands: its fd 3
        self.from_r, from_w = os.pipe()   # its replies and events: its fd 4

        def fds():
            os.dup2(to_r, 3)              # inheritable, unlike os.pipe()'s
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-dev-shm-usage",
             "--window-size=1280,800", "--user-data-dir=" + os.path.join(dirname, "chromium"),
             "--remote-debugging-pipe", "about:blank"],
            preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.session = None

    def call(self, method, params=None, timeout=WAIT_S):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if self.session is not None:
            msg["sessionId"] = self.session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                o = json.loads(raw)
                if o.get("id") == self.next_id:
                    if "error" in o:
                        raise AssertionError("%s: %s" % (method, o["error"]))
                    return o["result"]
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.from_r], [], [], left)[0]:
                raise AssertionError("chromium: no answer to " + method)
            chunk = os.read(self.from_r, 1 << 16)
            if not chunk:
                raise AssertionError("chromium closed its pipe (see chromium.log)")
            self.buf += chunk

    def open(self, url):
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            raise AssertionError("page: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def screenshot(self, path):
        png = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(png))

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its renderers and helpers too
        self.proc.wait()
        os.close(self.to_w)
        os.close(self.from_r)


# What the page shows now (also while it loads): refreshes done, the
# status line, and each lock row's cells.
SNAPSHOT = """JSON.stringify({
  refreshes: Number(document.body?.dataset.refreshes || 0),
  status: document.getElementById('status')?.textContent || '',
  rows: [...document.querySelectorAll('#locks tr.lock')].map(r => ({
    name: r.dataset.name,
    cells: [...r.cells].map(c => c.textContent)}))})"""


class BoardTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlockd-board-")
        self.procs = []
        self.files = []
        self.browser = None
        sock = os.path.join(self.dir, "redis.sock")
        self.spawn(["redis-server", "--port", "0", "--unixsocket", sock, "--save", "",
                    "--appendonly", "no"], "redis.log")
        wait_for("redis", lambda: os.path.exists(sock))
        self.port = free_port()
        conf = os.path.join(self.dir, "d.conf")
        with open(conf, "w") as f:
            f.write("[server]\nmetrics = 127.0.0.1:%d\n[redis]\nurl = unix://%s\n"
                    "command_timeout_ms = 1000\nconnect_timeout_ms = 500\n" % (self.port, sock))
        os.chmod(conf, 0o600)
        self.sock = os.path.join(self.dir, "d.sock")
        self.dlockd = self.spawn([DLOCKD, "-c", conf, "-s", self.sock], "dlockd.log")
        wait_for("dlockd's socket", lambda: os.path.exists(self.sock))
        wait_for("redis=up", lambda: " redis=up " in ask(self.sock, "INFO"))

    def tearDown(self):
        if self.browser is not None:
            self.browser.close()
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        # SIGTERM: exit 0 (the sanitized daemon exits otherwise on a report)
        status = self.dlockd.returncode
        for p in self.procs:
            for f in (p.stdin, p.stdout):
                if f is not None:
                    f.close()
        for f in self.files:
            f.close()
        if status != 0:
            os.makedirs(KEEP_DIR, exist_ok=True)
            shutil.copy(os.path.join(self.dir, "dlockd.log"),
                        os.path.join(KEEP_DIR, "board.dlockd.log"))
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(status, 0, "dlockd exited %s (log kept in %s/board.dlockd.log)" %
                         (status, KEEP_DIR))

    def spawn(self, argv, log, **kw):
        f = open(os.path.join(self.dir, log), "w")
        self.files.append(f)
        p = subprocess.Popen(argv, stdout=kw.pop("stdout", f), stderr=f, cwd=self.dir, **kw)
        self.procs.append(p)
        return p

    def client(self, mode, log):
        return self.spawn([sys.executable, "-c", CLIENT, self.sock, NAME, mode], log,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def keep(self, why):
        """Keeps the screenshot, the DOM and the logs for a failed test."""
        os.makedirs(KEEP_DIR, exist_ok=True)
        try:
            self.browser.screenshot(os.path.join(KEEP_DIR, "board.png"))
            with open(os.path.join(KEEP_DIR, "board.dom.html"), "w") as f:
                f.write(self.browser.eval("document.documentElement.outerHTML"))
        except Exception as e:  # the browser may be what failed
            why += " (no screenshot: %s)" % e
        for log in ("dlockd.log", "chromium.log"):
            shutil.copy(os.path.join(self.dir, log), os.path.join(KEEP_DIR, "board." + log))
        self.fail(why + "; kept in %s: board.png, board.dom.html, board.*.log" % KEEP_DIR)

    def snapshot(self):
        return json.loads(self.browser.eval(SNAPSHOT))

    def test_board_shows_holder_and_waiter_then_forgets_them(self):
        holder = self.client("hold", "holder.log")
        self.assertTrue(holder.stdout.readline().startswith("OK "))
        waiter = self.client("wait", "waiter.log")
        wait_for("the waiter queued", lambda: " waiters=1 " in ask(self.sock, "INFO"))

        log = open(os.path.join(self.dir, "chromium.log"), "w")
        self.files.append(log)
        self.browser = Browser(self.dir, log)
        url = "http://127.0.0.1:%d/" % self.port
        t0 = time.monotonic()
        self.browser.open(url)

        def shown():
            s = self.snapshot()
            rows = [r for r in s["rows"] if r["name"] == NAME]
            return (s, rows[0]["cells"]) if rows else None

        try:
            s, cells = wait_for("%s's row on the board" % NAME, shown)
        except AssertionError as e:
            self.keep(str(e))
        took = time.monotonic() - t0
        # name, kind, holder, pid, uid, age / ttl, fence, waiters
        if not (cells[0] == NAME and cells[1] == "lock" and cells[3] == str(holder.pid) and
                cells[4] == str(os.getuid()) and cells[5].startswith("held ") and
                cells[7] == "1: pid %d" % waiter.pid):
            self.keep("row %s: wanted holder pid %d, a waiter pid %d" %
                      (cells, holder.pid, waiter.pid))
        if os.environ.get("BOARD_SCREENSHOT"):  # a picture of the board, for the docs
            self.browser.screenshot(os.environ["BOARD_SCREENSHOT"])
        print("board: row shown %.2f s after loading %s (refreshes %d): %s" %
              (took, url, s["refreshes"], cells))
        # The age counts up between two renders without a new fetch.
        age = float(cells[5].split()[1])

        def older():
            now = shown()
            return now is not None and now[1][5].startswith("held ") and \
                float(now[1][5].split()[1]) > age

        wait_for("the age to count up", older)

        # The holder closes; the waiter is granted and closes in turn.
        before = self.snapshot()["refreshes"]
        holder.stdin.close()
        holder.wait(WAIT_S)
        self.assertTrue(waiter.stdout.readline().startswith("OK "))
        waiter.wait(WAIT_S)
        gone_pids = (str(holder.pid), "pid %d" % waiter.pid)

        def gone():
            s = self.snapshot()
            text = json.dumps(s["rows"])
            if s["refreshes"] > before + 2:
                return "late"
            if all(r["name"] != NAME for r in s["rows"]) and not any(p in text for p in gone_pids):
                return s
            return None

        try:
            s = wait_for("the row to go", gone)
        except AssertionError as e:
            self.keep(str(e))
        if s == "late":
            self.keep("%s still shown after two refreshes: %s" % (NAME, self.snapshot()))
        print("board: gone after %d refresh(es); status '%s'" %
              (s["refreshes"] - before, s["status"]))


if __name__ == "__main__":
    if shutil.which(CHROMIUM) is None:
        print("test_board: %s not found (make deps installs chromium)" % CHROMIUM)
        sys.exit(1)
    unittest.main(verbosity=2)
