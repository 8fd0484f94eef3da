#!/usr/bin/env python3
"""Mutant daemons for the stateful fuzzer: each is dlockd built sanitized
from a temporary copy of the tree with one of issue 36's bugs put back,
then run through fuzz_state.py's short run; the walk must fail every one.
`make fuzz-state-mutants`.

    python3 tests/fuzz/fuzz_state_mutants.py [--only NAME] [--keep] [--root DIR] [--list]

A mutant puts its bug back in one of two ways:

  revert  a commit of the tree's history (a hash, or "grep:<regex>" for the
          newest commit whose message matches), whose changes under daemon/,
          proto/ and conf/ are applied in reverse to the copy: the fix
          undone, its tests kept;
  edits   text substitutions (path, old, new), each of which must match
          exactly once (tests/chaos/mutants.py's way).

The fixes were written after this driver: a mutant with neither filled in
(FILL_IN) is UNFILLED and fails the run, so that a table left half done is
seen. What each puts back, and what the walk catches it by:

  leader-answer-uaf  (bug 1) leader_done (lock/observe.c) goes on using the
                     observed name after lock_answer(), whose reply may
                     close the session past max_output and free it: ASan,
                     heap-use-after-free in leader_done, through a slow
                     reader's LEADER/OBSERVE flood
  mlock-hold-gone    (bug 4) a set's HOLD_GONE (multi.c) re-queues the set
                     without kicking the name's queue: a wait hanging while
                     its name is free (a pair's quiet name, FORCEUNLOCK from
                     the other daemon, the holder's MLOCK re-entering it)
  clients-closing    (bug 6) send_clients (session.c) visits a session that
                     is closing (owner NULL): UBSan/ASan, NULL in
                     lockmgr_owner_held/_waiting, through a burst of closes
                     with CLIENTS at once
  leave-dropped      (bug 7) a fair or election waiter's leave that fails
                     (Redis cut or late) is dropped, not retried: a
                     FAIRLOCK/ELECT waiting while its name is free, or places
                     left in Redis after every client closed

A mutant is caught when the walk fails with its own bug's hint (fuzz_state.py
names the bug a failure looks like); failing otherwise is a miss, since the
tree must pass but for the mutant. Exit 0 only if every mutant was filled
in, applied, built and caught.
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
REVERT_PATHS = ("daemon", "proto", "conf")    # what a revert undoes (not the tests)
FILL_IN = None          # not written yet

# name -> the bug, how it is put back (revert: a commit; edits: (path, old,
# new) ...), fuzz_state.py's arguments (the short run's by default)
# session_close's end, where its uv_close is (the listings of its calls
# cancelled just before)
CLOSE_AT = ("        c->listing = NULL;\n    }\n"
            "    uv_close((uv_handle_t *)s->pipe, on_close);")
# A session's owner dropped inside session_close, from whatever callback
# closed it (as before issue 36): bugs 1 and 6 need it back.
DROP_IN_CLOSE = ("daemon/session.c",
                 CLOSE_AT,
                 CLOSE_AT.replace("    uv_close", "    if (s->owner != NULL) lockmgr_owner_drop("
                                  "s->ss->locks, s->owner);\n    s->owner = NULL;\n    uv_close"))
MUTANTS = {
    "leader-answer-uaf": dict(bug="bug 1", revert=None, edits=[
        # the observations ended at once, as session_close did before (its
        # drop ends them through the kinds' owner_drop, even from inside a
        # callback)
        DROP_IN_CLOSE,
        ("daemon/lock/lockmgr.c",
         "        o->dropped = 1;\n        timers_start(m->timers, &o->reap, 0, on_reap);",
         "        for (int k = 0; k < LOCK_MODE_COUNT; k++)\n"
         "            if (m->kind_state[k] != NULL && lock_modes[k].kind->owner_drop != NULL)\n"
         "                lock_modes[k].kind->owner_drop(m, o);\n"
         "        o->dropped = 1;\n        timers_start(m->timers, &o->reap, 0, on_reap);"),
        ("daemon/lock/observe.c",
         "    if (on != NULL) on->telling++;\n    lock_answer(o, op->hdr.call, &r);",
         "    lock_answer(o, op->hdr.call, &r);"),
        ("daemon/lock/observe.c",
         "    on->telling--;\n    oname_maybe_free(on);\n}\n\nvoid observe_request",
         "}\n\nvoid observe_request")],
        # CLIENTS is safe on this tree; slow readers' LEADER/OBSERVE floods do it
        args=["--seed", "1", "--seconds", "20", "--profile", "queues", "--no", "CLIENTS"]),
    "mlock-hold-gone": dict(bug="bug 4", revert=None, edits=[
        ("daemon/lock/multi.c",
         "        lock_kick(l);\n    }\n    mwait_go_on(mw);",
         "    }\n    mwait_go_on(mw);")],
        # a quiet walk, so that no later arrival wakes the stuck waiter
        args=["--seed", "2", "--seconds", "20", "--profile", "stale", "--no",
              "CLIENTS,slow,faults,limits"]),
    "clients-closing": dict(bug="bug 6", revert=None, edits=[
        DROP_IN_CLOSE,
        ("daemon/session.c", "        if (c->state == SESSION_CLOSING) continue;\n", "")],
        args=["--short"]),
    "leave-dropped": dict(bug="bug 7", revert=None, edits=[
        ("daemon/lock/release.c",
         "    if (res->status == BACKEND_OK || res->status == BACKEND_FAILED || m->stopping ||",
         "    if (r->kind == BACKEND_LEAVE || res->status == BACKEND_OK ||\n"
         "        res->status == BACKEND_FAILED || m->stopping ||"),
        ("daemon/lock/wait.c",
         "    if (!(w->tried || w->in_flight || w->unanswered || attempt_unanswered(w))) return;",
         "    if (!(w->tried || w->in_flight)) return;")], args=["--short"]),
}


def git(root, *args):
    r = subprocess.run(["git", "-C", root] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise SystemExit("git %s: %s" % (" ".join(args), r.stdout.decode()[-500:]))
    return r.stdout.decode()


def commit_of(root, ref):
    if ref.startswith("grep:"):
        h = git(root, "log", "--format=%H", "-1", "--extended-regexp", "--grep=" + ref[5:]).strip()
        if not h:
            raise SystemExit("no commit's message matches %r" % ref[5:])
        return h
    return git(root, "rev-parse", "--verify", ref + "^{commit}").strip()


def revert(root, tree, ref):
    """ref's changes under REVERT_PATHS, applied in reverse to tree."""
    h = commit_of(root, ref)
    diff = git(root, "show", "--format=", "--binary", h, "--", *REVERT_PATHS)
    if not diff.strip():
        raise SystemExit("commit %s changes nothing under %s" % (h[:12], " ".join(REVERT_PATHS)))
    r = subprocess.run(["git", "apply", "--reverse", "--whitespace=nowarn", "-"],
                       input=diff.encode(), cwd=tree, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise SystemExit("commit %s does not revert on this tree:\n%s"
                         % (h[:12], r.stdout.decode()[-1500:]))
    return h


def patch(tree, path, old, new):
    p = os.path.join(tree, path)
    with open(p) as f:
        text = f.read()
    if text.count(old) != 1:
        raise SystemExit("mutant patch does not apply to %s (%d matches): %r"
                         % (path, text.count(old), old))
    with open(p, "w") as f:
        f.write(text.replace(old, new))


def build(root, name, m, tmp):
    """The mutant's sanitized dlockd (build/san/dlockd of its copy)."""
    tree = os.path.join(tmp, name)
    shutil.copytree(root, tree, ignore=COPY_IGNORE, symlinks=True)
    how = []
    if m["revert"]:
        how.append("commit %s reverted" % revert(root, tree, m["revert"])[:12])
    for path, old, new in m["edits"] or []:
        patch(tree, path, old, new)
        how.append("%s edited" % path)
    # only dlockd: sanitize-build's self-tested binaries are not needed here
    r = subprocess.run(["make", "-s", "-j" + BUILD_JOBS, "-C", tree, "sanitize-build",
                        "SAN_SELF_TESTS="], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise SystemExit("mutant %s does not build:\n%s" % (name, r.stdout.decode()[-2000:]))
    return os.path.join(tree, "build", "san", "dlockd"), ", ".join(how)


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
        for name, m in sorted(MUTANTS.items()):
            state = ("revert %s" % m["revert"] if m["revert"] else "") + \
                (" %d edits" % len(m["edits"]) if m["edits"] else "")
            print("%-18s %s  %s  fuzz_state.py %s" % (name, m["bug"], state.strip() or "UNFILLED",
                                                      " ".join(m["args"])))
        return 0
    tmp = tempfile.mkdtemp(prefix="dlock-fuzz-state-mutants-")
    caught, missed, unfilled = [], [], []
    try:
        for name, m in sorted(MUTANTS.items()):
            if args.only not in (None, name):
                continue
            if not m["revert"] and not m["edits"]:
                unfilled.append(name)
                print("UNFILLED %s (%s): neither its revert nor its edits are written yet"
                      % (name, m["bug"]), flush=True)
                continue
            dlockd, how = build(args.root, name, m, tmp)
            rc, failed, secs = run(dlockd, m["args"], args.keep)
            # caught by its own bug's failure (fuzz_state.py's hint names it),
            # not by another one's: the tree must pass but for the mutant
            mine = [f for f in failed if "; looks like " in f and
                    "%s (" % m["bug"] in f.split("; looks like ", 1)[1]]
            if rc != 0 and mine:
                caught.append(name)
                print("CAUGHT %s (%s; %s) in %.0f s: %s" % (name, m["bug"], how, secs, mine[0][
                    len("fuzz-state: FAILED "):][:400]), flush=True)
            elif failed:
                missed.append(name)
                print("MISSED %s (%s; %s): the walk failed otherwise (%.0f s): %s"
                      % (name, m["bug"], how, secs, " | ".join(f[len("fuzz-state: FAILED "):][:300]
                                                             for f in failed)), flush=True)
            else:
                missed.append(name)
                print("MISSED %s (%s; %s): the walk passed (%.0f s)" % (name, m["bug"], how, secs),
                      flush=True)
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
