#!/usr/bin/env python3
"""Mutant daemons for the stateful fuzzer: each is dlockd built sanitized
from a temporary copy of the tree with one of issue 36's bugs put back,
then run through fuzz_state.py's short run; the walk must fail every one.
`make fuzz-state-mutants`.

    python3 tests/fuzz/fuzz_state_mutants.py [--only NAME] [--keep] [--root DIR] [--list]

A mutant is a list of text substitutions (path, old, new), each of which
must match exactly once. The bugs' fixes were written after this driver:
a mutant whose substitutions are not filled in yet (FILL_IN) is reported
as UNFILLED and fails the run, so that a table left half done is seen.
What each must put back, and what the walk catches it by:

  leader-answer-uaf  (bug 1) leader_done (lock/observe.c) goes on using the
                     observed name after lock_answer(), whose reply may
                     close the session past max_output and free it: caught
                     by ASan (heap-use-after-free in leader_done) through a
                     slow reader's LEADER/OBSERVE flood
  mlock-hold-gone    (bug 4) a set's HOLD_GONE (multi.c) re-queues the set
                     without kicking the name's queue: caught as a wait that
                     hangs while its names are free (a FORCEUNLOCK from the
                     other daemon, then MLOCK re-entering the forced name)
  clients-closing    (bug 6) send_clients (session.c) visits a session that
                     is closing (owner NULL): caught by UBSan/ASan (NULL in
                     lockmgr_owner_held/_waiting) through a burst of closes
                     with CLIENTS at once
  leave-dropped      (bug 7) a fair or election waiter's leave that fails
                     (Redis cut or late) is dropped, not retried: caught as a
                     FAIRLOCK/ELECT waiting while its name is free, or places
                     left in Redis after every client closed

Exit 0 only if every mutant was filled in, built and caught.
"""
# SPDX-License-Identifier: MIT

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD_JOBS = "2"
COPY_IGNORE = shutil.ignore_patterns("build", ".git", "clients", "bench", "*.o")
FILL_IN = None          # a substitution not written yet

# name -> (the bug, [(path, old, new), ...], fuzz_state.py's arguments: the
# short run's by default). The old texts are those of the fixed tree.
# A session's owner dropped inside session_close, from whatever callback
# closed it (as before issue 36): bugs 1 and 6 need it back.
DROP_IN_CLOSE = ("daemon/session.c",
                 "    s->listing = NULL;\n    uv_close((uv_handle_t *)&s->pipe, on_close);",
                 "    s->listing = NULL;\n"
                 "    if (s->owner != NULL) lockmgr_owner_drop(s->ss->locks, s->owner);\n"
                 "    s->owner = NULL;\n"
                 "    uv_close((uv_handle_t *)&s->pipe, on_close);")
MUTANTS = {
    "leader-answer-uaf": ("bug 1", [
        DROP_IN_CLOSE,
        ("daemon/lock/observe.c",
         "    if (on != NULL) on->telling++;\n    lock_answer(o, &r);",
         "    lock_answer(o, &r);"),
        ("daemon/lock/observe.c",
         "    on->telling--;\n    oname_maybe_free(on);\n}\n\nvoid observe_request",
         "}\n\nvoid observe_request")], ["--short"]),
    "mlock-hold-gone": ("bug 4", [
        ("daemon/lock/multi.c",
         "        lock_kick(l);\n    }\n    if (mwait_requeue_lost(mw)) return;",
         "    }\n    if (mwait_requeue_lost(mw)) return;")],
        # the short run's seeds meet the sequence but judge no wait behind it
        ["--seed", "1", "--seconds", "40"]),
    "clients-closing": ("bug 6", [
        DROP_IN_CLOSE,
        ("daemon/session.c", "        if (c->state == SESSION_CLOSING) continue;\n", "")],
        ["--short"]),
    "leave-dropped": ("bug 7", [
        ("daemon/lock/release.c",
         "    if (res->status == BACKEND_OK || res->status == BACKEND_FAILED || m->stopping ||",
         "    if (r->kind == BACKEND_LEAVE || res->status == BACKEND_OK ||\n"
         "        res->status == BACKEND_FAILED || m->stopping ||"),
        ("daemon/lock/wait.c",
         "    if (!(w->tried || w->in_flight || w->unanswered || attempt_unanswered(w))) return;",
         "    if (!(w->tried || w->in_flight)) return;")], ["--short"]),
}


def patch(tree, path, old, new):
    p = os.path.join(tree, path)
    with open(p) as f:
        text = f.read()
    if text.count(old) != 1:
        raise SystemExit("mutant patch does not apply to %s (%d matches): %r"
                         % (path, text.count(old), old))
    with open(p, "w") as f:
        f.write(text.replace(old, new))


def build(root, name, edits, tmp):
    """The mutant's sanitized dlockd (build/san/dlockd of its copy)."""
    tree = os.path.join(tmp, name)
    shutil.copytree(root, tree, ignore=COPY_IGNORE, symlinks=True)
    for path, old, new in edits:
        patch(tree, path, old, new)
    # only dlockd: sanitize-build's self-tested binaries are not needed here
    r = subprocess.run(["make", "-s", "-j" + BUILD_JOBS, "-C", tree, "sanitize-build",
                        "SAN_SELF_TESTS="], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise SystemExit("mutant %s does not build:\n%s" % (name, r.stdout.decode()[-2000:]))
    return os.path.join(tree, "build", "san", "dlockd")


def run(dlockd, args, keep):
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_state.py"), "--quiet",
                        "--dlockd", dlockd] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = r.stdout.decode("utf-8", "replace")
    for l in out.splitlines():
        # the walk keeps its directory when a check fails: a caught mutant's
        if l.startswith("kept ") and not keep:
            shutil.rmtree(l[len("kept "):].split()[0], ignore_errors=True)
    failed = [l for l in out.splitlines() if l.startswith("fuzz-state: FAILED")]
    return r.returncode, failed, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(MUTANTS), default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--root", default=ROOT, help="the tree to copy (default: this one)")
    ap.add_argument("--list", action="store_true", help="list the mutants and their state")
    args = ap.parse_args()
    if args.list:
        for name, (bug, edits, wargs) in sorted(MUTANTS.items()):
            print("%-18s %s  %s  fuzz_state.py %s" % (name, bug, "filled in" if edits
                                                      else "UNFILLED", " ".join(wargs)))
        return 0
    tmp = tempfile.mkdtemp(prefix="dlock-fuzz-state-mutants-")
    caught, missed, unfilled = [], [], []
    try:
        for name, (bug, edits, wargs) in sorted(MUTANTS.items()):
            if args.only not in (None, name):
                continue
            if not edits:
                unfilled.append(name)
                print("UNFILLED %s (%s): its substitutions are not written yet" % (name, bug),
                      flush=True)
                continue
            rc, failed, secs = run(build(args.root, name, edits, tmp), wargs, args.keep)
            if rc != 0 and failed:
                caught.append(name)
                print("CAUGHT %s (%s) in %.0f s: %s" % (name, bug, secs, failed[0][len(
                    "fuzz-state: FAILED "):][:400]), flush=True)
            else:
                missed.append(name)
                print("MISSED %s (%s): the walk passed (%.0f s)" % (name, bug, secs), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept %s" % tmp)
    print("fuzz-state mutants: %d caught (%s), %d missed (%s), %d unfilled (%s)"
          % (len(caught), " ".join(caught) or "-", len(missed), " ".join(missed) or "-",
             len(unfilled), " ".join(unfilled) or "-"))
    return 0 if not missed and not unfilled else 1


if __name__ == "__main__":
    sys.exit(main())
