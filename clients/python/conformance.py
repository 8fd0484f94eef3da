#!/usr/bin/env python3
"""The blocking Python client's conformance adapter (tests/conformance/README.md).

A thread per client runs its commands one at a time and, while idle, watches
its connection for loss events (Client.check()); `cancel` calls
Client.cancel() from the main thread.
"""
# SPDX-License-Identifier: MIT

import collections
import os
import select
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dlock  # noqa: E402

_out = threading.Lock()


def say(*words):
    with _out:
        sys.stdout.write(" ".join(str(w) for w in words) + "\n")
        sys.stdout.flush()


def err_kind(e):
    if isinstance(e, dlock.Cancelled):
        return "cancelled"
    if isinstance(e, dlock.ConnectFailed):
        return "connect"
    if isinstance(e, dlock.ConnectionClosed):
        return "closed"
    if isinstance(e, dlock.BadRequest):
        if e.code == "NAME" or (e.code is None and "lock name" in e.message):
            return "name"
        return "args"
    return {dlock.KindError: "kind", dlock.NotHeld: "notheld", dlock.LockLost: "notheld",
            dlock.LimitError: "limit", dlock.Denied: "denied",
            dlock.BackendError: "backend"}.get(type(e), "other")


def lease_arg(word):
    """A <lease> in ms: an int, or a float when it has a fraction (a lease
    below 1 ms), passed as it is for the client to round."""
    return float(word) if "." in word else int(word)


def name_arg(word):
    """lock's <name>: %<hex> is the name's bytes in hex (% alone: empty)."""
    if word.startswith("%"):
        return bytes.fromhex(word[1:]).decode("latin-1")
    return word


class Handle(object):
    def __init__(self, cid, name, kind, lease, permits=0):
        self.cid, self.name, self.kind, self.lease = cid, name, kind, lease
        self.permits = permits
        self.live = True
        self.names = ()         # a multi-lock's
        self.mlock = None


class Worker(object):
    """One client: its connection and the thread that runs its commands."""

    def __init__(self, adapter, cid, client):
        self.adapter, self.cid, self.c = adapter, cid, client
        self.q = collections.deque()
        self.cv = threading.Condition()
        self.current = None     # the rid running now
        self.wake_r, self.wake_w = os.pipe()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def put(self, rid, fn):
        with self.cv:
            self.q.append((rid, fn))
        os.write(self.wake_w, b"x")

    def cancel(self, rid):
        """Drop rid if it waits in the queue; else cancel it while it runs."""
        with self.cv:
            for item in self.q:
                if item[0] == rid:
                    self.q.remove(item)
                    say(rid, "err", "cancelled", "dropped before it ran")
                    return
        # Running (or about to): cancel() finds its wait once it is sent.
        while True:
            with self.cv:
                if self.current != rid:
                    return
            if self.c.cancel():
                return
            time.sleep(0.001)   # the call has not reached its wait yet

    def loop(self):
        while True:
            with self.cv:
                item = self.q.popleft() if self.q else None
                self.current = item[0] if item else None
            if item is None:
                self.idle()
                continue
            rid, fn = item
            if fn is None:
                return
            try:
                say(rid, *fn())
            except dlock.DlockError as e:
                say(rid, "err", err_kind(e), str(e).replace("\n", " "))
                if isinstance(e, dlock.ConnectionClosed):
                    self.adapter.lost_all(self.cid, "closed")
            except Exception as e:
                say(rid, "err", "other", "%s: %s" % (type(e).__name__, e))
            with self.cv:
                self.current = None
            self.events()

    def idle(self):
        """Wait for a command, meanwhile reporting the connection's events."""
        fds = [self.wake_r]
        if not self.c.closed:
            fds.append(self.c.fileno())
        r, _, _ = select.select(fds, [], [])
        if self.wake_r in r:
            os.read(self.wake_r, 4096)
        if len(fds) > 1 and fds[1] in r:
            self.events()

    def events(self):
        """Client.check(): each loss reported to its handles."""
        if self.c.closed:
            return
        while True:
            try:
                self.c.check()
                return
            except dlock.LockLost as e:
                self.adapter.lost_name(self.cid, e.name, e.reason)
            except dlock.DlockError:
                self.adapter.lost_all(self.cid, "closed")
                return

    def stop(self):
        self.put(None, None)
        self.thread.join()
        os.close(self.wake_r)
        os.close(self.wake_w)


class Adapter(object):
    def __init__(self):
        self.workers = {}
        self.handles = {}
        self.lock = threading.Lock()
        self.rid_worker = {}
        self.observations = {}  # oid -> (worker, Observation)

    def lost_name(self, cid, name, reason):
        with self.lock:
            hs = [(hid, h) for hid, h in self.handles.items()
                  if h.cid == cid and h.live and (h.name == name or name in h.names)]
            for hid, h in hs:
                h.live = False
        for hid, _ in hs:
            say("*", "lost", hid, reason)

    def lost_all(self, cid, reason):
        with self.lock:
            hs = [hid for hid, h in self.handles.items() if h.cid == cid and h.live]
            for hid in hs:
                self.handles[hid].live = False
        for hid in hs:
            say("*", "lost", hid, reason)

    def grant(self, hid, cid, name, kind, lease, got):
        with self.lock:
            self.handles[hid] = Handle(cid, name, kind, lease)
        return ["ok", got[0], got[1]]

    # -- commands (run on the client's thread) --

    def do(self, w, op, args):
        c, cid = w.c, w.cid
        if op in ("lock", "rlock", "wlock", "fairlock"):
            hid, name, lease = args[0], name_arg(args[1]), lease_arg(args[2])
            return self.grant(hid, cid, name, op, lease, getattr(c, op)(name, lease))
        if op == "trylock":
            hid, name, wait, lease = args[0], args[1], int(args[2]), int(args[3])
            try:
                got = c.trylock(name, wait, lease)
            except dlock.Timeout:
                return ["timeout"]
            return self.grant(hid, cid, name, "lock", lease, got)
        if op in ("mlock", "trymlock"):
            k = 3 if op == "trymlock" else 2    # names start after lease (and wait)
            hid, nums, names = args[0], [int(w) for w in args[1:k]], args[k:]
            try:
                m = c.mlock(names, nums[0]) if op == "mlock" else c.trymlock(names, *nums)
            except dlock.Timeout:
                return ["timeout"]
            with self.lock:
                h = self.handles[hid] = Handle(cid, None, "mlock", nums[-1])
                h.names, h.mlock = tuple(m.names), m
            return ["ok"] + m.fences
        if op == "close":
            c.close()
            self.lost_all(cid, "closed")
            return ["ok"]
        if op == "seminit":
            return ["ok", 1 if c.seminit(args[0], int(args[1])) else 0]
        if op == "acquire":
            hid, name, permits, lease = args[0], args[1], int(args[2]), int(args[3])
            held = c.acquire(name, permits, lease)
            with self.lock:
                self.handles[hid] = Handle(cid, name, "sem", lease, permits)
            return ["ok", held]
        if op == "latchset":
            return ["ok", 1 if c.latch_set(args[0], int(args[1])) else 0]
        if op == "countdown":
            return ["ok", c.count_down(args[0])]
        if op == "latchcount":
            return ["ok", c.latch_count(args[0])]
        if op == "await":
            c.await_latch(args[0])
            return ["ok"]
        if op == "tryawait":
            try:
                c.tryawait(args[0], int(args[1]))
            except dlock.Timeout as e:
                return ["timeout", e.count]
            return ["ok"]
        if op == "status":
            st = c.status(args[0])
            if st.state == "FREE":
                return ["ok", "FREE"]
            if st.state == "MINE":
                return ["ok", "MINE", st.holds, st.ttl_ms, st.fence]
            if st.state == "TAKEN":
                return ["ok", "TAKEN", st.ttl_ms]
            if st.state in ("READ", "WRITE"):
                return ["ok", st.state, st.readers, st.holds, st.ttl_ms]
            return ["ok", "SEM", st.available, st.holds]
        if op == "ping":
            c.ping()
            return ["ok"]
        if op == "elect":
            hid, name, value, lease = args[0], args[1], args[2], int(args[3])
            leadership = c.elect(name, value, lease)
            with self.lock:
                h = self.handles[hid] = Handle(cid, name, "elect", lease)
                h.leadership = leadership
            return ["ok", leadership.fence]
        if op == "leader":
            return ["ok"] + self.leader_words(c.leader(args[0]))
        if op == "observe":
            oid, name = args[0], args[1]

            def changed(_name, leader, oid=oid):
                say("*", "leader", oid, *self.leader_words(leader))
            obs = c.observe(name, changed)
            self.observations[oid] = (w, obs)
            return ["ok"] + self.leader_words(obs.leader)
        if op == "list":
            limit = None if args[1] == "-" else int(args[1])
            return self.listing(c.list(args[0], limit))
        if op == "contend":
            return self.contend(c, int(args[0]), int(args[1]), int(args[2]), args[3])
        raise dlock.DlockError(None, "unknown command %s" % op)

    def do_handle(self, w, op, h, args):
        c = w.c
        if op == "reenter":
            fn = {"lock": c.lock, "fairlock": c.fairlock, "rlock": c.rlock, "wlock": c.wlock}
            return ["ok"] + list(fn[h.kind](h.name, h.lease))
        if op == "unlock":
            fn = {"lock": c.unlock, "fairlock": c.unlock, "rlock": c.runlock,
                  "wlock": c.wunlock}[h.kind]
            left = fn(h.name)
            if left == 0:
                h.live = False
            return ["ok", left]
        if op == "renew":
            return ["ok", c.renew(h.name, int(args[0]))]
        if op == "munlock":
            left = h.mlock.unlock()
            h.live = False
            return ["ok"] + left
        if op == "resign":
            was = h.leadership.resign()
            h.live = False
            return ["ok", 1 if was else 0]
        if op == "release":
            left = c.release(h.name, int(args[0]))
            if left == 0:
                h.live = False
            return ["ok", left]
        raise dlock.DlockError(None, "unknown command %s" % op)

    @staticmethod
    def listing(got):
        words = ["ok", len(got.entries), 1 if got.more else 0]
        for e in got.entries:
            words += [e.name, e.kind, "-" if e.fence is None else e.fence, e.holders_total]
        return words

    @staticmethod
    def leader_words(leader):
        return ["NONE"] if leader is None else [leader[0], leader[1]]

    def contend(self, c, tasks, names, rounds, prefix):
        """A blocking client serves one call at a time: the tasks take
        their turns one after another on this thread."""
        grants = overlaps = nonrising = 0
        holder, last = {}, {}
        for r in range(rounds):
            for t in range(tasks):
                name = "%s%d" % (prefix, (t + r) % names)
                fence, _ = c.lock(name)
                grants += 1
                if holder.get(name) is not None:
                    overlaps += 1
                if fence <= last.get(name, 0):
                    nonrising += 1
                holder[name], last[name] = t, fence
                holder[name] = None
                c.unlock(name)
        return ["ok", grants, overlaps, nonrising]

    # -- the main thread --

    def command(self, line):
        words = line.split(" ")
        if len(words) < 2:
            return
        rid, op, args = words[0], words[1], words[2:]
        if op == "connect":
            cid, path = args[0], args[1]
            try:
                c = dlock.Client(None if path == "-" else path)
            except dlock.DlockError as e:
                say(rid, "err", err_kind(e), str(e))
                return
            self.workers[cid] = Worker(self, cid, c)
            say(rid, "ok")
            return
        if op == "cancel":
            w = self.rid_worker.get(args[0])
            say(rid, "ok")
            if w is not None:
                w.cancel(args[0])
            return
        if op == "unobserve":
            w, obs = self.observations.get(args[0], (None, None))
            if w is None:
                say(rid, "err", "other", "no observation", args[0])
                return
            self.rid_worker[rid] = w

            def unobserve():
                obs.close()
                return ["ok"]
            w.put(rid, unobserve)
            return
        if op in ("reenter", "unlock", "renew", "release", "resign", "munlock"):
            h = self.handles.get(args[0])
            if h is None:
                say(rid, "err", "notheld", "no handle", args[0])
                return
            w = self.workers[h.cid]
            self.rid_worker[rid] = w
            w.put(rid, lambda: self.do_handle(w, op, h, args[1:]))
            return
        w = self.workers.get(args[0]) if args else None
        if w is None:
            say(rid, "err", "other", "no client", args[0] if args else "")
            return
        self.rid_worker[rid] = w
        w.put(rid, lambda: self.do(w, op, args[1:]))

    def run(self):
        say("*", "ready")
        for line in sys.stdin:
            self.command(line.rstrip("\n"))
        for w in self.workers.values():
            w.stop()
            w.c.close()


if __name__ == "__main__":
    Adapter().run()
