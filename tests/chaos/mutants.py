#!/usr/bin/env python3
"""Mutant daemons for the history checker: each is dlockd built from a
temporary copy of the tree with one deliberate bug patched in, then run
through netfaults.py's short standalone (or quorum) stage; the checker must fail every
one. `make chaos-mutants`.

    python3 tests/chaos/mutants.py [--only NAME] [--keep]

Mutants:
  late-loss        the watchdog gives a cut-off holder up (!LOST backend) a
                   lease after Redis could drop it, not before: another
                   daemon's waiter is granted while it still holds
  fence-no-raise   a grant in the same microsecond-or-later as the last
                   fence reuses it instead of raising it (the counter's
                   "+ 1" dropped, TIME in whole seconds): fences repeat
  no-lost          the !LOST backend is never sent: a cut-off holder is
                   never told
  uuid-shared      every dlockd has the same uuid (the owner field's daemon
                   part): a connection on B whose number is that of A's
                   holder re-enters A's hold, a grant with no fence raise
                   (netfaults' twins phase makes such pairs)
  orphan-kept      an acquire CANCEL withdrew while in flight is never
                   undone: lock_wait_withdraw marks it undone without
                   queueing the release behind it (so the acquire's answer
                   releases nothing either), and the grant stays in Redis,
                   no one's, for a lease (netfaults' cancels phase and the
                   checker's free-wait rule)
  grant-before-majority  (quorum) a grant answered once one node has it,
                   not a majority: A, cut from three nodes, and B both hold
  double-leader    (chaos.py's election stage) a campaign at the queue's
                   head is granted while another candidate leads: two
                   leaders at once, which the stage's checks and the history
                   checker must see although candidates are SIGKILLed while
                   they lead (their leaderships end at the kill)
  no-wake          (chaos.py's hot-name stage) a release publishes nothing:
                   no daemon waiting for the name is woken, each tries
                   again only when the lease it last saw runs out, and
                   the name sits free while they wait (the stage's
                   "left free with a live daemon's worker waiting")
  no-fallback      (chaos.py's hot-name stage) a release that names
                   another daemon leaves the others waiting an hour, not
                   command_timeout_ms (both places wait.c arms it): when
                   the daemon named is stopped, the name sits free until
                   it runs again
  restore-fence    (chaos.py's live-restore stage) a hold taken back after a
                   hand-over gets its fence + 1: the keeper's STATUS at the
                   end names another fence than its grant's
  restore-drop-waits  (chaos.py's live-restore stage) the requests in
                   progress (waits) are left out of the hand-over's state:
                   the workers waiting at a hand-over, and the contender,
                   are never answered

Exit 0 only if the checker (or netfaults' invariants) caught every mutant
and the unpatched tree passes nothing but them.
"""
# SPDX-License-Identifier: MIT

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD_JOBS = "2"
COPY_IGNORE = shutil.ignore_patterns("build", ".git", "clients", "bench", "fuzz", "*.o")

MUTANTS = {
    "late-loss": ("daemon/lock/watchdog.c",
                  "lock_hold_valid(h->lock->mgr, lease) - lease / LOCKMGR_LOSS_MARGIN_DIV;",
                  "lock_hold_valid(h->lock->mgr, lease) + lease;"),
    "fence-no-raise": ("daemon/backend/lua/part/acquire.lua",
                       "f = tonumber(t[1]) * 1000000 + tonumber(t[2])",
                       "f = tonumber(t[1]) * 1000000"),
    "no-lost": ("daemon/lock/watchdog.c",
                "lock_hold_valid(h->lock->mgr, lease) - lease / LOCKMGR_LOSS_MARGIN_DIV;",
                "lock_hold_valid(h->lock->mgr, lease) + 3600000u;"),
}
MUTANTS["uuid-shared"] = ("daemon/backend/open.c", "    uuid_generate(u);\n",
                          "    uuid_clear(u);\n")
MUTANTS["orphan-kept"] = ("daemon/lock/wait.c",
                          "    lock_undo(w->lock, w, w->owner_id);\n    w->undone = 1;",
                          "    w->undone = 1;")
MUTANTS["grant-before-majority"] = (
    "daemon/backend/quorum_vote.c",
    "    if (t.yes < majority) {\n        if (t.yes + t.pending < majority) a.what",
    "    if (t.yes < 1) {\n        if (t.yes + t.pending < 1) a.what")
MUTANTS["double-leader"] = ("daemon/backend/lua/elect.lua",
                            "if not k then\n  local h = redis.call('lindex', K2, 0)",
                            "if not k or op == 'a' then\n  local h = redis.call('lindex', K2, 0)")
MUTANTS["no-wake"] = ("daemon/backend/lua/part/release.lua",
                      "redis.call('del', K1)\nif v[3] and wake_one(K1, K2, A1, P) then\n"
                      "  redis.call(P, K2, '0')\n  return {0, 0}\nend\n"
                      "return {0, redis.call(P, K2, '0')}",
                      "redis.call('del', K1)\nreturn {0, 0}")
MUTANTS["no-fallback"] = ("daemon/lock/wait.c",
                          "no try again for it. */\n        timers_start(l->mgr->timers, "
                          "&l->q->retry, l->mgr->conf->command_timeout_ms, on_retry);",
                          "no try again for it. */\n        timers_start(l->mgr->timers, "
                          "&l->q->retry, 3600000u, on_retry);")
MUTANTS["restore-fence"] = ("daemon/lock/handover.c",
                            "lock_hold_new(l, o, fence, (uint32_t)lease, mode);",
                            "lock_hold_new(l, o, fence + 1, (uint32_t)lease, mode);")
MUTANTS["restore-drop-waits"] = ("daemon/session.c",
                                 "TAILQ_FOREACH(c, &s->calls, link) save_call(s, c, w);",
                                 "TAILQ_FOREACH(c, &s->calls, link) if (!c->started) "
                                 "save_call(s, c, w);")
# More lines per mutant: fence-no-raise also needs the "last + 1" gone, or
# the counter raises it; grant-before-majority its fence round too.
EXTRA = {"fence-no-raise": [("daemon/backend/lua/part/acquire.lua",
                             "    f = last + 1\n", "    f = last\n")],
         "no-fallback": [("daemon/lock/wait.c",
                          "or on a release. */\n        if (!l->q->subscribed) {\n"
                          "            lock_watch(l, l->kind->watch, 0);\n"
                          "            l->q->turn_passed = 1;\n        }\n"
                          "        timers_start(l->mgr->timers, &l->q->retry, "
                          "l->mgr->conf->command_timeout_ms, on_retry);",
                          "or on a release. */\n        if (!l->q->subscribed) {\n"
                          "            lock_watch(l, l->kind->watch, 0);\n"
                          "            l->q->turn_passed = 1;\n        }\n"
                          "        timers_start(l->mgr->timers, &l->q->retry, 3600000u, on_retry);")],
         "grant-before-majority": [("daemon/backend/quorum_vote.c",
                                    "    if (sure >= majority) return QUORUM_VOTE_GRANT;",
                                    "    if (sure >= 1) return QUORUM_VOTE_GRANT;")]}
# The netfaults topology each runs on (standalone unless named).
TOPOLOGY = {"grant-before-majority": "quorum"}
# The mutants that chaos.py's election stage judges instead of netfaults.
ELECT = ("double-leader",)
# The mutants that chaos.py's hot-name stage judges.
HOT = ("no-wake", "no-fallback")
# The mutants that chaos.py's live-restore stage judges.
UPGRADE = ("restore-fence", "restore-drop-waits")


def patch(tree, path, old, new):
    p = os.path.join(tree, path)
    with open(p) as f:
        text = f.read()
    if text.count(old) != 1:
        raise SystemExit("mutant patch does not apply to %s: %r" % (path, old))
    with open(p, "w") as f:
        f.write(text.replace(old, new))


def build(name, tmp):
    tree = os.path.join(tmp, name)
    shutil.copytree(ROOT, tree, ignore=COPY_IGNORE, symlinks=True)
    for spec in [MUTANTS[name]] + EXTRA.get(name, []):
        patch(tree, *spec)
    r = subprocess.run(["make", "-s", "-j" + BUILD_JOBS, "-C", tree, "build/dlockd"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        raise SystemExit("mutant %s does not build:\n%s" % (name, r.stdout.decode()[-2000:]))
    return os.path.join(tree, "build", "dlockd")


def run(name, dlockd, keep=False):
    if name in ELECT or name in HOT or name in UPGRADE:
        cmd = [sys.executable, os.path.join(HERE, "chaos.py"), "--short", "--stage",
               "elect" if name in ELECT else "hot" if name in HOT else "upgrade"]
    else:
        cmd = [sys.executable, os.path.join(HERE, "netfaults.py"), "--short",
               "--topology", TOPOLOGY.get(name, "standalone"), "--dlockd", dlockd]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=dict(os.environ, DLOCKD_BIN=dlockd))
    out = r.stdout.decode("utf-8", "replace")
    lines = out.splitlines()
    for l in lines:
        # netfaults keeps its directory when a check fails: a caught mutant's
        if l.startswith("kept ") and not keep:
            shutil.rmtree(l[len("kept "):].strip(), ignore_errors=True)
    fails = [l.strip() + " / " + (lines[i + 1].strip() if i + 1 < len(lines) else "")
             for i, l in enumerate(lines) if l.strip().startswith("FAIL")]
    return r.returncode, fails


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=sorted(MUTANTS), default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dlock-mutants-")
    caught, missed = [], []
    try:
        for name in sorted(MUTANTS):
            if args.only not in (None, name):
                continue
            rc, fails = run(name, build(name, tmp), args.keep)
            by_checker = [f for f in fails if "history checker" in f]
            if rc != 0 and fails:
                caught.append(name)
                print("CAUGHT %s: %d failed checks%s\n    %s"
                      % (name, len(fails), " (the history checker among them)"
                         if by_checker else "", (by_checker or fails)[0][:600]), flush=True)
            else:
                missed.append(name)
                print("MISSED %s: %s passed" % (name, "chaos.py --stage elect" if name in ELECT
                                                else "chaos.py --stage hot" if name in HOT
                                                else "chaos.py --stage upgrade"
                                                if name in UPGRADE else "netfaults"), flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print("mutants: %d caught (%s), %d missed (%s)"
          % (len(caught), " ".join(caught) or "-", len(missed), " ".join(missed) or "-"))
    return 0 if not missed else 1


if __name__ == "__main__":
    sys.exit(main())
