"""The chaos suite's history: every operation a worker made (invoke and
complete times, the request, the reply or event) and the fenced store's
accepts and rejects, one JSON line each, one file per stage; and a checker
that reads a history and judges it, per name, against a model of a fenced
lock service.

    h = History(path)                    # appends, thread-safe
    op = h.invoke(proc, name, "lock")    # then h.complete(op, "ok", fence=F)
                                         # or "timeout"/"err ..."/"info" (unknown)
    h.event(proc, name, "lost", reason)  # a !LOST as it arrived
    h.store(proc, name, fence)           # the fenced store's verdict: True if accepted
    r = check(load(path))                # r.ops, r.names, r.violations (first first)

The model (a mutex with fences, per name):

  - A section is a grant (LOCK answered OK) until its end: the UNLOCK sent,
    or the !LOST received, or the connection's close. A grant takes effect
    at some moment between its invoke and its completion, a release between
    the UNLOCK's invoke and its completion (a section that ended otherwise,
    "closed": a broken connection, a SIGKILL, an UNLOCK answered !LOST, may
    have ended as soon as its LOCK was sent); a !LOST means the daemon gave the
    lock up before the event arrived, by at most LOST_TOL_S (a Unix socket's
    delivery), so the section counts as held until then. Two sections
    overlap for certain when each begins (at the latest) before the other
    ends (at the earliest): a violation, named with both. A LOCK whose reply
    never came (the connection broke, "info") is indeterminate, as in
    Knossos and Porcupine: it may or may not have taken effect, it has no
    observable fence, and its holder never writes, so it can explain no
    write and is checked by nothing but the daemon's own side (a later
    grant's fence).
  - Fences are unique per name, and rise in real-time grant order: a grant
    completed before another was invoked carries the smaller fence.
  - The store accepts a write iff its fence is at least the highest it
    accepted (or, chaos.py's store, read) before; store order is the order
    of the records (the store serialises them). An accepted write from a
    section that overlapped a later-fenced one is what the fence must stop.

Standard library only.
"""
# SPDX-License-Identifier: MIT

import json
import os
import threading
import time

LOST_TOL_S = 0.05


class History(object):
    def __init__(self, path):
        self.path = path
        self.f = open(path, "a")
        self.mu = threading.Lock()
        self.n = 0

    def _put(self, rec):
        with self.mu:
            rec["i"] = self.n
            self.n += 1
            self.f.write(json.dumps(rec) + "\n")
            self.f.flush()

    def invoke(self, proc, name, op, **kw):
        return dict(proc=proc, name=name, op=op, t0=time.monotonic(), **kw)

    def complete(self, rec, res, t1=None, **kw):
        rec = dict(rec, t1=t1 or time.monotonic(), res=res, **kw)
        self._put(rec)
        return rec

    def event(self, proc, name, op, detail="", t=None):
        self._put(dict(proc=proc, name=name, op=op, t0=t or time.monotonic(),
                       t1=t or time.monotonic(), res=detail))

    def store(self, proc, name, fence, accepted):
        t = time.monotonic()
        self._put(dict(proc=proc, name=name, op="write", t0=t, t1=t, fence=fence,
                       res="accepted" if accepted else "rejected"))

    def record(self, **rec):
        """Any record as given (times included): the kinds' and elections'
        trackers write their own."""
        self._put(rec)

    def close(self):
        with self.mu:
            self.f.close()


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


class Result(object):
    def __init__(self):
        self.ops = 0
        self.names = 0
        self.sections = 0
        self.indeterminate = 0
        self.violations = []
        self.excused = []

    def first(self):
        return self.violations[0] if self.violations else None


def _fmt(s):
    return ("%s fence %s granted [%.3f, %.3f] ended %s at %.3f"
            % (s["proc"], s["fence"], s["i0"], s["c0"], s["how"], s["end"]))


def sections(ops):
    """Per name: the sections (dict proc, fence, i0, c0, end, how) and the
    indeterminate LOCKs."""
    per = {}
    open_ = {}
    indet = {}
    for r in sorted(ops, key=lambda r: (r["t1"], r["i"])):
        name, proc = r["name"], r["proc"]
        key = (name, proc)
        if r["op"] == "lock":
            if r["res"] == "ok":
                s = dict(proc=proc, fence=r["fence"], i0=r["t0"], c0=r["t1"], end=None,
                         how=None, name=name)
                open_[key] = s
                per.setdefault(name, []).append(s)
            elif r["res"] == "info":
                indet[name] = indet.get(name, 0) + 1
        elif r["op"] in ("unlock", "lost", "closed") and key in open_:
            s = open_.pop(key)
            if r["op"] == "unlock":
                s["end"], s["how"] = r["t0"], "by UNLOCK"
            elif r["op"] == "lost":
                s["end"], s["how"] = r["t1"] - LOST_TOL_S, "by !LOST " + r["res"]
            else:
                # it may have ended as soon as it began: only the LOCK's
                # sending is sure to lie before its end
                s["end"], s["how"] = s["i0"], "at an unknown moment (%s)" % r["res"]
    for s in open_.values():
        s["end"], s["how"] = float("inf"), "never"
    return per, indet


def free_waits(ops, names, bound_s, cancel_s, lease_s):
    """For the names given (a stretch of the run without faults): every
    LOCK that waited, while the name was free for certain, for longer than
    bound_s. The name may be held from a LOCK's sending until: its
    section's UNLOCK answered (or the !LOST or close, plus lease_s: the
    key may outlive them); a CANCELled LOCK's answer ("cancelled") plus
    cancel_s (an acquire in flight is undone when it returns, within
    command_timeout_ms); an unanswered LOCK's invoke plus lease_s, or its
    completion plus lease_s."""
    out = []
    for name in sorted(names):
        mine = [r for r in ops if r["name"] == name]
        per, _ = sections(mine)
        busy = []
        for s in per.get(name, []):
            last = s["end"]
            for r in mine:
                if r["proc"] == s["proc"] and r["op"] == "unlock" and r["t0"] == s["end"]:
                    last = r["t1"]
            if not s["how"].startswith("by UNLOCK"):
                last = last + lease_s
            busy.append((s["proc"], s["i0"], last))
        for r in mine:
            if r["op"] == "lock" and r["res"] == "cancelled":
                busy.append((r["proc"], r["t0"], r["t1"] + cancel_s))
            elif r["op"] == "lock" and r["res"] == "info":
                busy.append((r["proc"], r["t0"], r["t1"] + lease_s))
        for s in per.get(name, []):
            at, longest = s["i0"], 0.0
            for p, b0, b1 in sorted(busy, key=lambda b: b[1]):
                if p == s["proc"] or b1 <= at or b0 >= s["c0"]:
                    continue
                longest = max(longest, b0 - at)
                at = max(at, b1)
            longest = max(longest, s["c0"] - at)
            if longest > bound_s:
                out.append("%s: %s's LOCK waited %.3f s while the name was free for certain "
                           "(granted [%.3f, %.3f])" % (name, s["proc"], longest, s["i0"],
                                                        s["c0"]))
    return out


class Gaps(object):
    """free_with_waiters' answer: violations, the hand-offs judged, the
    longest gap (seconds) and the gaps an excused() window left unjudged."""

    def __init__(self):
        self.violations = []
        self.judged = 0
        self.longest = 0.0
        self.excused = 0


def free_with_waiters(ops, bound_s, grant_at=None, live=None, excused=None):
    """A hot name must not stay free while someone waits for it: per name,
    each hand-off (a section, then the next in fence order) where the name
    was free for certain, with a waiter that could have taken it, for longer
    than bound_s.

    The release of a section ended by an UNLOCK answered "OK ..." took
    effect before that answer; a section that ended otherwise (!LOST, a
    broken connection, an error) has no known release and judges nothing.
    The next grant took effect at grant_at(section) (chaos' daemons: the
    fence, which is Redis TIME in microseconds at the grant), kept within
    its LOCK's invoke and completion, or at its completion without
    grant_at. A waiter is a later section whose LOCK was sent before that
    grant; live(proc, t0, t1), if given, says whether its daemon could
    act over [t0, t1] (not paused, not dead): a waiter whose daemon could
    not is no waiter. The gap runs from the release, or from the first
    waiter's LOCK if later, to the grant. excused(name, t0, t1), if given,
    names a window in which something the history cannot see (a grant
    whose reply died with a killed daemon) may hold the name: such gaps
    are counted apart."""
    res = Gaps()
    per = {}
    open_ = {}
    for r in sorted(ops, key=lambda r: (r["t1"], r["i"])):
        key = (r["name"], r["proc"])
        if r["op"] == "lock" and r["res"] == "ok":
            s = dict(proc=r["proc"], fence=r["fence"], i0=r["t0"], c0=r["t1"], rel=None)
            open_[key] = s
            per.setdefault(r["name"], []).append(s)
        elif r["op"] in ("unlock", "lost", "closed") and key in open_:
            s = open_.pop(key)
            if r["op"] == "unlock" and str(r["res"]).startswith("OK"):
                s["rel"] = r["t1"]
    for name, ss in sorted(per.items()):
        ss.sort(key=lambda s: s["fence"])
        for k in range(len(ss) - 1):
            a, b = ss[k], ss[k + 1]
            if a["rel"] is None:
                continue
            g = b["c0"] if grant_at is None else min(max(grant_at(b), b["i0"]), b["c0"])
            if g <= a["rel"]:
                continue
            waiting = [w["i0"] for w in ss[k + 1:] if w["i0"] < g and
                       (live is None or live(w["proc"], max(a["rel"], w["i0"]), g))]
            if not waiting:
                continue
            t0 = max(a["rel"], min(waiting))
            gap = g - t0
            if gap <= 0:
                continue
            if excused is not None and excused(name, t0, g):
                res.excused += 1
                continue
            res.judged += 1
            res.longest = max(res.longest, gap)
            if gap > bound_s:
                res.violations.append(
                    "%s: free for %.3f s with %d waiting: %s's fence %s released by %.3f, "
                    "%s's fence %s granted at %.3f" % (name, gap, len(waiting), a["proc"],
                                                         a["fence"], a["rel"], b["proc"],
                                                         b["fence"], g))
    return res


def check(ops, excuse=None, waits=None):
    """Judges ops; excuse(name, a, b), if given, may name a documented
    fault that explains two holders at once (then counted in res.excused,
    not a violation; the store still has to stop the stale one). waits,
    if given (dict of free_waits' arguments), also finds LOCKs that waited
    while their name was free."""
    res = Result()
    res.ops = len(ops)
    per, indet = sections(ops)
    res.indeterminate = sum(indet.values())
    names = set(r["name"] for r in ops)
    res.names = len(names)
    for name in sorted(names):
        ss = sorted(per.get(name, []), key=lambda s: s["c0"])
        res.sections += len(ss)
        seen = {}
        for s in ss:
            if s["fence"] in seen:
                res.violations.append("%s: fence %s granted twice: %s; %s"
                                      % (name, s["fence"], _fmt(seen[s["fence"]]), _fmt(s)))
            seen[s["fence"]] = s
        for a_i, a in enumerate(ss):
            for b in ss[a_i + 1:]:
                if b["i0"] > a["end"] and b["i0"] > a["c0"]:
                    if b["fence"] <= a["fence"]:
                        res.violations.append(
                            "%s: fences do not rise in grant order: %s, then %s"
                            % (name, _fmt(a), _fmt(b)))
                if b["c0"] < a["end"] and a["c0"] < b["end"]:
                    why = excuse(name, a, b) if excuse is not None else None
                    if why:
                        res.excused.append("%s: %s; %s (%s)" % (name, _fmt(a), _fmt(b), why))
                    else:
                        res.violations.append("%s: two holders at once: %s; %s"
                                              % (name, _fmt(a), _fmt(b)))
        top = None
        for r in sorted((r for r in ops if r["name"] == name and r["op"] in ("write", "read")),
                        key=lambda r: r["i"]):
            if r["op"] == "read":       # a store whose reads register fences too
                top = r["fence"] if top is None else max(top, r["fence"])
                continue
            ok = top is None or r["fence"] >= top
            if ok != (r["res"] == "accepted"):
                res.violations.append("%s: the store %s a write with fence %s (highest "
                                      "accepted so far %s)" % (name, r["res"], r["fence"], top))
            if r["res"] == "accepted":
                top = r["fence"]
    if waits:
        res.violations += free_waits(ops, **waits)
    return res


class FencedStore(object):
    """An in-process fenced store per name: a write is accepted iff its fence
    is at least the highest accepted so far; every verdict goes to the
    history."""

    def __init__(self, history):
        self.h = history
        self.mu = threading.Lock()
        self.top = {}

    def write(self, proc, name, fence):
        with self.mu:
            top = self.top.get(name)
            ok = top is None or fence >= top
            if ok:
                self.top[name] = fence
            self.h.store(proc, name, fence, ok)
            return ok


# ---- read/write locks, semaphores, elections -------------------------------------

def _end_of(r, s):
    """The earliest end of section s by its ending record r (as sections())."""
    if r["op"] == "lost":
        return r["t1"] - LOST_TOL_S, "by !LOST " + r["res"]
    if r["op"] == "closed":
        return s["i0"], "at an unknown moment (%s)" % r["res"]
    return r["t0"], "by " + r["op"]


def _overlap(a, b):
    return b["c0"] < a["end"] and a["c0"] < b["end"]


def check_rwlock(ops, excuse=None):
    """A read/write lock, per name. Records: "rlock"/"wlock" (t0 sent, t1
    answered OK with "fence"; "info" indeterminate), ended by "runlock"/
    "wunlock" (t0: sent), "lost" (t1: arrived) or "closed" (unknown).
    Rules: a write section overlaps no other section for certain (readers
    share); write fences are unique and rise in real-time grant order; a
    read's fence is at least that of every write granted before the read
    was sent, and below that of every write sent after the read was granted
    (a read returns the counter, a write raises it). excuse(name, a, b), if
    given, may name a documented fault that explains a writer alongside
    another holder (as check's)."""
    res = Result()
    res.ops = len(ops)
    res.names = len(set(r["name"] for r in ops))
    per, open_ = {}, {}
    for r in sorted(ops, key=lambda r: r["i"]):
        key = (r["name"], r["proc"])
        if r["op"] in ("rlock", "wlock"):
            if r["res"] == "ok":
                s = dict(proc=r["proc"], fence=r["fence"], i0=r["t0"], c0=r["t1"],
                         end=float("inf"), how="never", mode=r["op"][0].upper())
                open_[key] = s
                per.setdefault(r["name"], []).append(s)
            elif r["res"] == "info":
                res.indeterminate += 1
        elif r["op"] in ("runlock", "wunlock", "lost", "closed") and key in open_:
            s = open_.pop(key)
            s["end"], s["how"] = _end_of(r, s)
    for name, ss in sorted(per.items()):
        ss.sort(key=lambda s: s["c0"])
        res.sections += len(ss)
        seen = {}
        for a_i, a in enumerate(ss):
            if a["mode"] == "W":
                if a["fence"] in seen:
                    res.violations.append("%s: write fence %s granted twice: %s; %s" % (
                        name, a["fence"], _fmt(seen[a["fence"]]), _fmt(a)))
                seen[a["fence"]] = a
            for b in ss[a_i + 1:]:
                if "W" in (a["mode"], b["mode"]) and _overlap(a, b):
                    why = excuse(name, a, b) if excuse is not None else None
                    what = "%s %s; %s %s" % (a["mode"], _fmt(a), b["mode"], _fmt(b))
                    if why:
                        res.excused.append("%s: %s (%s)" % (name, what, why))
                    else:
                        res.violations.append("%s: a writer alongside another holder: %s"
                                              % (name, what))
                if b["i0"] > a["c0"] and a["mode"] == "W":
                    if b["fence"] < a["fence"] or (b["mode"] == "W" and b["fence"] == a["fence"]):
                        res.violations.append("%s: fences do not rise in grant order: %s %s, "
                                              "then %s %s" % (name, a["mode"], _fmt(a),
                                                               b["mode"], _fmt(b)))
                elif b["i0"] > a["c0"] and b["mode"] == "W" and b["fence"] <= a["fence"]:
                    res.violations.append("%s: a write's fence not above an earlier read's: "
                                          "R %s, then W %s" % (name, _fmt(a), _fmt(b)))
    return res


def check_semaphore(ops, size, tol_s=0.0):
    """A counting semaphore of `size` permits, per name (no fences: a
    semaphore raises none). Records, in the order they happened: "acquire"
    (t0 sent, t1 answered OK, "permits", "lease" ms: 0 for the watchdog's,
    "wlease" the watchdog's lease; "info" indeterminate: no effect counted),
    "release" (t0 before it was sent, "permits": those given back, None for
    all), "lost"/"closed" (every permit of the proc ends), "orphaned" (its
    daemon died: the proc's permits live on until their lease runs out).
    A holding counts from its grant's answer until its release was sent,
    and never beyond (sent) + lease - tol_s (a lease running out without
    the watchdog, or an orphan's). Rule: at each grant, the permits counted
    are at most size."""
    res = Result()
    res.ops = len(ops)
    res.names = len(set(r["name"] for r in ops))
    held = {}       # (name, proc) -> [dict(k, until)]
    orphans = {}    # name -> [dict(k, until)]
    peak = {}
    for r in sorted(ops, key=lambda r: r["i"]):
        name, key = r["name"], (r["name"], r["proc"])
        if r["op"] == "acquire":
            if r["res"] != "ok":
                res.indeterminate += r["res"] == "info"
                continue
            lease = r.get("lease") or 0
            until = r["t0"] + lease / 1000.0 - tol_s if lease else float("inf")
            h = dict(k=r["permits"], until=until, t0=r["t0"],
                     lease=lease or r.get("wlease") or 0, proc=r["proc"], c0=r["t1"])
            held.setdefault(key, []).append(h)
            res.sections += 1
            t = r["t1"]
            alive = [x for (n, _), xs in held.items() if n == name for x in xs
                     if x["until"] > t] + [x for x in orphans.get(name, []) if x["until"] > t]
            n = sum(x["k"] for x in alive)
            peak[name] = max(peak.get(name, 0), n)
            if n > size:
                res.violations.append("%s: %d permits held of %d after %s's grant of %d at "
                                      "%.3f: %s" % (name, n, size, r["proc"], r["permits"], t,
                                                    "; ".join("%s %d since %.3f" % (
                                                        x["proc"], x["k"], x["c0"])
                                                        for x in alive)))
        elif r["op"] == "release" and key in held:
            left = r.get("permits")
            xs = held[key]
            while xs and (left is None or left > 0):
                x = xs[-1]
                take = x["k"] if left is None else min(left, x["k"])
                x["k"] -= take
                if left is not None:
                    left -= take
                if x["k"] == 0:
                    xs.pop()
            if not xs:
                del held[key]
        elif r["op"] in ("lost", "closed"):
            held.pop(key, None)
        elif r["op"] == "orphaned":
            for x in held.pop(key, []):
                x["until"] = min(x["until"], x["t0"] + x["lease"] / 1000.0 - tol_s)
                orphans.setdefault(name, []).append(x)
    res.peak = peak
    return res


def check_election(ops, excuse=None):
    """An election, per name. Records: "elect" (t0 sent, t1 answered OK
    with "fence"; "info" indeterminate), ended by "resign" (t0: sent; a
    leased leadership's end no later than its lease allows is given as
    a "resign" at that moment), "lost" or "closed"; and an observer's
    "observe" records (proc: the observer; "fence": the leader told, 0
    for NONE, -1 for a new connection). Rules: the leaderships are a
    fenced mutex's sections (check(): at most one leader at a time but
    where excuse() names a fault and the later fence is the greater;
    fences unique and rising in grant order); every observer's fences
    rise strictly, the same one told again only after a NONE (or on a new
    connection, whose first answer may repeat the last)."""
    alias = {"elect": "lock", "resign": "unlock"}
    leads = [dict(r, op=alias.get(r["op"], r["op"])) for r in ops if r["op"] != "observe"]
    res = check(leads, excuse)
    res.ops = len(ops)
    res.names = len(set(r["name"] for r in ops))
    res.told = 0
    last = {}
    for r in sorted((r for r in ops if r["op"] == "observe"), key=lambda r: r["i"]):
        key = (r["name"], r["proc"])
        f = r["fence"]
        top, none = last.get(key, (0, True))
        if f <= 0:
            last[key] = (top, True)
            continue
        res.told += 1
        if f < top or (f == top and not none):
            res.violations.append("%s: observer %s told fence %s after %s%s" % (
                r["name"], r["proc"], f, top, "" if f < top else " with no NONE between"))
        last[key] = (max(f, top), False)
    return res


# ---- chaos.py's stages: their fenced stores' records as histories ------------------

EXCUSE_SLACK_S = 7.0   # a fault's window: lease (5 s at most) + 1.5 s + timers
EXCUSING = ("stall-watchdog", "stall-lease", "redis-restart", "redis-pause", "dlockd-kill",
            "failover-kill", "failover-forced", "cl-kill", "cl-pause", "q-restart-empty",
            "q-majority", "q-pause", "q-kill2")


def from_store(st, name):
    """chaos.py's FencedStore st as ops of one name: each grant its LOCK
    (sent .. reply), its read and write (in the store's order), its end:
    UNLOCK answered OK ends it when sent; any other outcome (!LOST, NOTHELD,
    ERR BACKEND, a broken connection, a SIGKILL) leaves the end unknown but
    for the grant itself ("closed")."""
    ops = []
    for g in st.grant_order:
        proc = "w%d.%d" % (g["wid"], g["inc"])
        ops.append(dict(proc=proc, name=name, op="lock", t0=g["t_req"], t1=g["t_start"],
                        res="ok", fence=g["fence"], i=2 * g["read_seq"]))
        ops.append(dict(proc=proc, name=name, op="read", t0=g["t_read"], t1=g["t_read"],
                        fence=g["fence"], res="", i=2 * g["read_seq"] + 1))
        w = g["write"]
        if w is not None:
            ops.append(dict(proc=proc, name=name, op="write", t0=w["t"], t1=w["t"],
                            fence=w["fence"], res="accepted" if w["accepted"] else "rejected",
                            i=2 * w["seq"] + 1))
        if g["t_end"] is not None and g["outcome"] == "ok":
            ops.append(dict(proc=proc, name=name, op="unlock", t0=g["t_end"],
                            t1=g["t_done"] or g["t_end"], res="OK", i=1 << 60))
        else:
            ops.append(dict(proc=proc, name=name, op="closed", t0=g["t_start"],
                            t1=g["t_start"], res=str(g["outcome"]), i=1 << 60))
    return ops


def check_stores(c, dump_dir=None):
    """The checker over every chaos.py store (one name each; the standalone
    and failover stages share "chaos"): overlaps are excused only inside a
    fault's window (EXCUSING kinds) with the later grant's fence the greater;
    each store's history goes to <dump_dir>/history-<name>.jsonl. One check
    per run, with operations, names and the first violation."""
    faults = [f for f in c.faults if f["kind"] in EXCUSING]

    def excuse(name, a, b):
        t = max(a["c0"], b["c0"])
        if min(a["fence"], b["fence"]) == (a if a["c0"] < b["c0"] else b)["fence"]:
            for f in faults:
                if f["t0"] - EXCUSE_SLACK_S <= t <= f["t1"] + EXCUSE_SLACK_S:
                    return f["kind"]
        return None

    total = Result()
    for st in c.stores:
        name = getattr(st, "lock_name", None) or os.path.basename(st.path)
        ops = from_store(st, name)
        if dump_dir:
            with open(os.path.join(dump_dir, "history-%s.jsonl" % name), "w") as f:
                for r in ops:
                    f.write(json.dumps(r) + "\n")
        r = check(ops, excuse)
        total.ops += r.ops
        total.names += r.names
        total.sections += r.sections
        total.violations += r.violations
        total.excused += r.excused
    c.check("the history checker: no two holders at once outside a fault's window, fences "
            "unique and rising, the store takes only the highest",
            not total.violations,
            "%d ops, %d names, %d sections, %d overlaps in a fault's window (fenced)%s"
            % (total.ops, total.names, total.sections, len(total.excused),
               "; first violation: " + total.violations[0] if total.violations else ""))
    return total
