"""dlock: a small blocking Python client for the dlockd lock daemon.

One Client is one connection to dlockd and one lock owner: every lock it
holds is released when it is closed or the process dies. A Lock owns its own
Client, so one Lock is one owner. Neither class is thread-safe; use one per
thread. The one exception is Client.cancel(): another thread calls it to
withdraw the wait of a request blocked in the client's thread, which then
raises Cancelled.

    import dlock

    with dlock.Lock("invoices") as fence:
        ...             # pass `fence` to the resource you protect

    lk = dlock.Lock("invoices")
    if lk.acquire(timeout=2.5):     # True, or False after 2.5 s, like threading.Lock
        try:
            ...         # lk.fence is the fence
        finally:
            lk.release()

    with dlock.Client() as c:       # read/write locks, over one connection
        with c.read_lock("catalog"):    # shared with other readers
            ...
        with c.write_lock("catalog"):   # alone
            ...

    with dlock.Client() as c:       # a fair lock: first come, first served
        with c.fair_lock("payroll") as fence:
            ...

    with dlock.Client() as c:       # several names at once, all or none
        with c.mlock(["acct-1", "acct-2"]) as m:
            ...         # m.fences: one per name, in the order given

    with dlock.Client() as c:       # a counting semaphore
        c.seminit("transcode", 4)       # its permits, set once for every user
        with c.semaphore("transcode", 2):   # 2 of the 4 while inside
            ...

    with dlock.Client() as c:       # a count-down latch
        c.latch_set("shards-loaded", 3)     # once, by whoever comes first
        ...
        c.count_down("shards-loaded")       # each loader when it is done
        c.await_latch("shards-loaded")      # until the count is 0

A waiting request (lock, rlock, wlock, fairlock, acquire, mlock, elect,
await_latch, or a try... with a wait) holds the connection until it is
answered; Client.cancel() from another thread withdraws it:

    c = dlock.Client()
    threading.Timer(5, c.cancel).start()
    try:
        c.lock("invoices")
    except dlock.Cancelled:
        ...             # nothing is held; the client stays usable

Leader election: one connection leads a name at a time; observers are
told every leader:

    with dlock.Client() as c:
        with c.elect("billing", "10.0.0.5:8080") as leader:   # waits its turn
            serve(leader.fence)     # leader.check() raises LockLost once lost
                                    # resigned on the way out

    with dlock.Client() as c:
        for leader in c.observe("billing"):     # now, then every change
            print(leader)           # (fence, value), or None: nobody leads

Every lock of every kind whose name matches a glob, whoever holds it:

    with dlock.Client() as c:
        listing = c.list("job*", limit=50)      # limit: default dlockd's (100)
        for e in listing.entries:   # name kind ttl_ms fence holders_total holders ...
            print(e.name, e.kind, e.holders_total, e.holders[:1])
        if listing.more:
            ...             # more names match: raise the limit or narrow the pattern

Loss notifications (``!LOST <name> <reason>``) are collected whenever the
client reads from dlockd and are reported as LockLost by the next call on
that name, by check(), or by leaving a ``with dlock.Lock(...)`` block.

Standard library only; Python 3.9 or newer. The protocol is described in
proto/PROTOCOL.md of the dlockd sources.
"""
# SPDX-License-Identifier: MIT

import collections
import errno as _errno
import math
import os
import re
import select
import socket as _socket
import threading
import time

__all__ = [
    "DEFAULT_SOCKET", "SOCKET_ENV", "NAME_MAX", "NUM_MAX", "Status",
    "DlockError", "BadRequest", "Timeout", "NotHeld", "BackendError",
    "LimitError", "Denied", "KindError", "Cancelled", "LockLost", "ConnectionClosed",
    "ConnectFailed", "ProtocolError", "Client", "Lock", "ClientLock", "ClientSemaphore",
    "validate_name", "PERMITS_MAX", "VALUE_MAX", "Leadership", "Observation",
    "MNAMES_MAX", "MultiLock",
    "LIST_MAX", "Who", "ListEntry", "Listing",
]

DEFAULT_SOCKET = "/run/dlockd/dlockd.sock"
SOCKET_ENV = "DLOCK_SOCKET"
NAME_MAX = 255                 # bytes in a lock name
NUM_MAX = 2147483647           # largest number the protocol accepts
PERMITS_MAX = 10000            # permits in one ACQUIRE or RELEASE
VALUE_MAX = 255                # bytes in a leader's value
MNAMES_MAX = 64                # names in one MLOCK, TRYMLOCK or MUNLOCK
LIST_MAX = 1000                # most names one LIST tells (dlockd's PROTO_LIST_MAX)
_LINE_MAX = 65536              # longest line accepted from dlockd
_RECV_SIZE = 4096              # a Client's read buffer (replies are short)
_QUIT_TIMEOUT = 2.0            # seconds close() waits for "OK BYE"



class Status(collections.namedtuple("Status", "state holds ttl_ms fence")):
    """STATUS of a lock.

    state: "FREE", "MINE" (a plain lock held by this connection), "TAKEN" (a
    plain lock held by another), "READ" (a read/write lock with read holds),
    "WRITE" (a read/write lock with a write hold) or "SEM" (a semaphore).
    holds: this connection's holds (MINE; READ, WRITE: of that kind; SEM:
    the permits it holds; else 0).
    ttl_ms: remaining lease in ms (None when FREE or SEM; may be -1 when
    unknown).
    fence: this connection's fence (only when MINE, else None).
    readers: the owners holding read holds (READ), 1 (WRITE), else None;
    available: the permits free now (SEM), else None. Attributes, not items
    of the tuple of four."""

    readers = None
    available = None

    def __new__(cls, state, holds, ttl_ms, fence, readers=None, available=None):
        self = super().__new__(cls, state, holds, ttl_ms, fence)
        if readers is not None:
            self.readers = readers
        if available is not None:
            self.available = available
        return self

    def __repr__(self):
        text = super().__repr__()
        for attr in ("readers", "available"):
            if getattr(self, attr) is not None:
                text = "%s, %s=%r)" % (text[:-1], attr, getattr(self, attr))
        return text


Who = collections.namedtuple("Who", "host dlockd_pid pid uid count age_ms")
Who.__doc__ = """A holder or waiter of a listed lock: its dlockd's host and pid, and,
for a client of the dlockd asked, its pid, uid and how long (ms) it has held
or waited. count: its holds (a semaphore's: its permits; a waiter's: the
permits asked). None where dlockd does not know (a Redisson client's)."""

ListEntry = collections.namedtuple(
    "ListEntry", "name kind ttl_ms fence holders_total holders waiters_total waiters value")
ListEntry.__doc__ = """One lock of a LIST: its name; kind "lock", "read", "write", "fair",
"elect", "sem" or "latch"; ttl_ms its lease left (-1: no expiry); fence its
fence counter (None for a semaphore); holders_total and waiters_total the
counts, holders and waiters the first of them (at most 8) as Who; value
the leader's value of an election (a str), the permits available of a
semaphore or the count of a count-down latch (an int), else None."""

Listing = collections.namedtuple("Listing", "entries more")
Listing.__doc__ = """What LIST told: entries, a list of ListEntry in dlockd's order, and
more, True when more names matched than were told (raise the limit or
narrow the pattern)."""


# ---- errors ------------------------------------------------------------

class DlockError(Exception):
    """Any dlock error. ``code`` is the protocol's ERR code (e.g. "BACKEND"),
    or None for an error found by the client itself."""

    def __init__(self, code=None, message=""):
        self.code = code
        self.message = message
        if code and message:
            text = "%s: %s" % (code, message)
        else:
            text = code or message or "dlock error"
        super().__init__(text)

    def __reduce__(self):
        return (self.__class__, (self.code, self.message))


class BadRequest(DlockError):
    """dlockd refused the request (ERR UNKNOWN, ARGS, NAME or TOOLONG), or
    the client refused to send it (code None)."""


class Timeout(DlockError):
    """TRYLOCK (TRYRLOCK, TRYWLOCK, TRYFAIRLOCK) did not get the lock in
    time, TRYACQUIRE the permits, or TRYAWAIT saw the latch still above 0.
    ``ttl_ms`` is the holder's remaining lease (-1 when unknown); ``count``
    is, for TRYAWAIT, the latch's count when the wait ended (else None)."""

    def __init__(self, ttl_ms=-1, message=None, count=None):
        self.ttl_ms = ttl_ms
        self.count = count
        if message is None:
            message = "lock not acquired within the wait (holder ttl %s ms)" % ttl_ms
        super().__init__(None, message)

    def __reduce__(self):
        return (self.__class__, (self.ttl_ms, self.message, self.count))


class NotHeld(DlockError):
    """ERR NOTHELD: this connection does not hold that lock."""


class BackendError(DlockError):
    """ERR BACKEND: dlockd cannot reach Redis, or Redis failed."""


class LimitError(DlockError):
    """ERR LIMIT: a dlockd limit was reached."""


class Denied(DlockError):
    """ERR DENIED: not allowed for this peer."""


class KindError(DlockError):
    """ERR KIND: the name is another kind of lock (a plain lock, a read/write
    lock, a semaphore and, on one dlockd, a fair lock of one name exclude
    each other only so: every user of a name must take the same kind), or
    the request does not fit this connection's hold (UNLOCK of a read or
    write hold, RUNLOCK/WUNLOCK of a plain one, write_lock while holding a
    read lock: an upgrade), or dlockd offers no read/write locks,
    semaphores or fair locks (quorum)."""


class Cancelled(DlockError):
    """A wait was withdrawn by Client.cancel() (ERR CANCELLED): nothing is
    held by it."""


class LockLost(DlockError):
    """dlockd reported ``!LOST <name> <reason>``: the lock is no longer held.
    ``reason`` is "expired", "forced" or "backend"."""

    def __init__(self, name, reason, message=None):
        self.name = name
        self.reason = reason
        if message is None:
            message = "lock %s lost: %s" % (name, reason)
        super().__init__(None, message)

    def __reduce__(self):
        return (self.__class__, (self.name, self.reason, self.message))


class ConnectionClosed(DlockError):
    """The connection to dlockd is closed or broken (every lock it held is
    gone)."""


_CONNECT_HINTS = {
    _errno.ENOENT: " (is dlockd running?)",
    _errno.ECONNREFUSED: " (is dlockd running?)",
    _errno.EACCES: " (add yourself to the dlockd group, or check socket_mode)",
}


class ConnectFailed(DlockError, ConnectionError):
    """Could not connect to dlockd's socket. Also a ConnectionError;
    ``errno`` and ``path`` tell why and where. The message names both, with
    a hint for the usual causes, e.g. "cannot connect to dlockd at
    /run/dlockd/dlockd.sock: No such file or directory (is dlockd
    running?)"."""

    def __init__(self, path, err=None, message=None):
        if message is None:
            reason = getattr(err, "strerror", None) or str(err or "failed")
            hint = _CONNECT_HINTS.get(getattr(err, "errno", None), "")
            message = "cannot connect to dlockd at %s: %s%s" % (path, reason, hint)
        DlockError.__init__(self, None, message)
        self.path = path
        self.errno = getattr(err, "errno", None)

    def __str__(self):
        return self.message

    def __reduce__(self):
        return (self.__class__, (self.path, None, self.message))


class ProtocolError(DlockError):
    """dlockd said something this client does not understand."""


_ERRORS = {
    "UNKNOWN": BadRequest,
    "ARGS": BadRequest,
    "NAME": BadRequest,
    "TOOLONG": BadRequest,
    "NOTHELD": NotHeld,
    "BACKEND": BackendError,
    "LIMIT": LimitError,
    "DENIED": Denied,
    "KIND": KindError,
    "CANCELLED": Cancelled,
}

# The request that gives back what a waiting request got.
_UNDO = {"LOCK": "UNLOCK", "TRYLOCK": "UNLOCK", "FAIRLOCK": "UNLOCK", "TRYFAIRLOCK": "UNLOCK",
         "RLOCK": "RUNLOCK", "TRYRLOCK": "RUNLOCK", "WLOCK": "WUNLOCK", "TRYWLOCK": "WUNLOCK",
         "ACQUIRE": "RELEASE", "TRYACQUIRE": "RELEASE", "ELECT": "RESIGN"}

_DIGITS = re.compile(r"[0-9]+\Z")
_INT = re.compile(r"-?[0-9]+\Z")
_NAME = re.compile(r"[!-~]{1,%d}\Z" % NAME_MAX)     # a valid name, as str


def validate_name(name):
    """Return ``name`` as str if it is a valid lock name (1-255 bytes, each
    0x21-0x7E), else raise BadRequest (a DlockError) with code None."""
    if type(name) is str and _NAME.match(name):
        return name
    if isinstance(name, (bytes, bytearray)):
        raw = bytes(name)
    elif isinstance(name, str):
        try:
            raw = name.encode("ascii")
        except UnicodeEncodeError:
            raise BadRequest(None, "bad lock name %r: only printable ASCII "
                                   "without spaces is allowed" % (name,)) from None
    else:
        raise BadRequest(None, "lock name must be str, not %s" % type(name).__name__)
    if not 1 <= len(raw) <= NAME_MAX:
        raise BadRequest(None, "bad lock name %r: must be 1 to %d bytes" % (name, NAME_MAX))
    for b in raw:
        if b < 0x21 or b > 0x7E:
            raise BadRequest(None, "bad lock name %r: only printable ASCII "
                                   "without spaces is allowed" % (name,))
    return raw.decode("ascii")


def _check_value(value):
    """A leader's value: a word as a name is (1-255 bytes of 0x21-0x7E)."""
    if type(value) is str and _NAME.match(value):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return _check_value(bytes(value).decode("ascii"))
        except UnicodeDecodeError:
            pass
    raise BadRequest(None, "bad leader value: it must be 1 to %d printable ASCII bytes "
                           "without spaces" % VALUE_MAX)


def _parse_leader(words):
    """LEADER's words after OK (or !LEADER's after the name): (fence,
    value), or None for NONE."""
    if words == ["NONE"]:
        return None
    if len(words) != 2:
        raise ProtocolError(None, "bad leader from dlockd: %r" % " ".join(words))
    return _to_int(words[0]), words[1]


def _check_num(what, value, low=0, high=NUM_MAX):
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(None, "%s must be an int, not %s" % (what, type(value).__name__))
    if not low <= value <= high:
        raise BadRequest(None, "%s must be %d to %d, not %d" % (what, low, high, value))
    return value


def _lease(lease_ms):
    """A lease as dlockd takes it: whole milliseconds, 0 to NUM_MAX. A
    float's fraction is rounded up, so that a lease below 1 ms is 1 ms and
    never 0, which means no lease (the watchdog: held while connected).
    Else BadRequest."""
    if isinstance(lease_ms, bool) or not isinstance(lease_ms, (int, float)):
        raise BadRequest(None, "lease_ms must be an int or a float, not %s"
                         % type(lease_ms).__name__)
    if isinstance(lease_ms, float):
        if not 0 <= lease_ms <= NUM_MAX:    # NaN too
            raise BadRequest(None, "lease_ms must be 0 to %d, not %r" % (NUM_MAX, lease_ms))
        lease_ms = math.ceil(lease_ms)
    return _check_num("lease_ms", lease_ms)


def _check_permits(permits):
    return _check_num("permits", permits, 1, PERMITS_MAX)


def _to_int(word):
    if word.isascii() and word.isdigit():
        return int(word)
    if not _INT.match(word):
        raise ProtocolError(None, "expected a number from dlockd, got %r" % word)
    return int(word)


def _parse_status(rw):
    """A STATUS reply's words (the first "OK") as a Status."""
    state = rw[1] if len(rw) > 1 else ""
    if state == "FREE" and len(rw) == 2:
        return Status("FREE", 0, None, None)
    if state == "MINE" and len(rw) == 5:
        return Status("MINE", _to_int(rw[2]), _to_int(rw[3]), _to_int(rw[4]))
    if state == "TAKEN" and len(rw) == 3:
        return Status("TAKEN", 0, _to_int(rw[2]), None)
    if state in ("READ", "WRITE") and len(rw) == 5:
        return Status(state, _to_int(rw[3]), _to_int(rw[4]), None, _to_int(rw[2]))
    if state == "SEM" and len(rw) == 4:
        return Status("SEM", _to_int(rw[3]), None, None, available=_to_int(rw[2]))
    raise ProtocolError(None, "bad STATUS reply: %r" % " ".join(rw))


def _opened(verb, rw):
    """AWAIT's or TRYAWAIT's reply words: None for "OK 0" (the latch is
    open), Timeout (with the count) for "TIMEOUT <count>"."""
    if rw[0] == "TIMEOUT" and len(rw) == 2:
        count = _to_int(rw[1])
        raise Timeout(-1, "the latch's count was still %d at the end of the wait" % count,
                      count)
    if rw != ["OK", "0"]:
        raise ProtocolError(None, "bad %s reply: %r" % (verb, " ".join(rw)))


def _list_words(pattern, limit):
    """LIST's request words: the pattern (a glob, 1-255 bytes as a name) and
    the limit (1 to LIST_MAX; None: dlockd's default)."""
    if not (type(pattern) is str and _NAME.match(pattern)):
        raise BadRequest(None, "bad pattern %r: it must be 1 to %d printable ASCII bytes "
                               "without spaces" % (pattern, NAME_MAX))
    words = ["LIST", pattern]
    if limit is not None:
        words.append(str(_check_num("limit", limit, 1, LIST_MAX)))
    return words


def _list_count(header):
    """The entry lines "OK LIST <n> <more>" announces; ProtocolError when
    the header is not one."""
    rw = header.split(" ")
    if (len(rw) != 4 or rw[:2] != ["OK", "LIST"] or not _DIGITS.match(rw[2])
            or int(rw[2]) > LIST_MAX or rw[3] not in ("0", "1")):
        raise ProtocolError(None, "bad LIST reply: %r" % header)
    return int(rw[2])


def _who_num(word):
    return None if word == "-" else _to_int(word)


def _parse_who(word, line):
    """A holders or waiters word: (total, [Who, ...])."""
    parts = word.split(",")
    if not _DIGITS.match(parts[0]):
        raise ProtocolError(None, "bad LIST entry: %r" % line)
    who = []
    for part in parts[1:]:
        f = part.split("/")
        if len(f) != 6:
            raise ProtocolError(None, "bad LIST entry: %r" % line)
        who.append(Who(None if f[0] == "-" else f[0], *[_who_num(w) for w in f[1:]]))
    return int(parts[0]), who


def _parse_entry(line):
    """One "= <name> <kind> <ttl_ms> <fence> <holders> <waiters> <value>"."""
    w = line.split(" ")
    if len(w) != 8 or w[0] != "=":
        raise ProtocolError(None, "bad LIST entry: %r" % line)
    holders_total, holders = _parse_who(w[5], line)
    waiters_total, waiters = _parse_who(w[6], line)
    kind, value = w[2], w[7]
    if kind in ("sem", "latch"):
        value = _who_num(value)
    elif kind != "elect":
        value = None
    return ListEntry(w[1], kind, _to_int(w[3]), _who_num(w[4]), holders_total, holders,
                     waiters_total, waiters, value)


def _parse_listing(header, lines):
    """A LIST reply (its header and its entry lines) as a Listing."""
    return Listing([_parse_entry(line) for line in lines], header.split(" ")[3] == "1")


def _readable(sock, timeout):
    """Wait until sock is readable; timeout in seconds or None (forever)."""
    if hasattr(select, "poll"):
        p = select.poll()
        p.register(sock, select.POLLIN | select.POLLPRI)
        ms = None if timeout is None else max(0, int(math.ceil(timeout * 1000)))
        return bool(p.poll(ms))
    r, _, _ = select.select([sock], [], [], timeout)
    return bool(r)


# ---- the connection ----------------------------------------------------

class Client(object):
    """One connection to dlockd, and one lock owner.

    socket: path of dlockd's socket; default $DLOCK_SOCKET, else
    /run/dlockd/dlockd.sock. timeout: seconds allowed for connecting and for
    each reply, except the wait of LOCK, RLOCK, WLOCK, FAIRLOCK and ACQUIRE
    (unbounded) and of TRYLOCK, TRYRLOCK, TRYWLOCK, TRYFAIRLOCK and
    TRYACQUIRE (its wait_ms plus timeout); None waits forever. When a reply
    does not come in time the connection is closed (its locks are released)
    and ConnectionClosed is raised.
    """

    def __init__(self, socket=None, timeout=None):
        if socket is None:
            socket = os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET
        self.path = socket
        self.timeout = timeout
        self.lost = {}              # name -> reason, reported and not yet raised
        self._observers = {}        # name -> Observation
        self._buf = ""              # what was read and not yet taken (latin-1)
        self._rbuf = bytearray(_RECV_SIZE)
        self._eof = False
        self._sock = None
        self._poll = None
        # A waiting request's state, for cancel() from another thread: None
        # (none), "sending", "sent", "pending" (cancelled while being sent)
        # or "cancelled" (CANCEL written after it).
        self._wait_lock = threading.Lock()
        self._wait_state = None
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(socket)
        except _socket.timeout as e:
            s.close()
            raise ConnectFailed(socket, e, "cannot connect to dlockd at %s: timed out"
                                % socket) from None
        except OSError as e:
            s.close()
            raise ConnectFailed(socket, e) from None
        s.settimeout(None)
        self._sock = s
        if hasattr(select, "poll"):
            self._poll = select.poll()
            self._poll.register(s, select.POLLIN | select.POLLPRI)

    # -- context manager and plumbing --

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def __del__(self):
        s = getattr(self, "_sock", None)
        if s is not None:
            try:
                s.close()
            except Exception:
                pass

    def __repr__(self):
        return "<dlock.Client %s%s>" % (self.path, "" if self._sock else " closed")

    @property
    def closed(self):
        return self._sock is None

    def fileno(self):
        """The socket's descriptor: select()/poll() it to learn when dlockd
        sends an event (then call check())."""
        if self._sock is None:
            raise ConnectionClosed(None, "connection is closed")
        return self._sock.fileno()

    def close(self):
        """Send QUIT and close the connection; every lock it holds is
        released. Safe to call more than once."""
        s = self._sock
        if s is None:
            return
        try:
            if not self._eof:
                s.settimeout(_QUIT_TIMEOUT)
                s.sendall(b"QUIT\n")
                deadline = time.monotonic() + _QUIT_TIMEOUT
                while True:
                    line = self._read_line(deadline)
                    if line is None or not line.startswith("!"):
                        break
                    self._event(line)
        except Exception:
            pass
        finally:
            self._sock = None
            try:
                s.close()
            except OSError:
                pass

    def _abort(self):
        s, self._sock = self._sock, None
        if s is not None:
            try:
                s.close()
            except OSError:
                pass

    def _event(self, line):
        words = line[1:].split()
        if len(words) >= 3 and words[0] == "LOST":
            self.lost.pop(words[1], None)       # keep the order of arrival
            self.lost[words[1]] = words[2]
        elif len(words) >= 3 and words[0] == "LEADER":
            obs = self._observers.get(words[1])
            if obs is not None:
                obs._told(_parse_leader(words[2:]))
        # other events are ignored

    def _can_read(self, timeout):
        """Wait until the socket is readable; timeout in seconds or None."""
        if self._poll is None:
            return _readable(self._sock, timeout)
        ms = None if timeout is None else max(0, int(math.ceil(timeout * 1000)))
        return bool(self._poll.poll(ms))

    def _recv(self, deadline):
        """Read once into the buffer. Returns False on end of stream. With
        no deadline the socket is blocking and recv waits."""
        if deadline is not None:
            while True:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise _socket.timeout("timed out")
                if self._can_read(wait):
                    break
        try:
            n = self._sock.recv_into(self._rbuf)
        except (BlockingIOError, InterruptedError):
            return True
        if not n:
            self._eof = True
            return False
        self._buf += self._rbuf[:n].decode("latin-1")
        return True

    def _take_line(self):
        buf = self._buf
        i = buf.find("\n")
        if i < 0:
            if len(buf) > _LINE_MAX:
                raise ProtocolError(None, "line from dlockd longer than %d bytes" % _LINE_MAX)
            return None
        self._buf = buf[i + 1:]
        if i and buf[i - 1] == "\r":
            return buf[:i - 1]
        return buf[:i]

    def _read_line(self, deadline):
        """The next line, or None at end of stream."""
        while True:
            line = self._take_line()
            if line is not None:
                return line
            if self._eof or not self._recv(deadline):
                return None

    def _reply(self, deadline):
        """The next line that is not an event (nor empty), handling the
        events before it; None at end of stream."""
        buf = self._buf
        while True:
            i = buf.find("\n")
            if i < 0:
                if len(buf) > _LINE_MAX:
                    raise ProtocolError(None, "line from dlockd longer than %d bytes" % _LINE_MAX)
                if self._eof or not self._recv(deadline):
                    return None
                buf = self._buf
                continue
            line = buf[:i - 1] if i and buf[i - 1] == "\r" else buf[:i]
            buf = self._buf = buf[i + 1:]
            if line.startswith("!"):
                self._event(line)
            elif line:
                return line

    def _drain_events(self, strict=True):
        """Read whatever dlockd has sent without blocking; with no request
        outstanding, every complete line is an event."""
        if self._sock is None:
            return
        try:
            while not self._eof and self._can_read(0):
                n = self._sock.recv_into(self._rbuf)
                if not n:
                    self._eof = True
                    break
                self._buf += self._rbuf[:n].decode("latin-1")
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._eof = True
        self._take_events(strict)

    def _take_events(self, strict=True):
        """Handle the complete lines already read, as events."""
        while True:
            line = self._take_line()
            if line is None:
                break
            if line.startswith("!"):
                self._event(line)
            elif line and strict:
                self._abort()
                raise ProtocolError(None, "unexpected line from dlockd: %r" % line)

    def _raise_lost(self, name):
        if name in self.lost:
            raise LockLost(name, self.lost.pop(name))

    def cancel(self):
        """Withdraw the wait of the request blocked in another thread on
        this client (lock, rlock, wlock, fairlock, acquire, mlock, elect,
        await_latch, or a try... with a wait): that call raises Cancelled,
        holding nothing (a grant that
        raced the cancel is given back). Safe to call from any thread; the
        client stays usable. Returns True if a wait was being cancelled,
        False if none was in progress (then nothing is done)."""
        with self._wait_lock:
            state = self._wait_state
            if state == "sending":
                self._wait_state = "pending"    # the caller writes CANCEL
                return True
            if state != "sent" or self._sock is None:
                return False
            try:
                self._sock.sendall(b"CANCEL\n")
            except OSError:
                return False    # the waiting call sees the connection end
            self._wait_state = "cancelled"
            return True

    def _wait_mark(self, state, only_from=None):
        """Set the waiting request's state; the state it had."""
        with self._wait_lock:
            old = self._wait_state
            if only_from is None or old == only_from:
                self._wait_state = state
            return old

    def _call(self, words, name=None, wait=None, unbounded=False, body=None):
        """Send one request and return its reply's words (the first is "OK"
        or "TIMEOUT"); raise the matching DlockError for ERR. A request that
        may wait can be withdrawn by cancel(). body: a list that gets the
        entry lines of a counted reply (LIST's), read right after it."""
        sock = self._sock
        if sock is None:
            raise ConnectionClosed(None, "connection is closed")
        # What came since the last reply (events, the end of the stream).
        poll = self._poll
        if self._buf or (poll.poll(0) if poll is not None else _readable(sock, 0)):
            self._drain_events()
        if name is not None and name in self.lost:
            raise LockLost(name, self.lost.pop(name))
        if self._eof:
            self._abort()
            raise ConnectionClosed(None, "dlockd closed the connection")
        line = (" ".join(words) + "\n").encode("ascii")
        timeout = self.timeout
        if unbounded or timeout is None:
            deadline = None
        else:
            deadline = time.monotonic() + timeout + (wait or 0)
        cancellable = unbounded or bool(wait)
        cancelled = False
        if cancellable:
            self._wait_mark("sending")
        try:
            if timeout is None:
                sock.sendall(line)      # the socket is blocking
            else:
                sock.settimeout(timeout)
                try:
                    sock.sendall(line)
                finally:
                    if self._sock is not None:
                        self._sock.settimeout(None)
            if cancellable:
                with self._wait_lock:
                    if self._wait_state == "pending":
                        sock.sendall(b"CANCEL\n")     # right behind the request
                        self._wait_state = "cancelled"
                    else:
                        self._wait_state = "sent"
            reply = self._reply(deadline)
            if reply is not None and cancellable:
                cancelled = self._wait_mark(None) == "cancelled"
                ack = self._reply(deadline) if cancelled else "OK"
                if ack is None:
                    reply = None
                elif not ack.startswith("OK"):
                    self._abort()
                    raise ProtocolError(None, "unexpected reply to CANCEL: %r" % ack)
            if reply is None:
                self._abort()
                raise ConnectionClosed(None, "dlockd closed the connection")
            if body is not None and reply.startswith("OK"):
                self._read_body(reply, body, deadline)
        except _socket.timeout:
            self._abort()
            raise ConnectionClosed(None, "no reply from dlockd within %ss; connection "
                                         "closed" % self.timeout) from None
        except DlockError:
            self._abort()
            raise
        except OSError as e:
            self._abort()
            raise ConnectionClosed(None, "connection to dlockd broken: %s" % e) from None
        except BaseException:
            # Interrupted with a reply outstanding: the stream cannot be
            # resynchronised. Closing cancels any wait and frees our locks.
            self._abort()
            raise
        finally:
            if cancellable:
                self._wait_mark(None)
        if self._buf:
            self._take_events()     # events read with the reply
        rw = reply.split()
        if cancelled:
            self._cancelled(words, rw)
        if rw[0] == "ERR":
            code = rw[1] if len(rw) > 1 else "UNKNOWN"
            text = reply.split(None, 2)[2] if len(rw) > 2 else ""
            if code == "TOOLONG":
                self._abort()
            if code == "NOTHELD" and name is not None:
                self._raise_lost(name)
            raise _ERRORS.get(code, DlockError)(code, text)
        if rw[0] not in ("OK", "TIMEOUT"):
            self._abort()
            raise ProtocolError(None, "unexpected reply from dlockd: %r" % reply)
        return rw

    def _read_body(self, header, body, deadline):
        """The entry lines a counted reply's header announces, into body.
        They come right after it: a line that is not one breaks the stream
        (ProtocolError; _call closes the connection)."""
        for _ in range(_list_count(header)):
            line = self._read_line(deadline)
            if line is None:
                raise ConnectionClosed(None, "dlockd closed the connection")
            if not line.startswith("= "):
                raise ProtocolError(None, "unexpected line in a LIST reply: %r" % line)
            body.append(line)

    def _cancelled(self, words, rw):
        """The request words was cancelled and answered rw: give back a
        grant that raced the cancel, and raise Cancelled."""
        if rw[0] == "OK" and words[0] in ("MLOCK", "TRYMLOCK"):
            n = int(words[1])
            try:
                self._call(["MUNLOCK"] + words[1:2 + n])
            except ConnectionClosed:
                raise
            except DlockError:
                pass    # lost meanwhile: nothing is held either way
        elif rw[0] == "OK" and words[0] in _UNDO:
            undo = [_UNDO[words[0]], words[1]]
            if undo[0] == "RELEASE":
                undo.append(words[2])
            try:
                self._call(undo)
            except ConnectionClosed:
                raise
            except DlockError:
                pass    # lost meanwhile: nothing is held either way
        text = " ".join(rw[2:]) if rw[0] == "ERR" else "the wait was cancelled"
        raise Cancelled("CANCELLED", text)

    def _grant(self, rw):
        if rw[0] == "TIMEOUT":
            raise Timeout(_to_int(rw[1]) if len(rw) > 1 else -1)
        if len(rw) != 3:
            raise ProtocolError(None, "bad grant from dlockd: %r" % " ".join(rw))
        return _to_int(rw[1]), _to_int(rw[2])

    # -- requests --

    def _take(self, verb, name, lease_ms):
        """LOCK, RLOCK, WLOCK or FAIRLOCK: (fence, holds)."""
        name = validate_name(name)
        words = [verb, name]
        lease = _lease(lease_ms)
        if lease:
            words.append(str(lease))
        return self._grant(self._call(words, name, unbounded=True))

    def _try_take(self, verb, name, wait_ms, lease_ms):
        """TRYLOCK, TRYRLOCK, TRYWLOCK or TRYFAIRLOCK: (fence, holds), or
        Timeout."""
        name = validate_name(name)
        words = [verb, name, str(_check_num("wait_ms", wait_ms))]
        lease = _lease(lease_ms)
        if lease:
            words.append(str(lease))
        return self._grant(self._call(words, name, wait=wait_ms / 1000.0))

    def _drop(self, verb, name):
        """UNLOCK, RUNLOCK or WUNLOCK: the holds left."""
        name = validate_name(name)
        rw = self._call([verb, name], name)
        if len(rw) != 2:
            raise ProtocolError(None, "bad %s reply: %r" % (verb, " ".join(rw)))
        return _to_int(rw[1])

    def lock(self, name, lease_ms=0):
        """LOCK: wait as long as it takes. Returns (fence, holds). lease_ms 0
        means watchdog mode (held as long as this connection lives). Every
        lease_ms is an int or a float of ms: a fraction is rounded up, so a
        lease below 1 ms is 1 ms, never 0."""
        return self._take("LOCK", name, lease_ms)

    def trylock(self, name, wait_ms=0, lease_ms=0):
        """TRYLOCK: wait at most wait_ms. Returns (fence, holds) or raises
        Timeout (with the holder's ttl_ms)."""
        return self._try_take("TRYLOCK", name, wait_ms, lease_ms)

    def unlock(self, name):
        """UNLOCK: drop one hold (of a plain or a fair lock); returns the holds
        left (0: the lock is free)."""
        return self._drop("UNLOCK", name)

    # Read/write locks: any number of owners may hold read holds of a name
    # at once; a write hold excludes every other hold. A name is one kind of
    # lock at a time: the other kind's requests raise KindError.

    def rlock(self, name, lease_ms=0):
        """RLOCK: a read (shared) hold, waiting as long as it takes. Returns
        (fence, holds): the fence is the name's counter as it is (0 if no
        write hold was ever granted); a read grant does not raise it."""
        return self._take("RLOCK", name, lease_ms)

    def wlock(self, name, lease_ms=0):
        """WLOCK: a write (exclusive) hold, waiting as long as it takes.
        Returns (fence, holds). KindError while this connection holds a read
        hold of the name (an upgrade would wait for itself)."""
        return self._take("WLOCK", name, lease_ms)

    def tryrlock(self, name, wait_ms=0, lease_ms=0):
        """TRYRLOCK: as trylock, for a read hold."""
        return self._try_take("TRYRLOCK", name, wait_ms, lease_ms)

    def trywlock(self, name, wait_ms=0, lease_ms=0):
        """TRYWLOCK: as trylock, for a write hold."""
        return self._try_take("TRYWLOCK", name, wait_ms, lease_ms)

    def runlock(self, name):
        """RUNLOCK: drop one read hold; returns the read holds left."""
        return self._drop("RUNLOCK", name)

    def wunlock(self, name):
        """WUNLOCK: drop one write hold; returns the write holds left."""
        return self._drop("WUNLOCK", name)

    # Multi-name locks: all the names at once, or none; the wait holds none
    # of them, so two owners taking overlapping sets in any order cannot
    # deadlock. Each name granted is an ordinary plain-lock hold of this
    # connection (unlock() releases it, status() shows it; a name already
    # held counts as a reentry, with that hold's fence).

    def _mwords(self, names):
        names = [validate_name(n) for n in names]
        if not 1 <= len(names) <= MNAMES_MAX:
            raise BadRequest(None, "a multi-lock takes 1 to %d locks, not %d"
                             % (MNAMES_MAX, len(names)))
        if len(set(names)) != len(names):
            raise BadRequest(None, "the same lock twice in one multi-lock")
        return names, [str(len(names))] + names

    def _mgrant(self, names, rw, lease_ms):
        if rw[0] == "TIMEOUT":
            raise Timeout(_to_int(rw[1]) if len(rw) > 1 else -1)
        if len(rw) != len(names) + 1:
            raise ProtocolError(None, "bad multi-lock grant: %r" % " ".join(rw))
        return MultiLock(self, names, [_to_int(w) for w in rw[1:]], lease_ms)

    def mlock(self, names, lease_ms=0):
        """MLOCK: wait, as long as it takes, until this connection holds
        every one of names (1 to MNAMES_MAX, none twice). Returns a
        MultiLock (``with`` releases it; ``.fences`` in the order given).
        The names share lease_ms (0: held while connected). cancel() from
        another thread withdraws the wait, holding none of them."""
        names, words = self._mwords(names)
        lease_ms = _lease(lease_ms)
        return self._mgrant(names, self._call(["MLOCK"] + words + [str(lease_ms)],
                                              unbounded=True), lease_ms)

    def trymlock(self, names, wait_ms=0, lease_ms=0):
        """TRYMLOCK: as mlock(), waiting at most wait_ms; raises Timeout
        (with the longest remaining lease seen) holding none of them."""
        names, words = self._mwords(names)
        wait_ms = _check_num("wait_ms", wait_ms)
        lease_ms = _lease(lease_ms)
        rw = self._call(["TRYMLOCK"] + words + [str(wait_ms), str(lease_ms)],
                        wait=wait_ms / 1000.0)
        return self._mgrant(names, rw, lease_ms)

    def munlock(self, names):
        """MUNLOCK: one hold less of each name; the holds left, a list in
        the order given. NotHeld (nothing released) if one is not held."""
        names, words = self._mwords(names)
        rw = self._call(["MUNLOCK"] + words)
        if len(rw) != len(names) + 1:
            raise ProtocolError(None, "bad MUNLOCK reply: %r" % " ".join(rw))
        return [_to_int(w) for w in rw[1:]]

    def read_lock(self, name, lease_ms=0):
        """A ClientLock for a read hold of name over this connection:

            with client.read_lock("catalog") as fence:
                ...
        """
        return ClientLock(self, name, "read", lease_ms)

    def write_lock(self, name, lease_ms=0):
        """A ClientLock for a write hold of name over this connection."""
        return ClientLock(self, name, "write", lease_ms)

    # Fair locks: as lock() and trylock(), reentrant, fenced and released
    # by unlock(), but waiters queue in Redis and get the lock in the order
    # they came, across every dlockd and Redisson client of the name. A
    # waiter's place goes as soon as it stops waiting (its Timeout, close()).
    # On one dlockd a name is one kind at a time: the other requests on a
    # name it holds or waits for as a fair lock, and these on a name it
    # holds as another kind, raise KindError.

    def fairlock(self, name, lease_ms=None):
        """FAIRLOCK: wait for its turn, as long as it takes. Returns (fence,
        holds). lease_ms None or 0: held while this connection lives
        (watchdog); else it ends after lease_ms unless renewed."""
        return self._take("FAIRLOCK", name, 0 if lease_ms is None else lease_ms)

    def tryfairlock(self, name, wait_ms=0, lease_ms=None):
        """TRYFAIRLOCK: wait at most wait_ms for its turn. Returns (fence,
        holds) or raises Timeout (with the holder's ttl_ms), its place in
        the queue gone. wait_ms 0 tries once without taking a place: Timeout
        when the lock is held or anyone waits for it."""
        return self._try_take("TRYFAIRLOCK", name, wait_ms,
                              0 if lease_ms is None else lease_ms)

    def fair_lock(self, name, lease_ms=None, wait_ms=None):
        """A ClientLock for a fair lock of name over this connection:

            with client.fair_lock("payroll") as fence:
                ...

        lease_ms as for fairlock(). wait_ms: how long the ``with`` statement
        waits for its turn (None: as long as it takes); when the lock could
        not be had by then it raises Timeout."""
        return ClientLock(self, name, "fair", lease_ms, wait_ms)

    # Counting semaphores: a name with a number of permits, set once with
    # seminit(); each owner takes and gives back any number at a time. The
    # permits belong to this connection, as locks do: close() gives them
    # back. A semaphore's name refuses the lock requests above, and a lock's
    # name these, with KindError.

    def seminit(self, name, permits):
        """SEMINIT: give the semaphore ``permits`` permits (0 to NUM_MAX)
        if it never had its permits set. True when they were set now, False
        when they had been set already (they stay as they were)."""
        name = validate_name(name)
        rw = self._call(["SEMINIT", name, str(_check_num("permits", permits))], name)
        if len(rw) != 2 or rw[1] not in ("0", "1"):
            raise ProtocolError(None, "bad SEMINIT reply: %r" % " ".join(rw))
        return rw[1] == "1"

    def _count(self, verb, rw):
        if rw[0] == "TIMEOUT":
            raise Timeout(_to_int(rw[1]) if len(rw) > 1 else -1,
                          "permits not acquired within the wait")
        if len(rw) != 2:
            raise ProtocolError(None, "bad %s reply: %r" % (verb, " ".join(rw)))
        return _to_int(rw[1])

    def acquire(self, name, permits, lease_ms=None):
        """ACQUIRE: wait as long as it takes until ``permits`` (1 to
        PERMITS_MAX) are free, and take them. Returns the permits this
        connection holds of the semaphore now (a holder may acquire more).
        Waits, too, while the semaphore's permits were never set. lease_ms
        None or 0: held while this connection lives (watchdog); else they
        end after lease_ms unless renewed, reported as LockLost."""
        return self._acquire("ACQUIRE", name, permits, None, lease_ms)

    def tryacquire(self, name, permits, wait_ms=0, lease_ms=None):
        """TRYACQUIRE: as acquire, waiting at most wait_ms (0: one try).
        Returns the permits held, or raises Timeout, as trylock does (also
        while the permits were never set)."""
        return self._acquire("TRYACQUIRE", name, permits, wait_ms, lease_ms)

    def _acquire(self, verb, name, permits, wait_ms, lease_ms):
        name = validate_name(name)
        words = [verb, name, str(_check_permits(permits))]
        if wait_ms is not None:
            words.append(str(_check_num("wait_ms", wait_ms)))
        lease = None if lease_ms is None else _lease(lease_ms)
        if lease:
            words.append(str(lease))
        if wait_ms is None:
            rw = self._call(words, name, unbounded=True)
        else:
            rw = self._call(words, name, wait=wait_ms / 1000.0)
        return self._count(verb, rw)

    def release(self, name, permits):
        """RELEASE: give ``permits`` back; returns the permits this
        connection still holds. NotHeld, releasing none, when it holds
        fewer."""
        name = validate_name(name)
        return self._count("RELEASE", self._call(["RELEASE", name, str(_check_permits(permits))],
                                                 name))

    def semaphore(self, name, permits, lease_ms=None, wait_ms=None):
        """A ClientSemaphore for ``permits`` permits of the semaphore name
        over this connection:

            with client.semaphore("transcode", 2) as held:
                ...

        lease_ms as for acquire(). wait_ms: how long the ``with`` statement
        waits for them (None: as long as it takes); when they could not be
        had by then it raises Timeout."""
        return ClientSemaphore(self, name, permits, lease_ms, wait_ms)

    # Count-down latches: a count set once with latch_set() and counted
    # down by anyone; at 0 the latch is gone and every waiter is released,
    # on every dlockd of the Redis (and Redisson's await()). A latch has no
    # holder: close() changes no count. A latch's name refuses the lock
    # requests, and a lock's name these, with KindError.

    def latch_set(self, name, count):
        """LATCHSET: set the latch's count (1 to NUM_MAX) if no latch of the
        name exists. True when it was set now, False when one existed (its
        count stays as it was)."""
        name = validate_name(name)
        rw = self._call(["LATCHSET", name, str(_check_num("count", count, 1))])
        if len(rw) != 2 or rw[1] not in ("0", "1"):
            raise ProtocolError(None, "bad LATCHSET reply: %r" % " ".join(rw))
        return rw[1] == "1"

    def count_down(self, name):
        """COUNTDOWN: one less; returns the count left. 0: the latch is gone
        and its waiters are released (a latch that does not exist stays so,
        0)."""
        name = validate_name(name)
        return self._count("COUNTDOWN", self._call(["COUNTDOWN", name]))

    def latch_count(self, name):
        """LATCHCOUNT: the latch's count now; 0 when no latch of the name
        exists."""
        name = validate_name(name)
        return self._count("LATCHCOUNT", self._call(["LATCHCOUNT", name]))

    def await_latch(self, name):
        """AWAIT: wait, as long as it takes, until the latch's count is 0;
        at once when no latch of the name exists. cancel() from another
        thread withdraws the wait (Cancelled)."""
        name = validate_name(name)
        _opened("AWAIT", self._call(["AWAIT", name], unbounded=True))

    def tryawait(self, name, wait_ms=0):
        """TRYAWAIT: as await_latch(), waiting at most wait_ms (0: one
        look). Returns None once the count is 0, or raises Timeout whose
        ``count`` is the count when the wait ended."""
        name = validate_name(name)
        rw = self._call(["TRYAWAIT", name, str(_check_num("wait_ms", wait_ms))],
                        wait=wait_ms / 1000.0)
        _opened("TRYAWAIT", rw)

    def renew(self, name, lease_ms=0):
        """RENEW: a lock with a lease gets lease_ms (0: its own lease); a
        watchdog lock is renewed now and stays one (lease_ms is ignored).
        The same for the permits this connection holds of a semaphore.
        Returns the new ttl in ms."""
        name = validate_name(name)
        words = ["RENEW", name]
        lease = _lease(lease_ms)
        if lease:
            words.append(str(lease))
        rw = self._call(words, name)
        if len(rw) != 2:
            raise ProtocolError(None, "bad RENEW reply: %r" % " ".join(rw))
        return _to_int(rw[1])

    def status(self, name):
        """STATUS: returns a Status(state, holds, ttl_ms, fence), with
        readers for a read/write lock, available for a semaphore."""
        name = validate_name(name)
        return _parse_status(self._call(["STATUS", name], name))

    def force_unlock(self, name):
        """FORCEUNLOCK (uid 0 or admin_uids only): True when a lock was
        removed. Its owner gets !LOST <name> forced. Of a semaphore: every
        permit is given back, whoever holds it (True), or none was held
        (False)."""
        name = validate_name(name)
        rw = self._call(["FORCEUNLOCK", name], name)
        if len(rw) != 2 or rw[1] not in ("0", "1"):
            raise ProtocolError(None, "bad FORCEUNLOCK reply: %r" % " ".join(rw))
        return rw[1] == "1"

    def list(self, pattern="*", limit=None):
        """LIST: the locks of every kind whose names match pattern (Redis's
        glob: * ? [abc] and \\ escapes), across every dlockd and Redisson
        client of the Redis, as a Listing (entries, more). limit: 1 to
        LIST_MAX names; None: dlockd's default (100). Only the names this
        peer may read are told."""
        body = []
        rw = self._call(_list_words(pattern, limit), body=body)
        header = " ".join(rw)
        _list_count(header)     # TIMEOUT is no answer to LIST
        return _parse_listing(header, body)

    def ping(self):
        """PING; returns True."""
        rw = self._call(["PING"])
        if rw[1:] != ["PONG"]:
            raise ProtocolError(None, "bad PING reply: %r" % " ".join(rw))
        return True

    def info(self):
        """INFO as a dict; values that are all digits become ints."""
        rw = self._call(["INFO"])
        out = {}
        for w in rw[1:]:
            k, sep, v = w.partition("=")
            if not sep:
                continue
            out[k] = int(v) if _DIGITS.match(v) else v
        return out

    # Leader election: a name's leader is one connection at a time; its
    # value (a word, as a name) is what observers are told, its fence rises
    # from leadership to leadership. An election's name is its own kind:
    # the lock requests on it, and elect() on a lock's name, raise
    # KindError.

    def elect(self, name, value, lease_ms=0):
        """ELECT: campaign for name and wait, as long as it takes, until
        this connection leads it; candidates are served in the order they
        came. Returns a Leadership (its ``fence``; ``with`` resigns on the
        way out). cancel() from another thread withdraws the campaign
        (Cancelled; a leadership won as the cancel raced it is resigned).
        lease_ms 0: it leads while this connection lives (watchdog); else
        until lease_ms runs out without renew(). Losing it (expired, forced,
        backend) is reported as LockLost, as for a lock. Campaigning again
        for a name it leads returns at once, with the same fence."""
        name = validate_name(name)
        words = ["ELECT", name, _check_value(value)]
        lease = _lease(lease_ms)
        if lease:
            words.append(str(lease))
        self.lost.pop(name, None)   # an old loss of the name is not this leadership's
        rw = self._call(words, unbounded=True)
        if len(rw) != 2:
            raise ProtocolError(None, "bad ELECT reply: %r" % " ".join(rw))
        return Leadership(self, name, value, _to_int(rw[1]), lease_ms)

    def resign(self, name):
        """RESIGN: stop leading name (the next candidate leads at once) or
        campaigning for it. True if it did either, False if not."""
        name = validate_name(name)
        rw = self._call(["RESIGN", name])
        if len(rw) != 2 or rw[1] not in ("0", "1"):
            raise ProtocolError(None, "bad RESIGN reply: %r" % " ".join(rw))
        return rw[1] == "1"

    def leader(self, name):
        """LEADER: the leader of name now, seen from any dlockd: (fence,
        value), or None when nobody leads."""
        name = validate_name(name)
        return _parse_leader(self._call(["LEADER", name])[1:])

    def observe(self, name, callback=None):
        """OBSERVE: returns an Observation of name, whose ``leader`` is the
        leader now ((fence, value), or None) and follows every change dlockd
        tells. Iterating it yields the leader now, then each change as it
        comes (blocking this client's thread). With ``callback``, each
        change goes to ``callback(name, leader)`` instead, from whichever
        call of this client reads it (wait_event() or check() while idle). Fences told never go down;
        one is told again only after a None came between. Observing a name
        again replaces its Observation. LimitError above dlockd's limit of
        observed names per connection."""
        name = validate_name(name)
        rw = self._call(["OBSERVE", name])
        obs = Observation(self, name, _parse_leader(rw[1:]), callback)
        old = self._observers.get(name)
        if old is not None:
            old._ended = True
        self._observers[name] = obs
        return obs

    def unobserve(self, name):
        """UNOBSERVE: no more changes of name after this returns. True if it
        was observed."""
        name = validate_name(name)
        rw = self._call(["UNOBSERVE", name])
        if len(rw) != 2 or rw[1] not in ("0", "1"):
            raise ProtocolError(None, "bad UNOBSERVE reply: %r" % " ".join(rw))
        obs = self._observers.pop(name, None)
        if obs is not None:
            obs._ended = True
        return rw[1] == "1"

    def wait_event(self, timeout=None):
        """Wait for what dlockd sends (with no request outstanding: events)
        and handle it: leader changes go to their Observations, losses to
        check(). timeout in seconds, None: as long as it takes. True if
        something came, False after timeout; ConnectionClosed when dlockd
        closed the connection."""
        if self._sock is None:
            raise ConnectionClosed(None, "connection is closed")
        got = self._can_read(timeout)
        if got:
            self._drain_events()
        if self._eof:
            self._abort()
            raise ConnectionClosed(None, "dlockd closed the connection")
        return got

    def check(self):
        """Read pending events without blocking. Raises LockLost for the first
        lost lock not yet reported (and forgets it), ConnectionClosed when
        dlockd has closed the connection; else returns None."""
        if self._sock is None:
            raise ConnectionClosed(None, "connection is closed")
        self._drain_events()
        if self.lost:
            name = next(iter(self.lost))
            raise LockLost(name, self.lost.pop(name))
        if self._eof:
            self._abort()
            raise ConnectionClosed(None, "dlockd closed the connection")


def _wait_ms(blocking, timeout):
    """acquire()'s arguments, as threading.Lock takes them, as a TRY wait in
    ms; None to wait as long as it takes."""
    if timeout is None:
        timeout = -1
    if not blocking:
        if timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        return 0
    if timeout < 0:
        if timeout != -1:
            raise ValueError("timeout value must be a non-negative number or -1")
        return None
    if timeout * 1000 >= NUM_MAX:
        return NUM_MAX
    return int(math.ceil(timeout * 1000))


# ---- one lock, one connection ------------------------------------------

class _Hold(object):
    """``with``: acquire() waiting as long as it takes, ``as`` the fence;
    release() on the way out (a loss raises, unless an exception is
    already on its way)."""

    def __enter__(self):
        self.acquire()
        return self.fence

    def __exit__(self, exc_type, exc, tb):
        try:
            self.release()
        except DlockError:
            if exc_type is None:
                raise
        return False


class Lock(_Hold):
    """A named lock with its own connection to dlockd.

        with dlock.Lock("name") as fence:
            ...

        lk = dlock.Lock("name")
        if lk.acquire(timeout=2.5):     # like threading.Lock: True or False
            try:
                ...                     # pass lk.fence to the resource
            finally:
                lk.release()

    lease_ms 0 (default): the daemon keeps the lock while the connection
    lives. With a lease it ends unless renewed. Leaving the ``with`` block
    raises LockLost if the lock was lost inside it (unless another exception
    is already on its way). ``fence`` is the fence of the current grant, None
    while the lock is not held. ``timeout`` is the connection's timeout (see
    Client), not a wait for the lock: that is acquire()'s. fair=True takes
    it as a fair lock (FAIRLOCK, TRYFAIRLOCK: waiters get it in the order
    they came; see Client.fairlock), which every user of the name should do.
    """

    def __init__(self, name, socket=None, lease_ms=0, timeout=None, fair=False):
        self.name = validate_name(name)
        self.socket = socket
        self.lease_ms = _lease(lease_ms)
        self.timeout = timeout
        self.fair = bool(fair)
        self.fence = None
        self._holds = 0
        self._client = None

    def __repr__(self):
        return "<dlock.Lock %s%s %s>" % (self.name, " fair" if self.fair else "",
                                         "held" if self._holds else "free")

    def _conn(self):
        if self._client is None or self._client.closed:
            self._client = Client(self.socket, self.timeout)
            self._holds = 0
        return self._client

    def _do(self, fn, *args):
        try:
            return fn(*args)
        except LockLost as e:
            if e.name == self.name:
                self._holds = 0
                self.fence = None
            raise
        except ConnectionClosed:
            self._holds = 0
            self.fence = None
            raise

    def acquire(self, blocking=True, timeout=-1):
        """Take the lock (again: it is reentrant), as threading.Lock.acquire
        does: return True once it is held, with the grant's fence in
        ``self.fence``; return False when it could not be had, at once with
        blocking=False, or after ``timeout`` seconds (fractions allowed; 0
        tries once). timeout -1 (the default) or None waits as long as it
        takes. A timeout with blocking=False, or a negative one other than
        -1, is a ValueError. Every other failure raises its DlockError:
        ConnectFailed, BackendError (Redis trouble), LimitError, LockLost,
        ConnectionClosed, ... After False the Lock keeps its connection for
        the next try; release() closes it."""
        wait_ms = _wait_ms(blocking, timeout)
        c = self._conn()
        try:
            if wait_ms is None:
                fn = c.fairlock if self.fair else c.lock
                fence, holds = self._do(fn, self.name, self.lease_ms)
            else:
                fn = c.tryfairlock if self.fair else c.trylock
                fence, holds = self._do(fn, self.name, wait_ms, self.lease_ms)
        except Timeout:
            return False
        self.fence = fence
        self._holds = holds
        return True

    def release(self):
        """Drop every hold this Lock took and close its connection. Raises
        LockLost if the lock had been lost unnoticed (the connection is
        closed all the same); NotHeld if this Lock has no connection."""
        c = self._client
        if c is None:
            raise NotHeld(None, "lock %s is not held by this Lock" % self.name)
        err = None
        try:
            if not c.closed:
                c._drain_events()
                if self.name in c.lost:
                    err = LockLost(self.name, c.lost.pop(self.name))
                else:
                    while self._holds > 0:
                        self._holds = c.unlock(self.name)
        except DlockError as e:
            err = e
        finally:
            self._holds = 0
            self.fence = None
            self._client = None
            c.close()
        if err is not None:
            raise err

    def renew(self, lease_ms=0):
        """RENEW the lock; returns the new ttl in ms."""
        return self._do(self._conn().renew, self.name, lease_ms)

    def status(self):
        """STATUS of the lock, seen from this Lock's connection."""
        return self._do(self._conn().status, self.name)

    def check(self):
        """Raise LockLost if dlockd reported the lock lost; never blocks."""
        if self._client is None:
            return
        self._do(self._client.check)

    def locked(self):
        """True while this Lock holds the lock (as far as dlockd has told)."""
        c = self._client
        if c is None or c.closed or self._holds == 0:
            return False
        try:
            c._drain_events(strict=False)
        except DlockError:
            return False
        return self.name not in c.lost and not c._eof

    def fileno(self):
        """The connection's descriptor, to wait for events with select()."""
        return self._conn().fileno()


# ---- a read, write or fair hold over a Client --------------------------

class ClientLock(_Hold):
    """A read or a write hold of a name, or a fair lock's, taken over an
    existing Client (its connection is the owner): made by
    Client.read_lock(), Client.write_lock() and Client.fair_lock().

        with client.read_lock("catalog") as fence:
            ...

        wl = client.write_lock("catalog")
        if wl.acquire(timeout=2.5):     # like threading.Lock: True or False
            try:
                ...                     # wl.fence is the fence
            finally:
                wl.release()

    Each acquire() takes one hold and each release() drops one (RUNLOCK,
    WUNLOCK, or UNLOCK of a fair lock), so acquire/release pairs nest, as
    do ``with`` blocks. The ``with`` statement waits ``wait_ms`` (None: as
    long as it takes) and raises Timeout when the lock could not be had by
    then; acquire() takes its own timeout. The connection stays open:
    Client.close() drops every hold at once. Holds taken over one Client
    are one owner's: two read_lock()s of it are one reader, and a
    write_lock() of a name it reads raises KindError (an upgrade); take a
    Client per owner. Leaving the ``with`` block raises LockLost if the
    lock was lost inside it (unless another exception is already on its
    way). ``fence`` is the last grant's, None while not held.
    """

    # mode: (the request that waits, the one that tries, the release)
    _VERBS = {
        "read": ("rlock", "tryrlock", "runlock"),
        "write": ("wlock", "trywlock", "wunlock"),
        "fair": ("fairlock", "tryfairlock", "unlock"),
    }

    def __init__(self, client, name, mode, lease_ms=0, wait_ms=None):
        if mode not in self._VERBS:
            raise ValueError("mode must be 'read', 'write' or 'fair', not %r" % (mode,))
        self.client = client
        self.name = validate_name(name)
        self.mode = mode
        self.lease_ms = _lease(0 if lease_ms is None else lease_ms)
        if wait_ms is not None:
            _check_num("wait_ms", wait_ms)
        self.wait_ms = wait_ms
        self.fence = None
        self._holds = 0     # holds taken through this object

    def __repr__(self):
        return "<dlock.ClientLock %s %s %s>" % (
            self.mode, self.name, "held" if self._holds else "free")

    def _lost(self):
        self._holds = 0
        self.fence = None

    def __enter__(self):
        self._take(self.wait_ms)
        return self.fence

    def _take(self, wait_ms):
        """One hold, waiting as long as it takes (wait_ms None) or trying;
        Timeout propagates."""
        c = self.client
        wait, try_, _ = self._VERBS[self.mode]
        try:
            if wait_ms is None:
                fence, _ = getattr(c, wait)(self.name, self.lease_ms)
            else:
                fence, _ = getattr(c, try_)(self.name, wait_ms, self.lease_ms)
        except (LockLost, ConnectionClosed):
            self._lost()
            raise
        self.fence = fence
        self._holds += 1

    def acquire(self, blocking=True, timeout=-1):
        """Take one hold, as Lock.acquire does: True once held, with the
        grant's fence in ``self.fence``; False when it could not be had, at
        once with blocking=False, or after ``timeout`` seconds. Every other
        failure raises its DlockError (KindError, LockLost, ...)."""
        try:
            self._take(_wait_ms(blocking, timeout))
        except Timeout:
            return False
        return True

    def release(self):
        """Drop one hold taken by acquire(). NotHeld if this object holds
        none; LockLost if the lock had been lost unnoticed."""
        if self._holds == 0:
            raise NotHeld(None, "%s lock %s is not held through this ClientLock"
                          % (self.mode, self.name))
        fn = getattr(self.client, self._VERBS[self.mode][2])
        try:
            fn(self.name)
        except (LockLost, ConnectionClosed, NotHeld):
            self._lost()
            raise
        self._holds -= 1
        if self._holds == 0:
            self.fence = None

    def locked(self):
        """True while this object holds the lock (as far as dlockd has told)."""
        c = self.client
        if self._holds == 0 or c.closed:
            return False
        try:
            c._drain_events(strict=False)
        except DlockError:
            return False
        return self.name not in c.lost and not c._eof


# ---- permits of a semaphore over a Client ------------------------------

class ClientSemaphore(_Hold):
    """Permits of a semaphore, taken over an existing Client (its
    connection is the owner): made by Client.semaphore().

        with client.semaphore("transcode", 2) as held:
            ...                         # 2 permits; held: all this client holds

        sem = client.semaphore("transcode", 1)
        if sem.acquire(timeout=2.5):    # like threading.Semaphore: True or False
            try:
                ...
            finally:
                sem.release()

    Each acquire() takes ``permits`` permits and each release() gives that
    many back, so acquire/release pairs nest, as do ``with`` blocks. The
    ``with`` statement waits ``wait_ms`` (None: as long as it takes) and
    raises Timeout when the permits could not be had by then; acquire()
    takes its own timeout. The connection stays open: Client.close() gives
    every permit back at once. Leaving the ``with`` block raises LockLost
    if the permits were lost inside it (unless another exception is already
    on its way). ``held`` is what the last grant or release answered: the
    permits the connection holds of the semaphore (None before the first).
    """

    def __init__(self, client, name, permits, lease_ms=None, wait_ms=None):
        self.client = client
        self.name = validate_name(name)
        self.permits = _check_permits(permits)
        if lease_ms is not None:
            lease_ms = _lease(lease_ms)
        if wait_ms is not None:
            _check_num("wait_ms", wait_ms)
        self.lease_ms = lease_ms
        self.wait_ms = wait_ms
        self.held = None
        self._taken = 0     # acquires through this object not yet released

    def __repr__(self):
        return "<dlock.ClientSemaphore %s %d permits %s>" % (
            self.name, self.permits, "held" if self._taken else "free")

    def __enter__(self):
        self._take(self.wait_ms)
        return self.held

    def _lost(self):
        self._taken = 0
        self.held = 0

    def _take(self, wait_ms):
        """ACQUIRE (wait_ms None) or TRYACQUIRE; Timeout propagates."""
        c = self.client
        try:
            if wait_ms is None:
                held = c.acquire(self.name, self.permits, self.lease_ms)
            else:
                held = c.tryacquire(self.name, self.permits, wait_ms, self.lease_ms)
        except (LockLost, ConnectionClosed):
            self._lost()
            raise
        self.held = held
        self._taken += 1

    def acquire(self, blocking=True, timeout=-1):
        """Take the permits, as Lock.acquire does: True once they are held;
        False when they could not be had, at once with blocking=False, or
        after ``timeout`` seconds (-1 or None: as long as it takes). Every
        other failure raises its DlockError (KindError, LockLost, ...)."""
        try:
            self._take(_wait_ms(blocking, timeout))
        except Timeout:
            return False
        return True

    def release(self):
        """Give back the permits of one acquire(). NotHeld if this object
        holds none; LockLost if they had been lost unnoticed."""
        if self._taken == 0:
            raise NotHeld(None, "no permits of %s are held through this ClientSemaphore"
                          % self.name)
        try:
            self.held = self.client.release(self.name, self.permits)
        except (LockLost, ConnectionClosed, NotHeld):
            self._lost()
            raise
        self._taken -= 1

    def locked(self):
        """True while this object holds permits (as far as dlockd has told)."""
        c = self.client
        if self._taken == 0 or c.closed:
            return False
        try:
            c._drain_events(strict=False)
        except DlockError:
            return False
        return self.name not in c.lost and not c._eof


# ---- leader election over a Client -------------------------------------

class MultiLock(object):
    """Several names held at once: what Client.mlock() and
    Client.trymlock() return.

        with client.mlock(["acct-1", "acct-2"]) as m:
            transfer(m.fences)      # m.check() raises LockLost once one is lost

    ``names`` and ``fences`` (in the order given); unlock() drops one hold
    of each name (MUNLOCK) and returns the holds left, a list. A loss of
    any of the names (its lease ran out, FORCEUNLOCK, Redis lost it, or
    the connection ended: reason "closed") means the set is no longer all
    held: check() raises LockLost for it, ``held`` is False from then on.
    The other names stay held until unlock(). Leaving the ``with`` block
    unlocks, and raises LockLost if a name was lost inside it (unless
    another exception is already on its way).
    """

    def __init__(self, client, names, fences, lease_ms=0):
        self.client = client
        self.names = list(names)
        self.fences = list(fences)
        self.lease_ms = lease_ms
        self.lost = None        # (name, reason), once one is lost
        self._unlocked = False

    def __repr__(self):
        state = "lost" if self.lost else "unlocked" if self._unlocked else "held"
        return "<dlock.MultiLock %s %s>" % (" ".join(self.names), state)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            try:
                self.check()
            finally:
                if not self._unlocked and not self.client.closed:
                    self.unlock()
        except DlockError:
            if exc_type is None:
                raise
        return False

    def _seen(self):
        """Take a loss of one of the names the client has read."""
        c = self.client
        if self.lost is None and not self._unlocked:
            for name in self.names:
                if name in c.lost:
                    self.lost = (name, c.lost.pop(name))
                    break

    def check(self):
        """Raise LockLost if dlockd reported one of the names lost (or the
        connection ended: reason "closed"); never blocks."""
        c = self.client
        if self.lost is None and not self._unlocked:
            if c.closed:
                self.lost = (self.names[0], "closed")
            else:
                try:
                    c._drain_events()
                except DlockError:
                    self.lost = (self.names[0], "closed")
                self._seen()
                if self.lost is None and c._eof:
                    self.lost = (self.names[0], "closed")
        if self.lost is not None:
            raise LockLost(self.lost[0], self.lost[1], "lock %s of the set %s lost: %s"
                           % (self.lost[0], " ".join(self.names), self.lost[1]))

    @property
    def held(self):
        """True while every name is held (as far as dlockd has told)."""
        try:
            self.check()
        except LockLost:
            return False
        return not self._unlocked

    def unlock(self):
        """MUNLOCK: one hold less of each name; the holds left, a list.
        Releases what is still held even when a name was lost (then NotHeld
        comes from dlockd for the lost one, and each other is unlocked, 0
        standing for the lost one), whether or not this set has seen the
        loss yet (Client.check() may have taken it)."""
        if self._unlocked:
            raise NotHeld(None, "the set %s was unlocked already" % " ".join(self.names))
        c = self.client
        self._seen()
        try:
            left = c.munlock(self.names)
        except NotHeld:
            left = []
            for name in self.names:     # the lost name is gone; the others stay held
                try:
                    left.append(c.unlock(name))
                except (NotHeld, LockLost):
                    left.append(0)
            self._seen()
        self._unlocked = True
        return left


class Leadership(object):
    """A won campaign: what Client.elect() returns.

        with client.elect("billing", "10.0.0.5:8080") as leader:
            serve(leader.fence)

    ``fence`` is the leadership's fence, ``name`` and ``value`` what was
    campaigned with. check() raises LockLost once dlockd reported the
    leadership lost; ``leading`` is False from then on, or after resign().
    Leaving the ``with`` block resigns, and raises LockLost if the
    leadership was lost inside it (unless another exception is already on
    its way).
    """

    def __init__(self, client, name, value, fence, lease_ms=0):
        self.client = client
        self.name = name
        self.value = value
        self.fence = fence
        self.lease_ms = lease_ms
        self.lost = None        # the reason, once lost
        self._resigned = False

    def __repr__(self):
        state = "lost" if self.lost else "resigned" if self._resigned else "leading"
        return "<dlock.Leadership %s fence %s %s>" % (self.name, self.fence, state)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.check()
            self.resign()
        except DlockError:
            if exc_type is None:
                raise
        return False

    def _seen(self):
        """Take a loss of the name the client has read."""
        c = self.client
        if self.lost is None and not self._resigned and self.name in c.lost:
            self.lost = c.lost.pop(self.name)

    def check(self):
        """Raise LockLost if dlockd reported the leadership lost (or the
        connection ended: reason "closed"); never blocks."""
        c = self.client
        if self.lost is None and not self._resigned:
            if c.closed:
                self.lost = "closed"
            else:
                try:
                    c._drain_events()
                except DlockError:
                    self.lost = "closed"
                if c._eof:
                    self.lost = "closed"
                self._seen()
        if self.lost is not None:
            raise LockLost(self.name, self.lost, "leadership of %s lost: %s"
                           % (self.name, self.lost))

    @property
    def leading(self):
        """True while this leadership holds (as far as dlockd has told)."""
        try:
            self.check()
        except LockLost:
            return False
        return not self._resigned

    def resign(self):
        """RESIGN: the next candidate leads at once. True if dlockd still
        counted this connection as the leader (or a candidate)."""
        if self._resigned:
            return False
        self._resigned = True
        return self.client.resign(self.name)

    def renew(self, lease_ms=0):
        """RENEW the leadership's lease; returns the new ttl in ms."""
        return self.client.renew(self.name, lease_ms)


class Observation(object):
    """An observed name: what Client.observe() returns.

        for leader in client.observe("billing"):
            ...     # (fence, value), or None while nobody leads

    ``leader`` is the latest leader told. Iterating yields the leader at
    the time of observe(), then every change (unless a callback takes
    them), waiting for it on the client's connection; it ends after close() (UNOBSERVE), and raises
    ConnectionClosed when the connection ends. A ``with`` block closes it.
    """

    def __init__(self, client, name, leader, callback=None):
        self.client = client
        self.name = name
        self.leader = leader
        self.callback = callback
        self._pending = collections.deque([leader])
        self._ended = False

    def __repr__(self):
        return "<dlock.Observation %s %r>" % (self.name, self.leader)

    def _told(self, leader):
        self.leader = leader
        if self.callback is not None:
            self.callback(self.name, leader)
        else:
            self._pending.append(leader)

    def __iter__(self):
        return self

    def __next__(self):
        while not self._ended and not self._pending:
            self.client.wait_event()
        if self._ended:
            raise StopIteration
        return self._pending.popleft()

    def close(self):
        """UNOBSERVE: no more changes after this returns."""
        if not self._ended and not self.client.closed:
            self.client.unobserve(self.name)
        self._ended = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.close()
        except DlockError:
            if exc_type is None:
                raise
        return False
