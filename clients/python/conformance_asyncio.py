#!/usr/bin/env python3
"""The python-asyncio conformance adapter: tests/conformance/README.md's protocol over dlock_asyncio's public API."""
# SPDX-License-Identifier: MIT
#
# Each command runs as its own asyncio task; `cancel` is task.cancel().
# Loss events come from each handle's `lost` Event.

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dlock_asyncio as da  # noqa: E402

_ERROR_KINDS = [
    (da.ConnectFailed, "connect"),
    (da.ConnectionClosed, "closed"),
    (da.KindError, "kind"),
    (da.NotHeld, "notheld"),
    (da.LimitError, "limit"),
    (da.Denied, "denied"),
    (da.BackendError, "backend"),
]


def error_kind(e):
    if isinstance(e, da.LockLost):
        return "closed" if e.reason == "closed" else "notheld"
    if isinstance(e, da.BadRequest):
        if e.code == "NAME" or (e.code is None and "name" in e.message):
            return "name"
        return "args"
    for cls, kind in _ERROR_KINDS:
        if isinstance(e, cls):
            return kind
    return "other"


def lease_arg(word):
    """A <lease> in ms: an int, or a float when it has a fraction (a lease
    below 1 ms), passed as it is for the client to round."""
    return float(word) if "." in word else int(word)


def name_arg(word):
    """lock's <name>: %<hex> is the name's bytes in hex (% alone: empty)."""
    if word.startswith("%"):
        return bytes.fromhex(word[1:]).decode("latin-1")
    return word


def one_line(text):
    return " ".join(str(text).split()) or "-"


def leader_words(leader):
    return "NONE" if leader is None else "%d %s" % leader


def render_status(st):
    if st.state == "FREE":
        words = []
    elif st.state == "MINE":
        words = [st.holds, st.ttl_ms, st.fence]
    elif st.state == "TAKEN":
        words = [st.ttl_ms]
    elif st.state in ("READ", "WRITE"):
        words = [st.readers, st.holds, st.ttl_ms]
    else:   # SEM
        words = [st.available, st.holds]
    return " ".join(["ok", st.state] + [str(w) for w in words])


class Adapter:
    def __init__(self):
        self.clients = {}       # cid -> Client
        self.handles = {}       # hid -> (cid, handle)
        self.watchers = {}      # hid -> task printing "* lost"
        self.tasks = {}         # rid -> the command's task
        self.observing = {}     # oid -> task telling "* leader"

    def say(self, line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    # -- handles and their loss --

    def keep(self, cid, hid, h):
        old = self.watchers.pop(hid, None)
        if old is not None:
            old.cancel()
        self.handles[hid] = (cid, h)
        self.watchers[hid] = asyncio.create_task(self.watch(hid, h))

    async def watch(self, hid, h):
        await h.lost.wait()
        self.say("* lost %s %s" % (hid, h.reason))

    def forget_if_released(self, hid, h):
        if getattr(h, "holds", None) == 0 or getattr(h, "permits", None) == 0:
            if h.reason is None:
                w = self.watchers.pop(hid, None)
                if w is not None:
                    w.cancel()

    def client(self, cid):
        try:
            return self.clients[cid]
        except KeyError:
            raise da.DlockError(None, "no client %s" % cid) from None

    def handle(self, hid):
        try:
            return self.handles[hid][1]
        except KeyError:
            raise da.DlockError(None, "no handle %s" % hid) from None

    # -- commands --

    async def c_connect(self, cid, path):
        self.clients[cid] = await da.connect(None if path == "-" else path)
        return "ok"

    async def c_close(self, cid):
        c = self.clients.pop(cid, None)
        if c is not None:
            await c.close()
            # Let each handle's loss be told before the answer.
            mine = [self.watchers[hid] for hid, (owner, _) in self.handles.items()
                    if owner == cid and hid in self.watchers]
            await asyncio.gather(*mine, return_exceptions=True)
        return "ok"

    async def grant(self, cid, hid, pending):
        h = await pending
        self.keep(cid, hid, h)
        return "ok %d %d" % (h.fence, h.holds)

    async def c_lock(self, cid, hid, name, lease):
        return await self.grant(cid, hid, self.client(cid).lock(name_arg(name),
                                                                lease_arg(lease)))

    async def c_trylock(self, cid, hid, name, wait, lease):
        try:
            return await self.grant(cid, hid, self.client(cid).trylock(name, int(wait),
                                                                       int(lease)))
        except da.Timeout:
            return "timeout"

    async def c_rlock(self, cid, hid, name, lease):
        return await self.grant(cid, hid, self.client(cid).rlock(name, int(lease)))

    async def c_wlock(self, cid, hid, name, lease):
        return await self.grant(cid, hid, self.client(cid).wlock(name, int(lease)))

    async def c_fairlock(self, cid, hid, name, lease):
        return await self.grant(cid, hid, self.client(cid).fairlock(name, int(lease)))

    async def c_reenter(self, hid):
        fence, holds = await self.handle(hid).relock()
        return "ok %d %d" % (fence, holds)

    async def c_unlock(self, hid):
        h = self.handle(hid)
        left = await h.unlock()
        self.forget_if_released(hid, h)
        return "ok %d" % left

    async def c_renew(self, hid, lease):
        return "ok %d" % await self.handle(hid).renew(int(lease))

    async def c_seminit(self, cid, name, permits):
        return "ok %d" % await self.client(cid).seminit(name, int(permits))

    async def c_acquire(self, cid, hid, name, permits, lease):
        p = await self.client(cid).acquire(name, int(permits), int(lease))
        self.keep(cid, hid, p)
        return "ok %d" % p.held

    async def c_release(self, hid, permits):
        p = self.handle(hid)
        held = await p.release(int(permits))
        self.forget_if_released(hid, p)
        return "ok %d" % held

    async def c_latchset(self, cid, name, count):
        return "ok %d" % await self.client(cid).latch_set(name, int(count))

    async def c_countdown(self, cid, name):
        return "ok %d" % await self.client(cid).count_down(name)

    async def c_latchcount(self, cid, name):
        return "ok %d" % await self.client(cid).latch_count(name)

    async def c_await(self, cid, name):
        await self.client(cid).await_latch(name)
        return "ok"

    async def c_tryawait(self, cid, name, wait):
        try:
            await self.client(cid).tryawait(name, int(wait))
        except da.Timeout as e:
            return "timeout %d" % e.count
        return "ok"

    async def c_status(self, cid, name):
        return render_status(await self.client(cid).status(name))

    async def c_ping(self, cid):
        await self.client(cid).ping()
        return "ok"

    async def c_list(self, cid, pattern, limit):
        got = await self.client(cid).list(pattern, None if limit == "-" else int(limit))
        words = ["ok", len(got.entries), 1 if got.more else 0]
        for e in got.entries:
            words += [e.name, e.kind, "-" if e.fence is None else e.fence, e.holders_total]
        return " ".join(str(w) for w in words)

    async def c_contend(self, cid, tasks, names, rounds, prefix):
        c = self.client(cid)
        holding, last = {}, {}
        counts = {"grants": 0, "overlaps": 0, "nonrising": 0}

        async def worker(t):
            for r in range(int(rounds)):
                name = "%s%d" % (prefix, (t + r) % int(names))
                async with c.lock(name) as h:
                    if holding.get(name):
                        counts["overlaps"] += 1
                    if h.fence <= last.get(name, 0):
                        counts["nonrising"] += 1
                    holding[name], last[name] = True, h.fence
                    counts["grants"] += 1
                    await asyncio.sleep(0)
                    holding[name] = False

        await asyncio.gather(*(worker(t) for t in range(int(tasks))))
        return "ok %(grants)d %(overlaps)d %(nonrising)d" % counts

    def held_by(self, cid):
        """The handles through which client cid holds plain locks or sets:
        an mlock counts their names as reentries."""
        return [h for owner, h in self.handles.values()
                if owner == cid and isinstance(h, (da.Lock, da.MultiLock))]

    async def mgrant(self, cid, hid, pending):
        m = await pending
        self.keep(cid, hid, m)
        return " ".join(["ok"] + [str(f) for f in m.fences])

    async def c_mlock(self, cid, hid, lease, *names):
        return await self.mgrant(cid, hid, self.client(cid).mlock(
            names, int(lease), held=self.held_by(cid)))

    async def c_trymlock(self, cid, hid, wait, lease, *names):
        try:
            return await self.mgrant(cid, hid, self.client(cid).trymlock(
                names, int(wait), int(lease), held=self.held_by(cid)))
        except da.Timeout:
            return "timeout"

    async def c_munlock(self, hid):
        m = self.handle(hid)
        left = await m.unlock()
        if m.reason is None:
            w = self.watchers.pop(hid, None)
            if w is not None:
                w.cancel()
        return " ".join(["ok"] + [str(n) for n in left])

    async def c_elect(self, cid, hid, name, value, lease):
        h = await self.client(cid).elect(name, value, int(lease))
        self.keep(cid, hid, h)
        return "ok %d" % h.fence

    async def c_resign(self, hid):
        h = self.handle(hid)
        led = await h.resign()
        if h.reason is None:
            w = self.watchers.pop(hid, None)
            if w is not None:
                w.cancel()
        return "ok %d" % led

    async def c_leader(self, cid, name):
        return "ok " + leader_words(await self.client(cid).leader(name))

    async def c_observe(self, cid, oid, name):
        changes = self.client(cid).observe(name)
        try:
            first = await anext(changes)
        except BaseException:
            await changes.aclose()
            raise
        old = self.observing.pop(oid, None)
        if old is not None:
            old.cancel()
        # Created now, it first runs after this command's answer is written.
        self.observing[oid] = asyncio.create_task(self.tell(oid, changes))
        return "ok " + leader_words(first)

    async def tell(self, oid, changes):
        try:
            async for leader in changes:
                self.say("* leader %s %s" % (oid, leader_words(leader)))
        except da.DlockError:
            pass        # the connection ended
        finally:
            await changes.aclose()

    async def c_unobserve(self, oid):
        t = self.observing.pop(oid, None)
        if t is None:
            raise da.DlockError(None, "no observation %s" % oid)
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)
        return "ok"

    # -- the loop --

    async def run_command(self, rid, verb, args):
        try:
            fn = getattr(self, "c_" + verb, None)
            if fn is None:
                raise da.DlockError(None, "unknown command %s" % verb)
            try:
                answer = await fn(*args)
            except (TypeError, ValueError) as e:
                raise da.BadRequest(None, "bad arguments: %s" % e) from None
        except asyncio.CancelledError:
            answer = "err cancelled the command was cancelled"
        except da.DlockError as e:
            answer = "err %s %s" % (error_kind(e), one_line(e))
        except Exception as e:      # an adapter bug, told to the runner
            answer = "err other %s" % one_line("%s: %s" % (type(e).__name__, e))
        finally:
            self.tasks.pop(rid, None)
        self.say("%s %s" % (rid, answer))

    def command(self, line):
        words = line.split(" ")
        if len(words) < 2:
            return
        rid, verb, args = words[0], words[1], words[2:]
        if verb == "cancel":
            t = self.tasks.get(args[0]) if args else None
            if t is not None:
                t.cancel()
            self.say("%s ok" % rid)
            return
        self.tasks[rid] = asyncio.create_task(self.run_command(rid, verb, args))

    async def main(self):
        loop = asyncio.get_running_loop()
        self.say("* ready")
        while True:
            # A thread reads standard input: a pipe, a file or /dev/null alike.
            raw = await loop.run_in_executor(None, sys.stdin.buffer.readline)
            if not raw:
                break
            line = raw.decode().rstrip("\n")
            if line:
                self.command(line)
        # Commands still running get a moment to finish; closing the
        # clients then ends the rest (they answer err closed).
        if self.tasks:
            await asyncio.wait(list(self.tasks.values()), timeout=2)
        for c in list(self.clients.values()):
            await c.close()
        if self.tasks:
            await asyncio.wait(list(self.tasks.values()), timeout=5)
        for w in list(self.watchers.values()) + list(self.observing.values()):
            w.cancel()


if __name__ == "__main__":
    asyncio.run(Adapter().main())
