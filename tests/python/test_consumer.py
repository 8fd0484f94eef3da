#!/usr/bin/env python3
"""A throwaway project installs the Python clients as clients/python/README.md says, then locks.

Run: DLOCKD_BIN=$PWD/build/dlockd python3 tests/python/test_consumer.py

The README's install block is the first fenced sh block under "## Install".
Its `sudo apt install` line must be satisfied already (`make deps` installs
those packages: this test installs nothing system-wide); every other line
runs with sh in a temporary directory outside the repository, with
/path/to/dlockd as this checkout, Debian's python3 first in PATH and pip's
index an address nothing listens on, so that any download fails: the
install must work offline. Then a program there, run by the venv's python
with nothing of the repository on its path, locks and unlocks with dlock
and with dlock_asyncio against a private dlockd (on a private
redis-server, both on Unix sockets in the directory, stopped at the end).
Exits 1 naming the step that failed and its output.
"""
# SPDX-License-Identifier: MIT

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
README = os.path.join(ROOT, "clients", "python", "README.md")
README_ROOT = "/path/to/dlockd"     # the README's name for the checkout
DEAD_INDEX = "http://127.0.0.1:9/simple"    # the discard port: nothing answers
START_TIMEOUT = 15.0    # seconds for redis-server and dlockd to come up
STEP_TIMEOUT = 300.0    # seconds for one install line (a busy 2-core machine)
POLL_INTERVAL = 0.02    # seconds between readiness checks

APP = r'''
import asyncio, os, sys
import dlock, dlock_asyncio

for m in (dlock, dlock_asyncio):
    if not os.path.abspath(m.__file__).startswith(os.path.abspath(sys.prefix) + os.sep):
        sys.exit("%s comes from %s, not the venv %s" % (m.__name__, m.__file__, sys.prefix))
c = dlock.Client()                      # $DLOCK_SOCKET
fence, holds = c.lock("consumer-python")
st = c.status("consumer-python")
if (holds, st.state, st.fence) != (1, "MINE", fence):
    sys.exit("lock: holds %s, status %r" % (holds, st))
if c.unlock("consumer-python") != 0:
    sys.exit("unlock did not leave 0 holds")
c.close()


async def main():
    async with await dlock_asyncio.connect() as ac:
        async with ac.lock("consumer-python") as h:
            if h.fence <= fence:
                sys.exit("asyncio fence %s not above %s" % (h.fence, fence))
        st = await ac.status("consumer-python")
        if st.state != "FREE":
            sys.exit("after the async with: %r" % (st,))

asyncio.run(main())
print("consumer ok", fence)
'''


class Fail(Exception):
    pass


def install_lines():
    """The README's install block: its lines, without comments and blanks."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^## Install\n(.*?)(?=^## )", text, re.S | re.M)
    if m is None:
        raise Fail("%s has no '## Install' section" % README)
    block = re.search(r"^```sh\n(.*?)^```", m.group(1), re.S | re.M)
    if block is None:
        raise Fail("%s's Install section has no ```sh block" % README)
    lines = [ln.split(" #")[0].strip() for ln in block.group(1).splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def check_packages(line):
    """sudo apt install P...: each P installed (make deps), nothing installed here."""
    missing = []
    for pkg in line.split()[3:]:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True,
                           text=True)
        if r.returncode != 0 or r.stdout != "install ok installed":
            missing.append(pkg)
    if missing:
        raise Fail("the README's packages are not installed: %s (make deps installs them)"
                   % " ".join(missing))


def run_line(line, cwd, env):
    cmd = line.replace(README_ROOT, ROOT)
    try:
        r = subprocess.run(["sh", "-c", cmd], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=STEP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Fail("%r did not finish within %ss" % (cmd, STEP_TIMEOUT))
    if r.returncode != 0:
        raise Fail("%r exited %d:\n%s%s" % (cmd, r.returncode, r.stdout[-3000:],
                                            r.stderr[-3000:]))
    print("ok - %s" % line, flush=True)


def ping(sock):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2.0)
        s.connect(sock)
        s.sendall(b"PING\n")
        return s.recv(64) == b"OK PONG\n"


def start_servers(tmp, procs):
    """redis-server and dlockd on Unix sockets in tmp: dlockd's socket."""
    dlockd = os.environ.get("DLOCKD_BIN") or os.path.join(ROOT, "build", "dlockd")
    if not os.access(dlockd, os.X_OK):
        raise Fail("no dlockd at %s (make build/dlockd, or set DLOCKD_BIN)" % dlockd)
    rsock, dsock = os.path.join(tmp, "redis.sock"), os.path.join(tmp, "dlockd.sock")
    with open(os.path.join(tmp, "redis.log"), "wb") as log:
        procs.append(subprocess.Popen(["redis-server", "--port", "0", "--unixsocket", rsock,
                                       "--save", "", "--appendonly", "no", "--dir", tmp],
                                      stdout=log, stderr=subprocess.STDOUT))
    conf = os.path.join(tmp, "dlockd.conf")
    with open(conf, "w") as f:
        f.write("[server]\nsocket = %s\n[redis]\nurl = unix://%s\n" % (dsock, rsock))
    os.chmod(conf, 0o600)   # dlockd refuses, as root, a file others can write
    with open(os.path.join(tmp, "dlockd.log"), "wb") as log:
        procs.append(subprocess.Popen([dlockd, "-c", conf], stdout=log,
                                      stderr=subprocess.STDOUT))
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise Fail("%s exited with %s" % (p.args[0], p.returncode))
        try:
            if ping(dsock):
                return dsock
        except OSError:
            pass
        time.sleep(POLL_INTERVAL)
    raise Fail("dlockd did not answer PING within %ss" % START_TIMEOUT)


def main():
    tmp = tempfile.mkdtemp(prefix="dlock-consumer-python-")
    procs = []
    try:
        project = os.path.join(tmp, "app")
        os.mkdir(project)
        # Debian's python3 (not one a version manager put first), no user
        # configuration, and no index to fetch from.
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "LANG": "C.UTF-8",
               "PIP_INDEX_URL": DEAD_INDEX, "PIP_DISABLE_PIP_VERSION_CHECK": "1",
               "PIP_NO_INPUT": "1"}
        for line in install_lines():
            if line.startswith("sudo apt install "):
                check_packages(line)
                print("ok - %s (installed already)" % line, flush=True)
            else:
                run_line(line, project, env)
        sock = start_servers(tmp, procs)
        with open(os.path.join(project, "app.py"), "w") as f:
            f.write(APP)
        python = os.path.join(project, ".venv", "bin", "python")
        r = subprocess.run([python, "app.py"], cwd=project, capture_output=True, text=True,
                           env=dict(env, DLOCK_SOCKET=sock), timeout=STEP_TIMEOUT)
        if r.returncode != 0 or not r.stdout.startswith("consumer ok "):
            raise Fail("the consumer program exited %d:\n%s%s" % (r.returncode, r.stdout,
                                                                  r.stderr))
        print("ok - a program in the venv locks and unlocks (%s)" % r.stdout.strip())
    except Fail as e:
        print("not ok - %s" % e)
        return 1
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_consumer: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
