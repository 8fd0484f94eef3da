"""dlock_asyncio: an asyncio client for the dlockd lock daemon, many tasks over one connection.

One Client is one connection to dlockd, and dlockd's lock owner is the
connection: every lock it holds is released when it is closed or the
process dies. Many tasks may share a Client; the client keeps two of its
own tasks from holding one name at once (read locks are shared).

    import dlock_asyncio

    async with await dlock_asyncio.connect() as c:
        async with c.lock("invoices") as h:     # cancelled if the lock is lost
            ...                                  # pass h.fence to the resource

        h = await c.trylock("invoices", wait_ms=2500)   # or dlock.Timeout
        try:
            ...
        finally:
            await h.unlock()

A lock lost while a task runs inside ``async with c.lock(...)`` (its lease
ran out, FORCEUNLOCK, Redis unreachable, the connection ended) cancels that
task, and leaving the block raises LockLost (``.reason`` "expired",
"forced", "backend" or "closed"). Code holding a handle itself watches
``h.lost`` (an asyncio.Event) and ``h.reason``.

Multi-name locks: ``async with c.mlock(["acct-1", "acct-2"]) as m:`` holds
every name of the set (``m.fences``, in the order given), granted all at
once; dlockd holds none of them while it waits, so two sets in opposite
orders cannot deadlock. The block's task is cancelled when any of the names
is lost, and leaving releases what is still held (MUNLOCK).

Leader election: ``async with c.elect("svc", "10.0.0.5:8080") as l:`` runs
the block while this client leads (``l.fence``); the block's task is
cancelled if leadership is lost, and leaving resigns. ``await
c.leader("svc")`` is a Leader (fence, value) or None, and ``async for
leader in c.observe("svc"):`` gets the leader now, then every change
(None: nobody leads).

Every request goes out tagged (``#<tag> LOCK x``), and dlockd answers each
when it is ready: any number of tasks wait at once on one Client, each for
its own names, and a task's unlock, status or list is answered at once
while others wait. Cancelling a task that waits for a lock withdraws its
wait alone (``CANCEL #<tag>``): the await raises CancelledError and nothing
stays held; the other tasks go on waiting.

Standard library only; Python 3.11 or newer. The errors, Status and the
name rules are the blocking module's (dlock); the protocol is described in
proto/PROTOCOL.md of the dlockd sources.
"""
# SPDX-License-Identifier: MIT

import asyncio
import collections
import os
import re

from dlock import (  # noqa: F401  (re-exported)
    DEFAULT_SOCKET, SOCKET_ENV, NAME_MAX, NUM_MAX, PERMITS_MAX, Status,
    DlockError, BadRequest, Timeout, NotHeld, BackendError, LimitError, Denied,
    KindError, LockLost, ConnectionClosed, ConnectFailed, ProtocolError, validate_name,
    LIST_MAX, Who, ListEntry, Listing)
from dlock import (_ERRORS, _check_num, _check_permits, _lease, _parse_status, _to_int, _list_words,
                   _list_count, _parse_listing, _opened)

__all__ = [
    "connect", "Client", "Lock", "MultiLock", "Permits", "Leadership", "Leader", "DEFAULT_SOCKET",
    "SOCKET_ENV", "NAME_MAX", "MNAMES_MAX",
    "NUM_MAX", "PERMITS_MAX", "Status", "DlockError", "BadRequest", "Timeout", "NotHeld",
    "BackendError", "LimitError", "Denied", "KindError", "LockLost", "ConnectionClosed",
    "ConnectFailed", "ProtocolError", "validate_name", "LIST_MAX", "Who", "ListEntry", "Listing",
]

_LINE_MAX = 65536          # longest line accepted from dlockd
_TAG_SPACE = 36 ** 16      # tags are 1 to 16 base-36 digits (the protocol's PROTO_TAG_MAX)
_TAG_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_QUIT_TIMEOUT = 2.0        # seconds close() waits for dlockd to end the connection
MNAMES_MAX = 64            # most names in one multi-lock (the protocol's PROTO_MNAMES_MAX)

_VALUE = re.compile(r"[\x21-\x7e]{1,255}\Z")    # a leader's value: as a name
_VALUE_SHOWN = 40       # characters of a bad value quoted in the error

Leader = collections.namedtuple("Leader", "fence value")
Leader.__doc__ = "A name's leader: its leadership's fence and the value it campaigned with."

# kind: (the request that waits, the one that tries, the release)
_VERBS = {
    "lock": ("LOCK", "TRYLOCK", "UNLOCK"),
    "fair": ("FAIRLOCK", "TRYFAIRLOCK", "UNLOCK"),
    "read": ("RLOCK", "TRYRLOCK", "RUNLOCK"),
    "write": ("WLOCK", "TRYWLOCK", "WUNLOCK"),
}


async def connect(path=None):
    """Connect to dlockd's socket: ``path``, else $DLOCK_SOCKET, else
    /run/dlockd/dlockd.sock. Raises ConnectFailed (naming the path)."""
    if path is None:
        path = os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET
    try:
        reader, writer = await asyncio.open_unix_connection(path, limit=_LINE_MAX)
    except OSError as e:
        raise ConnectFailed(path, e) from None
    return Client(path, reader, writer)


def _line(words):
    return (" ".join(words) + "\n").encode("ascii")


def _lease_words(lease_ms):
    lease = _lease(lease_ms)
    return [str(lease)] if lease else []


def _raise_err(words):
    if words[0] == "ERR":
        code = words[1] if len(words) > 1 else "UNKNOWN"
        raise _ERRORS.get(code, DlockError)(code, " ".join(words[2:]))
    if words[0] not in ("OK", "TIMEOUT"):
        raise ProtocolError(None, "unexpected reply from dlockd: %r" % " ".join(words))


def _grant(words):
    """(fence, holds) of a grant; Timeout for TIMEOUT."""
    _raise_err(words)
    if words[0] == "TIMEOUT":
        raise Timeout(_to_int(words[1]) if len(words) > 1 else -1)
    if len(words) != 3:
        raise ProtocolError(None, "bad grant from dlockd: %r" % " ".join(words))
    return _to_int(words[1]), _to_int(words[2])


def _number(words):
    """The one number of an OK reply (holds left, ttl, permits held)."""
    _raise_err(words)
    if words[0] == "TIMEOUT":
        raise Timeout(_to_int(words[1]) if len(words) > 1 else -1,
                      "permits not acquired within the wait")
    if len(words) != 2:
        raise ProtocolError(None, "bad reply from dlockd: %r" % " ".join(words))
    return _to_int(words[1])


def _check_names(names):
    """``names`` as a list if they are 1 to MNAMES_MAX valid, distinct lock
    names; else BadRequest (ARGS; a bad name as validate_name says)."""
    if isinstance(names, (str, bytes, bytearray)):
        raise BadRequest("ARGS", "a multi-lock takes a list of lock names, not one string")
    try:
        names = list(names)
    except TypeError:
        raise BadRequest("ARGS", "a multi-lock takes a list of lock names, not %s"
                         % type(names).__name__) from None
    if not 1 <= len(names) <= MNAMES_MAX:
        raise BadRequest("ARGS", "a multi-lock takes 1 to %d names, not %d"
                         % (MNAMES_MAX, len(names)))
    out = [validate_name(n) for n in names]
    if len(set(out)) != len(out):
        raise BadRequest("ARGS", "a multi-lock got the same lock twice")
    return out


def _set_words(verb, names):
    return [verb, str(len(names))] + list(names)


def _numbers(n, what):
    """The parse of ``OK <x1> ... <x_n>`` (MLOCK's fences, MUNLOCK's holds
    left); Timeout for TIMEOUT."""
    def parse(words):
        _raise_err(words)
        if words[0] == "TIMEOUT":
            raise Timeout(_to_int(words[1]) if len(words) > 1 else -1)
        if len(words) != n + 1:
            raise ProtocolError(None, "bad %s reply from dlockd: %r" % (what, " ".join(words)))
        return [_to_int(w) for w in words[1:]]
    return parse


def _check_value(value):
    """``value`` if it is a valid leader value (1-255 bytes of 0x21-0x7E, as
    a name), else BadRequest with code ARGS."""
    if type(value) is str and _VALUE.match(value):
        return value
    shown = repr(value[:_VALUE_SHOWN]) + "..." if isinstance(value, str) and \
        len(value) > _VALUE_SHOWN else repr(value)
    raise BadRequest("ARGS", "bad leader value %s: must be 1 to 255 bytes of printable "
                             "ASCII without spaces" % shown)


def _leader(words):
    """The words after OK (LEADER, OBSERVE) or after ``!LEADER <name>``: a
    Leader, or None for NONE."""
    if words == ["NONE"]:
        return None
    if len(words) == 2:
        return Leader(_to_int(words[0]), words[1])
    raise ProtocolError(None, "bad leader from dlockd: %r" % " ".join(words))


def _leader_reply(words):
    _raise_err(words)
    return _leader(words[1:])


def _elected(words):
    """The fence of ELECT's ``OK <fence>``."""
    _raise_err(words)
    if len(words) != 2:
        raise ProtocolError(None, "bad ELECT reply from dlockd: %r" % " ".join(words))
    return _to_int(words[1])


def _unheeded(fut):
    """A request nobody awaits: its error (the connection ended) is not news."""
    if not fut.cancelled():
        fut.exception()


def _resolve(fut, value=None):
    if not fut.done():
        fut.set_result(value)


async def _through(fut):
    """Await fut to its end even when the awaiting task is cancelled
    meanwhile (a release must not be left half done); then raise the
    cancellation, else return fut's result."""
    cancelled = None
    while not fut.done():
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError as e:
            cancelled = e
        except BaseException:
            break
    if cancelled is not None:
        raise cancelled
    return fut.result()


class _Req:
    """One request: its line (untagged: the tag goes before it when it is
    sent), whether dlockd may keep it waiting, how its reply is read
    (parse) and applied (commit, run by the reader as the reply comes, so
    that events after it find the state it made), and what gives back a
    grant nobody awaits any more (undo: a release line)."""

    __slots__ = ("line", "waits", "parse", "commit", "undo", "rollback", "future",
                 "settled", "state", "abandoned", "cancel_sent", "body", "tag")

    def __init__(self, loop, line, waits=False, parse=None, commit=None, undo=None,
                 rollback=None, body=None):
        self.line = line
        self.waits = waits
        self.body = body            # a list for the entry lines of a counted reply (LIST)
        self.parse = parse
        self.commit = commit
        self.undo = undo            # value -> release line, for a grant abandoned
        self.rollback = rollback    # value -> coroutine, for a grant committed and abandoned
        self.future = loop.create_future()
        self.settled = loop.create_future()     # done once nothing of it is pending
        self.state = "new"          # new, sent, answered
        self.tag = None             # its tag while it is in flight (str, no '#')
        self.abandoned = False
        self.cancel_sent = False


class _Gate:
    """A name's local turn among the client's tasks: exclusive (plain,
    fair, write locks) or shared (read locks), first come, first served."""

    __slots__ = ("shared", "exclusive", "waiters", "lent")

    def __init__(self):
        self.shared = 0
        self.exclusive = False
        self.lent = 0       # extra holders of the exclusive turn (a set's reentry)
        self.waiters = collections.deque()      # [shared, future]

    def fits(self, shared):
        return not self.exclusive and (shared or self.shared == 0)

    def take(self, shared):
        if shared:
            self.shared += 1
        else:
            self.exclusive = True

    def idle(self):
        return not self.exclusive and self.shared == 0 and not self.waiters


class _Held:
    """What a grant returns: loss signal, scoping and the client's books."""

    def __init__(self, client, name, lease_ms):
        self.client = client
        self.name = name
        self.lease_ms = lease_ms
        self.lost = asyncio.Event()     # set when the lock is lost
        self.reason = None              # "expired", "forced", "backend" or "closed"
        self._task = None               # the task inside ``async with``
        self._cancelled_task = False
        self._live = False

    def _register(self):
        self._live = True
        self.client._handles.setdefault(self.name, set()).add(self)

    def _end(self):
        """No holds left through this handle (released, lost or never
        granted): forget it. Idempotent."""
        if self._live:
            self._live = False
            hs = self.client._handles.get(self.name)
            if hs is not None:
                hs.discard(self)
                if not hs:
                    del self.client._handles[self.name]

    def _lose(self, reason, _name=None):
        if self.reason is not None or not self._live:
            return
        self.reason = reason
        self._lost_now()
        self._end()
        self.lost.set()
        t = self._task
        if t is not None and not t.done() and t is not asyncio.current_task():
            self._cancelled_task = True
            t.cancel("lock %s lost: %s" % (self.name, reason))

    def _lost_now(self):
        pass

    async def _release_rest(self):
        """After a loss: give back what is still held (a set's other names)."""

    def _check(self):
        if self.reason is not None:
            raise LockLost(self.name, self.reason)

    async def renew(self, lease_ms=0):
        """RENEW: a lease gets lease_ms (0: its own lease); watchdog mode
        stays so. Returns the new ttl in ms."""
        self._check()
        req = _Req(self.client._loop, _line(["RENEW", self.name] + _lease_words(lease_ms)),
                   parse=_number)
        try:
            return await self.client._call(req)
        except NotHeld:
            self._check()
            raise


class Lock(_Held):
    """A grant of a plain, fair, read or write lock. ``fence``: the grant's
    fence; ``holds``: the holds taken through this handle; ``lost``: an
    asyncio.Event set when the lock is lost, ``reason`` saying why."""

    def __init__(self, client, name, kind, lease_ms):
        super().__init__(client, name, lease_ms)
        self.kind = kind
        self.fence = None
        self.holds = 0
        self._gated = False     # holds the name's local turn

    def __repr__(self):
        state = ("lost: %s" % self.reason if self.reason else
                 "holds %d fence %s" % (self.holds, self.fence))
        return "<dlock_asyncio.Lock %s %s %s>" % (self.kind, self.name, state)

    def _release_line(self, _value=None):
        return _line([_VERBS[self.kind][2], self.name])

    def _end(self):
        super()._end()
        if self._gated:
            self._gated = False
            self.client._leave_gate(self.name, self.kind == "read")

    def _lost_now(self):
        self.holds = 0

    def _holds(self, name):
        return self._live and self.reason is None and self.kind == "lock" and \
            self.name == name and self.holds > 0

    def _granted(self, grant):
        self.fence, _ = grant
        self.holds = 1
        self._register()
        return self

    async def relock(self, lease_ms=None):
        """Lock it again through this handle (reentry): the same fence, one
        hold more. Returns (fence, holds)."""
        self._check()
        if self.holds == 0:
            raise NotHeld(None, "lock %s is not held through this handle" % self.name)
        lease = self.lease_ms if lease_ms is None else lease_ms
        c = self.client
        req = _Req(c._loop, _line([_VERBS[self.kind][0], self.name] + _lease_words(lease)),
                   waits=True, parse=_grant, commit=self._regranted, undo=self._release_line,
                   rollback=lambda _v: self.unlock())
        return await c._call(req)

    def _regranted(self, grant):
        if self.reason is not None or not self._live:
            # Lost (or unlocked) while the request went: this grant is a
            # new one that nobody holds.
            self.client._send_release(self._release_line())
            self._check()
            raise NotHeld(None, "lock %s is not held through this handle" % self.name)
        self.fence = grant[0]
        self.holds += 1
        return self.fence, self.holds

    async def unlock(self):
        """One hold less; the last releases the lock. Returns the holds
        left through this handle. LockLost if it was lost. Completes even
        if the task is cancelled meanwhile (then raises CancelledError)."""
        self._check()
        if self.holds == 0:
            raise NotHeld(None, "lock %s is not held through this handle" % self.name)
        req = _Req(self.client._loop, self._release_line(), parse=_number,
                   commit=self._unlocked)
        self.client._send(req)
        try:
            return await _through(req.future)
        except NotHeld:
            self._check()
            self.holds = 0
            self._end()
            raise

    def _unlocked(self, _left):
        if self.holds > 0:
            self.holds -= 1
        if self.holds == 0:
            self._end()
        return self.holds

    async def _release_all(self):
        while self.holds > 0:
            await self.unlock()


class MultiLock(_Held):
    """A grant of a set of names by mlock(): one hold of each. ``names``
    (as given), ``fences`` (in their order); ``lost``: an asyncio.Event set
    when the first of the names is lost, ``reason`` saying why and
    ``lost_name`` which. The other names stay held until unlock()."""

    def __init__(self, client, names, lease_ms):
        super().__init__(client, None, lease_ms)
        self.names = names
        self.fences = None
        self.lost_name = None
        self._held = set()      # names held through this handle
        self._gated = set()     # names whose local turn it has

    @property
    def name(self):
        return self.lost_name or ",".join(self.names)

    @name.setter
    def name(self, _value):
        pass

    def __repr__(self):
        state = ("lost %s: %s" % (self.lost_name, self.reason) if self.reason else
                 "fences %s" % self.fences if self._held else "released")
        return "<dlock_asyncio.MultiLock %s %s>" % (" ".join(self.names), state)

    def fence_of(self, name):
        """The fence of one of the names."""
        return self.fences[self.names.index(name)]

    def _holds(self, name):
        return name in self._held

    def _granted(self, fences):
        self.fences = fences
        self._live = True
        for n in self.names:
            self._held.add(n)
            self.client._handles.setdefault(n, set()).add(self)
        return self

    def _let(self, name):
        """``name`` is no longer held through this handle."""
        self._held.discard(name)
        hs = self.client._handles.get(name)
        if hs is not None:
            hs.discard(self)
            if not hs:
                del self.client._handles[name]
        if name in self._gated:
            self._gated.discard(name)
            self.client._leave_gate(name, False)

    def _end(self):
        for n in list(self._held | self._gated):
            self._let(n)
        self._live = False

    def _lose(self, reason, name=None):
        if name not in self._held:
            return
        self._let(name)
        if not self._held:
            self._live = False
        if self.reason is not None:
            return
        self.lost_name, self.reason = name, reason
        self.lost.set()
        t = self._task
        if t is not None and not t.done() and t is not asyncio.current_task():
            self._cancelled_task = True
            t.cancel("lock %s lost: %s" % (name, reason))

    def _check(self):
        if self.reason is not None:
            raise LockLost(self.lost_name, self.reason)

    def _release_line(self, _value=None):
        return _line(_set_words("MUNLOCK", self.names))

    async def renew(self, lease_ms=0):
        """RENEW of every name still held; returns their new ttls in ms."""
        self._check()
        return [await self.client._call(_Req(self.client._loop, _line(
            ["RENEW", n] + _lease_words(lease_ms)), parse=_number)) for n in list(self._held)]

    async def unlock(self):
        """MUNLOCK: one hold less of every name. Returns the holds left of
        each, in the order of ``names``. If a name was lost, the others
        still held are released and LockLost is raised. Completes even if
        the task is cancelled meanwhile (then raises CancelledError)."""
        while True:
            names = [n for n in self.names if n in self._held]
            if not names:
                self._check()
                raise NotHeld(None, "locks %s are not held through this handle"
                              % " ".join(self.names))
            req = _Req(self.client._loop, _line(_set_words("MUNLOCK", names)),
                       parse=_numbers(len(names), "MUNLOCK"),
                       commit=lambda left, names=names: self._unlocked(names, left))
            self.client._send(req)
            try:
                left = await _through(req.future)
            except NotHeld:
                if self.reason is not None and len(self._held) < len(names):
                    continue    # a !LOST came before the reply: release the rest
                raise
            self._check()
            return left

    def _unlocked(self, names, left):
        for n in names:
            self._let(n)
        self._live = False
        return left

    async def _release_all(self):
        if self._held:
            await self.unlock()

    async def _release_rest(self):
        if self._held:
            try:
                await self.unlock()
            except DlockError:
                pass


class Permits(_Held):
    """Permits of a semaphore taken by one acquire. ``permits``: those held
    through this handle; ``held``: what the connection held of the
    semaphore at the last grant or release; ``lost``, ``reason`` as Lock's."""

    def __init__(self, client, name, permits, lease_ms):
        super().__init__(client, name, lease_ms)
        self.permits = 0
        self.held = 0
        self._asked = permits

    def __repr__(self):
        state = "lost: %s" % self.reason if self.reason else "%d permits" % self.permits
        return "<dlock_asyncio.Permits %s %s>" % (self.name, state)

    def _lost_now(self):
        self.permits = 0

    def _granted(self, held):
        self.held = held
        self.permits = self._asked
        self._register()
        return self

    def _release_line(self, _value=None):
        return _line(["RELEASE", self.name, str(self._asked)])

    async def release(self, permits=None):
        """Give back ``permits`` (default: all held through this handle).
        Returns the permits the connection still holds of the semaphore."""
        self._check()
        n = self.permits if permits is None else _check_permits(permits)
        if n == 0 or n > self.permits:
            raise NotHeld(None, "%d permits of %s are not held through this handle"
                          % (n, self.name))
        req = _Req(self.client._loop, _line(["RELEASE", self.name, str(n)]), parse=_number,
                   commit=lambda held: self._released(n, held))
        self.client._send(req)
        try:
            return await _through(req.future)
        except NotHeld:
            self._check()
            raise

    def _released(self, n, held):
        self.permits -= n
        self.held = held
        if self.permits == 0:
            self._end()
        return held

    async def _release_all(self):
        if self.permits > 0:
            await self.release()


class Leadership(_Held):
    """Leadership of a name, won by Client.elect(). ``fence``: the
    leadership's fence; ``value``: what observers are told; ``lost``,
    ``reason`` as a Lock's."""

    def __init__(self, client, name, value, lease_ms):
        super().__init__(client, name, lease_ms)
        self.value = value
        self.fence = None
        self._gated = False     # holds the name's local turn

    def __repr__(self):
        state = ("lost: %s" % self.reason if self.reason else
                 "fence %s" % self.fence if self._live else "resigned")
        return "<dlock_asyncio.Leadership %s %s %s>" % (self.name, self.value, state)

    def _end(self):
        super()._end()
        if self._gated:
            self._gated = False
            self.client._leave_gate(self.name, False)

    def _granted(self, fence):
        self.fence = fence
        self._register()
        return self

    def _release_line(self, _value=None):
        return _line(["RESIGN", self.name])

    async def resign(self):
        """RESIGN: give leadership up (the next candidate takes over at
        once). True if it was still held, False if it had ended (lost or
        resigned). Completes even if the task is cancelled meanwhile."""
        if not self._live:
            return False
        req = _Req(self.client._loop, self._release_line(), parse=_number,
                   commit=lambda n: self.client._resigned(self.name, n))
        self.client._send(req)
        try:
            return await _through(req.future)
        except ConnectionClosed:
            if self.reason is not None:
                return False
            raise

    async def _release_all(self):
        await self.resign()


class _Observation:
    """One ``observe()``: its queue of leaders, told in the order dlockd
    sent them, a fence never below one told before (and told again only
    after a None)."""

    def __init__(self, client, name):
        self.client = client
        self.name = name
        self.items = collections.deque()
        self.waiter = None
        self.error = None
        self.state = "new"      # new, starting, live, ended
        self._top = -1          # the highest fence told
        self._gap = False       # a None was told since _top
        self._last_none = False

    def answered(self, item):
        """OBSERVE's reply, applied by the reader as it comes."""
        if self.state == "starting":
            self.state = "live"
            self.client._observed[self.name][1].add(self)
            self.offer(item)

    def offer(self, item):
        if self.state != "live":
            return
        if item is None:
            if self._last_none:
                return
            self._last_none = self._gap = True
        else:
            if item.fence < self._top or (item.fence == self._top and not self._gap):
                return
            self._top, self._gap, self._last_none = item.fence, False, False
        self.items.append(item)
        self._wake()

    def fail(self, err):
        self.error = err
        self.stop()
        self._wake()

    def _wake(self):
        if self.waiter is not None:
            _resolve(self.waiter)

    async def get(self):
        while not self.items:
            if self.error is not None:
                raise self.error
            self.waiter = self.client._loop.create_future()
            await self.waiter
        return self.items.popleft()

    def stop(self):
        """No more leaders for it; the client's last observation of the
        name sends UNOBSERVE (not awaited: this runs in the generator's
        finally, and on the connection's end)."""
        was, self.state = self.state, "ended"
        if was not in ("starting", "live"):
            return
        c = self.client
        entry = c._observed.get(self.name)
        if entry is None:
            return
        entry[1].discard(self)
        entry[0] -= 1
        if entry[0] == 0:
            del c._observed[self.name]
            if c._closed is None:
                req = _Req(c._loop, _line(["UNOBSERVE", self.name]))
                req.future.add_done_callback(_unheeded)
                c._send(req)


class _Pending:
    """What lock(), trylock(), acquire() ... return: ``await`` it for the
    handle (release it yourself), or ``async with`` it: the task running
    the block is cancelled if the lock is lost, leaving the block raises
    LockLost then, and the lock is released at the exit."""

    def __init__(self, start):
        self._start = start
        self._h = None

    def __await__(self):
        return self._start().__await__()

    async def __aenter__(self):
        h = await self._start()
        if h.reason is not None:
            await h._release_rest()     # lost already: what is still held goes back
            h._check()
        h._task = asyncio.current_task()
        self._h = h
        return h

    async def __aexit__(self, exc_type, exc, tb):
        h, self._h = self._h, None
        task, h._task = h._task, None
        by_loss, h._cancelled_task = h._cancelled_task, False
        if by_loss:
            task.uncancel()
        if h.reason is None:
            try:
                await h._release_all()
            except DlockError:
                if exc_type is None:
                    raise
            return False
        await h._release_rest()
        if exc_type is None or (issubclass(exc_type, asyncio.CancelledError) and by_loss
                                and task.cancelling() == 0):
            raise LockLost(h.name, h.reason) from None
        return False


class Client:
    """One connection to dlockd, shared by any number of tasks. Make it with
    ``await connect()``; ``async with`` it, or ``await close()`` it."""

    def __init__(self, path, reader, writer):
        self.path = path
        self._reader = reader
        self._writer = writer
        self._loop = asyncio.get_running_loop()
        self._pending = {}      # tag -> request sent, its reply to come
        self._tag = 0           # the last tag given, as a number
        self._out = []          # lines to write at the loop's next turn
        self._gates = {}        # name -> _Gate
        self._handles = {}      # name -> set of live handles
        self._observed = {}     # name -> [observations that sent OBSERVE, set of live ones]
        self._closed = None     # why the connection ended (a message), once it did
        self._closing = False
        self._read_task = self._loop.create_task(self._read_loop())

    def __repr__(self):
        return "<dlock_asyncio.Client %s%s>" % (self.path, " closed" if self._closed else "")

    async def __aenter__(self):
        return self

    async def __aexit__(self, exc_type, exc, tb):
        await self.close()
        return False

    @property
    def closed(self):
        return self._closed is not None

    async def close(self):
        """Close the connection: every lock it holds is released, every
        pending call fails with ConnectionClosed and every handle not
        released reports its loss ("closed"). Safe to call more than once."""
        if self._closed is None and not self._closing:
            self._closing = True
            try:
                # With a wait in flight QUIT is not sent: dlockd would
                # answer the waits CANCELLED, and a closed client's calls
                # fail ConnectionClosed. The connection just ends.
                if not any(r.waits for r in self._pending.values()):
                    quit_ = _Req(self._loop, b"QUIT\n")
                    quit_.future.add_done_callback(_unheeded)
                    self._send(quit_)
                    try:
                        async with asyncio.timeout(_QUIT_TIMEOUT):
                            await asyncio.shield(self._read_task)
                    except TimeoutError:
                        pass
            finally:
                self._shutdown("connection is closed")
        self._read_task.cancel()
        try:
            await self._writer.wait_closed()
        except (OSError, asyncio.CancelledError):
            pass

    # -- the wire --

    def _closed_error(self):
        return ConnectionClosed(None, self._closed or "connection is closed")

    def _new_tag(self):
        """The next tag: the counter in base 36, one none of the requests
        in flight has (the counter wraps within the protocol's 16
        characters; a tag in flight is never given again)."""
        while True:
            self._tag = self._tag + 1 if self._tag + 1 < _TAG_SPACE else 1
            n, digits = self._tag, []
            while n:
                n, d = divmod(n, 36)
                digits.append(_TAG_DIGITS[d])
            tag = "".join(reversed(digits))
            if tag not in self._pending:
                return tag

    def _send(self, req):
        """Tag req and send it: dlockd starts it at once, whatever else is
        in flight. The lines of one turn of the loop go out in one write,
        in the order sent."""
        if self._closed is not None:
            raise self._closed_error()
        req.tag = self._new_tag()
        req.state = "sent"
        self._pending[req.tag] = req
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(b"#%s %s" % (req.tag.encode("ascii"), req.line))

    def _flush(self):
        out, self._out = self._out, []
        if out and self._closed is None:
            self._writer.write(b"".join(out))

    def _send_release(self, line):
        """A release of a grant nobody holds: its answer is nobody's."""
        if self._closed is None:
            req = _Req(self._loop, line)
            req.future.add_done_callback(_unheeded)
            self._send(req)

    async def _call(self, req):
        """Send req and await its reply; a cancelled await withdraws it (and
        gives back what it was granted) before CancelledError goes on."""
        self._send(req)
        try:
            return await req.future
        except asyncio.CancelledError:
            await self._withdraw(req)
            raise

    async def _withdraw(self, req):
        fut = req.future
        if fut.done() and not fut.cancelled():
            # Answered and applied before the task could go on.
            if fut.exception() is None and req.rollback is not None:
                try:
                    await req.rollback(fut.result())
                except DlockError:
                    pass
            return
        req.abandoned = True
        if req.state == "sent" and req.waits and not req.cancel_sent and self._closed is None:
            # dlockd answers "#<tag> ERR CANCELLED", or the grant came
            # first (CANCEL's OK 0) and _answer gives it back: either way
            # req is settled once nothing of it is held.
            req.cancel_sent = True
            cancel = _Req(self._loop, _line(["CANCEL", "#" + req.tag]))
            cancel.future.add_done_callback(_unheeded)
            self._send(cancel)
        await _through(req.settled)

    def _answer(self, req, text):
        req.state = "answered"
        words = text.split()
        err = value = None
        try:
            value = req.parse(words) if req.parse is not None else words
        except DlockError as e:
            err = e
        if req.abandoned or req.future.cancelled():
            req.abandoned = True
            if err is None and req.undo is not None and self._closed is None:
                release = _Req(self._loop, req.undo(value))
                release.settled = req.settled   # settled once given back
                release.future.add_done_callback(_unheeded)
                self._send(release)
            else:
                _resolve(req.settled)
            return
        if err is None and req.commit is not None:
            try:
                value = req.commit(value)
            except DlockError as e:
                err = e
        if err is not None:
            req.future.set_exception(err)
        else:
            req.future.set_result(value)
        _resolve(req.settled)

    def _event(self, text):
        words = text[1:].split()
        if len(words) >= 3 and words[0] == "LOST":
            for h in list(self._handles.get(words[1], ())):
                h._lose(words[2], words[1])
        elif len(words) >= 3 and words[0] == "LEADER" and words[1] in self._observed:
            try:
                item = _leader(words[2:])
            except ProtocolError:
                return      # a malformed event is ignored, as unknown ones are
            for o in list(self._observed[words[1]][1]):
                o.offer(item)
        # other events are ignored

    async def _read_loop(self):
        why = "dlockd closed the connection"
        try:
            while True:
                text = await self._read_text()
                if text is None:
                    break
                if text.startswith("!"):
                    self._event(text)
                elif text.startswith("#"):
                    tag, _, reply = text[1:].partition(" ")
                    req = self._pending.pop(tag, None)
                    if req is None:
                        why = "reply from dlockd to no request in flight: %r" % text
                        break
                    if req.body is not None and reply.startswith("OK"):
                        bad = await self._read_body(req, reply)
                        if bad is not None:
                            why = bad
                            break
                    self._answer(req, reply)
                elif text.startswith("ERR"):
                    # Every request goes tagged: an untagged ERR is dlockd
                    # refusing a tag (or a line too long), a bug of ours.
                    why = "dlockd refused a request untagged (a client bug): %r" % text
                    break
                elif text:
                    why = "unexpected line from dlockd: %r" % text
                    break
        except asyncio.CancelledError:
            why = "connection is closed"
        except ValueError:
            why = "line from dlockd longer than %d bytes" % _LINE_MAX
        except OSError as e:
            why = "connection to dlockd broken: %s" % e
        finally:
            self._shutdown("connection is closed" if self._closing else why)

    async def _read_text(self):
        """The next line from dlockd without its end, or None at the end of
        the stream."""
        raw = await self._reader.readline()
        if not raw.endswith(b"\n"):
            return None
        text = raw[:-1].decode("latin-1")
        return text[:-1] if text.endswith("\r") else text

    async def _read_body(self, req, header):
        """The entry lines a counted reply's header announces, into
        req.body (dlockd writes the block whole, right after its tagged
        header); None, or why the stream cannot go on."""
        try:
            n = _list_count(header)
        except ProtocolError as e:
            return e.message
        for _ in range(n):
            text = await self._read_text()
            if text is None:
                return "dlockd closed the connection"
            if not text.startswith("= "):
                return "unexpected line in a LIST reply: %r" % text
            req.body.append(text)
        return None

    def _shutdown(self, why):
        """The connection ended: fail every pending call, report every
        handle lost ("closed")."""
        if self._closed is not None:
            return
        self._closed = why
        reqs = list(self._pending.values())
        self._pending.clear()
        self._out = []
        for r in reqs:
            if not r.future.done():
                r.future.set_exception(self._closed_error())
            _resolve(r.settled)
        for gate in self._gates.values():
            for _, fut in gate.waiters:
                if not fut.done():
                    fut.set_exception(self._closed_error())
            gate.waiters.clear()
        for name, hs in list(self._handles.items()):
            for h in list(hs):
                h._lose("closed", name)
        for _, live in list(self._observed.values()):
            for o in list(live):
                o.fail(self._closed_error())
        self._observed.clear()
        self._writer.close()

    # -- the local turn of a name --

    async def _enter_gate(self, name, shared, timeout=None):
        gate = self._gates.get(name)
        if gate is None:
            gate = self._gates[name] = _Gate()
        if not gate.waiters and gate.fits(shared):
            gate.take(shared)
            return
        entry = [shared, self._loop.create_future()]
        gate.waiters.append(entry)
        fut = entry[1]
        try:
            async with asyncio.timeout(timeout):
                await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self._leave_gate(name, shared)      # it had come: give it on
            else:
                try:
                    gate.waiters.remove(entry)
                except ValueError:
                    pass
                self._wake(name)
            raise

    def _leave_gate(self, name, shared):
        gate = self._gates.get(name)
        if gate is None:
            return
        if shared:
            gate.shared -= 1
        elif gate.lent > 0:
            gate.lent -= 1      # the turn's other holder keeps it
            return
        else:
            gate.exclusive = False
        self._wake(name)

    def _wake(self, name):
        gate = self._gates.get(name)
        if gate is None:
            return
        while gate.waiters and gate.fits(gate.waiters[0][0]):
            shared, fut = gate.waiters.popleft()
            if not fut.done():
                gate.take(shared)
                fut.set_result(None)
        if gate.idle():
            del self._gates[name]

    # -- locks --

    async def _take(self, kind, name, lease_ms, wait_ms):
        name = validate_name(name)
        lease = _lease_words(lease_ms)
        if wait_ms is not None:
            _check_num("wait_ms", wait_ms)
        if self._closed is not None:
            raise self._closed_error()
        shared = kind == "read"
        start = self._loop.time()
        try:
            await self._enter_gate(name, shared, None if wait_ms is None else wait_ms / 1000.0)
        except TimeoutError:
            raise Timeout(-1, "lock %s is held by another task of this client" % name) from None
        h = Lock(self, name, kind, lease_ms)
        h._gated = True
        ok = False
        try:
            if wait_ms is None:
                words, waits = [_VERBS[kind][0], name] + lease, True
            else:
                left = max(0, wait_ms - int((self._loop.time() - start) * 1000))
                words, waits = [_VERBS[kind][1], name, str(left)] + lease, left > 0
            req = _Req(self._loop, _line(words), waits, parse=_grant, commit=h._granted,
                       undo=h._release_line, rollback=lambda _v: h._release_all())
            await self._call(req)
            ok = True
            return h
        finally:
            if not ok:
                h._end()        # and the name's local turn goes to the next

    def lock(self, name, lease_ms=0):
        """LOCK: wait as long as it takes. ``await`` it for a Lock handle, or
        ``async with c.lock(name) as h:``. lease_ms 0: held while the
        connection lives (watchdog); else it ends unless renewed."""
        return _Pending(lambda: self._take("lock", name, lease_ms, None))

    def trylock(self, name, wait_ms=0, lease_ms=0):
        """TRYLOCK: as lock(), waiting at most wait_ms; raises Timeout (with
        the holder's ttl_ms, -1 when another task of this client holds it)."""
        return _Pending(lambda: self._take("lock", name, lease_ms, wait_ms))

    def rlock(self, name, lease_ms=0):
        """RLOCK: a read (shared) hold; this client's tasks share it."""
        return _Pending(lambda: self._take("read", name, lease_ms, None))

    def tryrlock(self, name, wait_ms=0, lease_ms=0):
        return _Pending(lambda: self._take("read", name, lease_ms, wait_ms))

    def wlock(self, name, lease_ms=0):
        """WLOCK: a write (exclusive) hold."""
        return _Pending(lambda: self._take("write", name, lease_ms, None))

    def trywlock(self, name, wait_ms=0, lease_ms=0):
        return _Pending(lambda: self._take("write", name, lease_ms, wait_ms))

    def fairlock(self, name, lease_ms=0):
        """FAIRLOCK: waiters are served in the order they came, across every
        dlockd and Redisson client of the name."""
        return _Pending(lambda: self._take("fair", name, lease_ms, None))

    def tryfairlock(self, name, wait_ms=0, lease_ms=0):
        return _Pending(lambda: self._take("fair", name, lease_ms, wait_ms))

    # -- multi-name locks --

    def mlock(self, names, lease_ms=0, held=()):
        """MLOCK: lock every one of ``names`` (1 to 64 distinct names) at
        once, all or nothing: dlockd grants the set together and holds none
        of it while it waits. ``await`` it for a MultiLock, or ``async with
        c.mlock(names) as m:`` (the block's task is cancelled when any name
        is lost; leaving releases the set). The names' local turns among
        this client's tasks are taken in sorted order. A name this task
        already holds through a handle (a plain Lock, or another MultiLock)
        counts as a reentry: pass the handle in ``held``, so that the set
        does not wait for the handle's own turn."""
        return _Pending(lambda: self._mtake(names, lease_ms, None, held))

    def trymlock(self, names, wait_ms=0, lease_ms=0, held=()):
        """TRYMLOCK: as mlock(), waiting at most wait_ms; raises Timeout."""
        return _Pending(lambda: self._mtake(names, lease_ms, wait_ms, held))

    async def _mtake(self, names, lease_ms, wait_ms, held):
        names = _check_names(names)
        lease = _lease_words(lease_ms)
        if wait_ms is not None:
            _check_num("wait_ms", wait_ms)
        held = list(held)
        for lender in held:
            if not isinstance(lender, (Lock, MultiLock)) or lender.client is not self:
                raise BadRequest("ARGS", "held must list Lock or MultiLock handles of this client")
        if self._closed is not None:
            raise self._closed_error()
        start = self._loop.time()
        m = MultiLock(self, names, lease_ms)
        lent = {n for n in names if any(lender._holds(n) for lender in held)}
        for n in lent:
            self._gates[n].lent += 1    # shares the holder's turn
            m._gated.add(n)
        ok = False
        try:
            for n in sorted(set(names) - lent):
                left = None if wait_ms is None else \
                    max(0.0, wait_ms / 1000.0 - (self._loop.time() - start))
                try:
                    await self._enter_gate(n, False, left)
                except TimeoutError:
                    raise Timeout(-1, "lock %s is held by another task of this client"
                                  % n) from None
                m._gated.add(n)
            if wait_ms is None:
                words, waits = _set_words("MLOCK", names) + lease, True
            else:
                left = max(0, wait_ms - int((self._loop.time() - start) * 1000))
                words, waits = _set_words("TRYMLOCK", names) + [str(left)] + lease, left > 0
            req = _Req(self._loop, _line(words), waits, parse=_numbers(len(names), "MLOCK"),
                       commit=m._granted, undo=m._release_line,
                       rollback=lambda _v: m._release_all())
            await self._call(req)
            ok = True
            return m
        finally:
            if not ok:
                m._end()        # and the names' local turns go to the next

    # -- semaphores --

    async def seminit(self, name, permits):
        """SEMINIT: True when the permits were set now, False when they had
        been set (they stay as they were)."""
        name = validate_name(name)
        req = _Req(self._loop, _line(["SEMINIT", name, str(_check_num("permits", permits))]),
                   parse=lambda w: _number(w) == 1)
        return await self._call(req)

    async def _acquire(self, name, permits, lease_ms, wait_ms):
        name = validate_name(name)
        words = [name, str(_check_permits(permits))]
        if wait_ms is None:
            words.insert(0, "ACQUIRE")
        else:
            words = ["TRYACQUIRE"] + words + [str(_check_num("wait_ms", wait_ms))]
        if lease_ms is not None:
            words += _lease_words(lease_ms)
        p = Permits(self, name, permits, lease_ms)
        req = _Req(self._loop, _line(words), waits=wait_ms is None or wait_ms > 0,
                   parse=_number, commit=p._granted, undo=p._release_line,
                   rollback=lambda _v: p._release_all())
        return await self._call(req)

    def acquire(self, name, permits, lease_ms=None):
        """ACQUIRE: wait until ``permits`` are free and take them. ``await``
        it for a Permits handle, or ``async with`` it."""
        return _Pending(lambda: self._acquire(name, permits, lease_ms, None))

    def tryacquire(self, name, permits, wait_ms=0, lease_ms=None):
        """TRYACQUIRE: as acquire(), waiting at most wait_ms; raises Timeout."""
        return _Pending(lambda: self._acquire(name, permits, lease_ms, wait_ms))

    # -- count-down latches --
    # A count set once with latch_set() and counted down by anyone; at 0 the
    # latch is gone and every waiter is released, on every dlockd of the
    # Redis (and Redisson's await()). A latch has no holder and no handle;
    # any number of this client's tasks await one latch at once.

    async def latch_set(self, name, count):
        """LATCHSET: set the count (1 to NUM_MAX) if no latch of the name
        exists: True when set now, False when one existed (it stays)."""
        name = validate_name(name)
        req = _Req(self._loop, _line(["LATCHSET", name, str(_check_num("count", count, 1))]),
                   parse=lambda w: _number(w) == 1)
        return await self._call(req)

    async def count_down(self, name):
        """COUNTDOWN: one less; the count left (0: the latch is gone and its
        waiters are released; also 0 for a latch that does not exist)."""
        name = validate_name(name)
        return await self._call(_Req(self._loop, _line(["COUNTDOWN", name]), parse=_number))

    async def latch_count(self, name):
        """LATCHCOUNT: the count now; 0 when no latch of the name exists."""
        name = validate_name(name)
        return await self._call(_Req(self._loop, _line(["LATCHCOUNT", name]), parse=_number))

    async def await_latch(self, name):
        """AWAIT: until the latch's count is 0 (at once when no latch of the
        name exists). Cancelling the task withdraws the wait (CANCEL of its
        tag) and raises CancelledError."""
        name = validate_name(name)

        def parse(words):
            _raise_err(words)
            return _opened("AWAIT", words)
        return await self._call(_Req(self._loop, _line(["AWAIT", name]), waits=True,
                                     parse=parse))

    async def tryawait(self, name, wait_ms=0):
        """TRYAWAIT: as await_latch(), waiting at most wait_ms (0: one look);
        raises Timeout, whose ``count`` is the count when the wait ended."""
        name = validate_name(name)
        words = ["TRYAWAIT", name, str(_check_num("wait_ms", wait_ms))]

        def parse(words):
            _raise_err(words)
            return _opened("TRYAWAIT", words)
        return await self._call(_Req(self._loop, _line(words), waits=wait_ms > 0,
                                     parse=parse))

    # -- leader election --

    def elect(self, name, value, lease_ms=0):
        """ELECT: campaign for ``name``, telling observers ``value`` (1-255
        bytes of 0x21-0x7E, as a name); wait until this client leads.
        ``await`` it for a Leadership (resign it yourself), or ``async with
        c.elect(name, value) as l:``: the block's task is cancelled if
        leadership is lost (leaving raises LockLost), and leaving resigns.
        lease_ms as for lock(). Cancelling the waiting task withdraws the
        campaign. Another task of this client campaigning for the name
        waits locally until the first leadership ends."""
        return _Pending(lambda: self._elect(name, value, lease_ms))

    async def _elect(self, name, value, lease_ms):
        name = validate_name(name)
        value = _check_value(value)
        lease = _lease_words(lease_ms)
        if self._closed is not None:
            raise self._closed_error()
        await self._enter_gate(name, False)
        h = Leadership(self, name, value, lease_ms)
        h._gated = True
        ok = False
        try:
            req = _Req(self._loop, _line(["ELECT", name, value] + lease), waits=True,
                       parse=_elected, commit=h._granted, undo=h._release_line,
                       rollback=lambda _v: h.resign())
            await self._call(req)
            ok = True
            return h
        finally:
            if not ok:
                h._end()        # and the name's local turn goes to the next

    async def resign(self, name):
        """RESIGN: give up leading ``name`` (the next candidate takes over at
        once). True if this client led it, else False. A campaign still
        waiting is withdrawn by cancelling its task instead: dlockd starts
        a RESIGN only after this client's earlier requests on the name."""
        name = validate_name(name)
        req = _Req(self._loop, _line(["RESIGN", name]), parse=_number,
                   commit=lambda n: self._resigned(name, n))
        self._send(req)
        return await _through(req.future)

    def _resigned(self, name, n):
        for h in list(self._handles.get(name, ())):
            if isinstance(h, Leadership):
                h._end()
        return n == 1

    async def leader(self, name):
        """LEADER: the name's Leader (fence, value), or None if nobody leads."""
        name = validate_name(name)
        return await self._call(_Req(self._loop, _line(["LEADER", name]), parse=_leader_reply))

    def observe(self, name):
        """OBSERVE: an async iterator of the name's leaders, each a Leader
        (fence, value) or None (nobody leads): the leader now, then every
        change; fences never go down. ``async for leader in
        c.observe(name):`` -- leaving the loop ends it (UNOBSERVE); for an
        exact moment, ``contextlib.aclosing()`` it. It raises
        ConnectionClosed when the connection ends. It is answered at once,
        even while a task of this client campaigns for the name."""
        return self._observe(validate_name(name))

    async def _observe(self, name):
        o = _Observation(self, name)
        try:
            if self._closed is not None:
                raise self._closed_error()
            entry = self._observed.setdefault(name, [0, set()])
            entry[0] += 1
            o.state = "starting"
            await self._call(_Req(self._loop, _line(["OBSERVE", name]), parse=_leader_reply,
                                  commit=o.answered))
            while True:
                yield await o.get()
        finally:
            o.stop()

    # -- the rest --

    async def status(self, name):
        """STATUS, as the blocking module's Status."""
        name = validate_name(name)
        def parse(words):
            _raise_err(words)
            return _parse_status(words)
        return await self._call(_Req(self._loop, _line(["STATUS", name]), parse=parse))

    async def force_unlock(self, name):
        """FORCEUNLOCK (uid 0 or admin_uids): True when a lock was removed."""
        name = validate_name(name)
        req = _Req(self._loop, _line(["FORCEUNLOCK", name]), parse=lambda w: _number(w) == 1)
        return await self._call(req)

    async def list(self, pattern="*", limit=None):
        """LIST: the locks of every kind whose names match pattern (Redis's
        glob: * ? [abc] and \\ escapes), across every dlockd and Redisson
        client of the Redis, as a Listing (entries, more) of ListEntry.
        limit: 1 to LIST_MAX names; None: dlockd's default (100). Only the
        names this peer may read are told."""
        body = []

        def parse(words):
            _raise_err(words)
            header = " ".join(words)
            _list_count(header)
            return _parse_listing(header, body)
        req = _Req(self._loop, _line(_list_words(pattern, limit)), parse=parse, body=body)
        return await self._call(req)

    async def ping(self):
        """PING; returns True."""
        def parse(words):
            _raise_err(words)
            if words[1:] != ["PONG"]:
                raise ProtocolError(None, "bad PING reply: %r" % " ".join(words))
            return True
        return await self._call(_Req(self._loop, b"PING\n", parse=parse))

    async def info(self):
        """INFO as a dict; values that are all digits become ints."""
        def parse(words):
            _raise_err(words)
            out = {}
            for w in words[1:]:
                k, sep, v = w.partition("=")
                if sep:
                    out[k] = int(v) if v.isascii() and v.isdigit() else v
            return out
        return await self._call(_Req(self._loop, b"INFO\n", parse=parse))
