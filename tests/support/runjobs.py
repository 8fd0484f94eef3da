#!/usr/bin/env python3
"""make test's scheduler: runs make targets a few at a time, the longest first.

    python3 tests/support/runjobs.py [-j N] [--log-dir DIR] TARGET[=SECONDS] ...

Each TARGET is run as `make --no-print-directory TARGET` with its output in
DIR/TARGET.log; SECONDS is what it is expected to take (wall), which orders
the queue: the longest first, so that the last to start are short. A
target whose name ends in '!' runs alone, after all the others: nothing
else runs beside it.
When a job ends its whole output is printed at once (as make's
--output-sync does), then, at the end, a table of every job's wall and CPU
time (its processes' user + system, as wait4 counts them) and one closing
line, `jobs: N passed, N failed`. Exit 0 only if every job passed.

Most of the suite waits for leases, timers and failovers rather than
computing, so on two cores three jobs at a time keep both busy; the tests'
timing bounds are set for a machine that busy.

Standard library only.
"""
# SPDX-License-Identifier: MIT

import argparse
import os
import re
import signal
import subprocess
import sys
import time


def parse_job(spec):
    m = re.match(r"^([^=!]+)(!?)(?:=([0-9.]+))?$", spec)
    if not m:
        raise SystemExit("runjobs: bad job %r (TARGET[!][=SECONDS])" % spec)
    return dict(name=m.group(1), alone=bool(m.group(2)), est=float(m.group(3) or 10.0))


def fmt_table(done, wall):
    rows = sorted(done, key=lambda j: -j["wall"])
    width = max([len(j["name"]) for j in rows] + [3])
    out = ["%-*s  %7s  %7s  %s" % (width, "job", "wall s", "cpu s", "result")]
    for j in rows:
        out.append("%-*s  %7.1f  %7.1f  %s" % (width, j["name"], j["wall"], j["cpu"],
                                               "passed" if j["rc"] == 0 else "FAILED (%s)" % j["rc"]))
    cpu = sum(j["cpu"] for j in rows)
    out.append("%-*s  %7.1f  %7.1f  (%.2f cores busy on average)"
               % (width, "all", wall, cpu, cpu / wall if wall > 0 else 0.0))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-j", type=int, default=3, help="jobs at once (default 3)")
    ap.add_argument("--log-dir", default="build/test-logs")
    ap.add_argument("jobs", nargs="+")
    args = ap.parse_args()
    jobs = [parse_job(s) for s in args.jobs]
    queue = sorted(jobs, key=lambda j: (j["alone"], -j["est"]))   # the lone ones last
    os.makedirs(args.log_dir, exist_ok=True)
    running = {}           # pid -> job
    done = []
    t0 = time.monotonic()

    def start(job):
        job["log"] = os.path.join(args.log_dir, job["name"].replace("/", "_") + ".log")
        f = open(job["log"], "wb")
        job["proc"] = subprocess.Popen(["make", "--no-print-directory", job["name"]],
                                       stdout=f, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
        f.close()
        job["t0"] = time.monotonic()
        running[job["proc"].pid] = job

    def stop_all(signum, frame):
        for job in running.values():
            try:
                os.killpg(job["proc"].pid, signal.SIGTERM)
            except OSError:
                pass
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, stop_all)
    signal.signal(signal.SIGTERM, stop_all)
    while queue or running:
        alone = any(j["alone"] for j in running.values())
        while queue and not alone and len(running) < args.j:
            nxt = queue[0]
            if nxt["alone"] and running:
                break
            start(queue.pop(0))
            alone = nxt["alone"]
        pid, status, ru = os.wait4(-1, 0)
        job = running.pop(pid, None)
        if job is None:
            continue
        job["wall"] = time.monotonic() - job["t0"]
        job["cpu"] = ru.ru_utime + ru.ru_stime
        job["rc"] = os.waitstatus_to_exitcode(status)
        job["proc"].returncode = job["rc"]
        done.append(job)
        with open(job["log"], "rb") as f:
            sys.stdout.buffer.write(f.read())
        print("-- %s: %s in %.1f s (cpu %.1f s); %d running, %d queued"
              % (job["name"], "passed" if job["rc"] == 0 else "FAILED (exit %d)" % job["rc"],
                 job["wall"], job["cpu"], len(running), len(queue)), flush=True)
    wall = time.monotonic() - t0
    failed = [j["name"] for j in done if j["rc"] != 0]
    print("\n" + fmt_table(done, wall))
    if failed:
        print("failed: %s (logs in %s)" % (" ".join(failed), args.log_dir))
    print("jobs: %d passed, %d failed" % (len(done) - len(failed), len(failed)), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
