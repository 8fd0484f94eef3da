"""A hostile Redis for the stateful fuzzer: a faultproxy link's mangler that
rewrites, at random, whole RESP2 replies on their way from Redis to dlockd.

    m = Mangler(random.Random(seed), rate=0.03)
    ln = FaultProxy().link(("127.0.0.1", redis_port), mangle=m.pipe)
    m.rate = 0          # replies pass untouched from now on (the run's end)
    m.counts            # mutations made so far, per kind

Each link connection gets its own reassembly buffer (m.pipe() is called per
connection): bytes are held back until a reply is complete, then passed on
as they came or, with probability rate, as one of:

  hold-gone     an acquire's {GRANTED, fence} as {HOLD_GONE, 0}, and a
                multi-name grant {GRANTED, f1 .. fn} as {HOLD_GONE, 0, 1}
                (scripts.h's codes: the "HOLD_GONE where a grant was" of
                issue 36)
  huge-number   an integer of an array replaced by 2^63 - 1 or -2^63 (a
                semaphore's available permits, a fence, a PTTL)
  huge-length   the reply replaced by a header claiming 2147483647 elements
                or bytes ("*2147483647"), so that what follows is read into it
  wrong-type    the reply replaced by a status, an integer, a nil, an empty
                or nested array, a bulk string or an error
  scan-loop     a SCAN reply's cursor "0" (the end) replaced by "1", so that
                a listing that trusts Redis never ends

Replies that do not parse as RESP2 (they cannot: Redis wrote them) would
switch the connection to passing everything as it is. The parser (parse())
is pure; tests/fuzz/test_mangle.py tests it and the mutations.

Standard library only.
"""
# SPDX-License-Identifier: MIT

import threading

I64_MAX = (1 << 63) - 1
I64_MIN = -(1 << 63)
HUGE_LEN = 2147483647
GRANTED, HOLD_GONE = 0, 4          # daemon/backend/scripts.h

WRONG_TYPES = (b"+OK\r\n", b":1\r\n", b"$-1\r\n", b"*-1\r\n", b"*0\r\n",
               b"*1\r\n*1\r\n:1\r\n", b"$3\r\nabc\r\n",
               b"-ERR mangled by the stateful fuzzer\r\n")
KINDS = ("hold-gone", "huge-number", "huge-length", "wrong-type", "scan-loop")


class Status(bytes):
    """A +status line's text."""


class Error(bytes):
    """A -error line's text."""


def parse(buf, i=0):
    """One RESP2 value from buf[i:]: (value, end), or None if it is not
    complete yet. Values: int, bytes (bulk), Status, Error, list, None (nil).
    ValueError if the bytes are not RESP2."""
    j = buf.find(b"\r\n", i)
    if j < 0:
        return None
    t, line = buf[i:i + 1], bytes(buf[i + 1:j])
    if t == b"+":
        return Status(line), j + 2
    if t == b"-":
        return Error(line), j + 2
    if t == b":":
        return int(line), j + 2
    if t == b"$":
        n = int(line)
        if n < 0:
            return None, j + 2
        if len(buf) < j + 2 + n + 2:
            return None
        return bytes(buf[j + 2:j + 2 + n]), j + 4 + n
    if t == b"*":
        n = int(line)
        if n < 0:
            return None, j + 2
        out, k = [], j + 2
        for _ in range(n):
            r = parse(buf, k)
            if r is None:
                return None
            out.append(r[0])
            k = r[1]
        return out, k
    raise ValueError("not RESP2: %r" % bytes(buf[i:i + 16]))


def dump(v):
    """v (as parse() gives it) as RESP2 bytes."""
    if v is None:
        return b"$-1\r\n"
    if isinstance(v, Status):
        return b"+" + v + b"\r\n"
    if isinstance(v, Error):
        return b"-" + v + b"\r\n"
    if isinstance(v, int):
        return b":%d\r\n" % v
    if isinstance(v, bytes):
        return b"$%d\r\n%s\r\n" % (len(v), v)
    return b"*%d\r\n" % len(v) + b"".join(dump(x) for x in v)


def _ints(v):
    return isinstance(v, list) and v and all(isinstance(x, int) for x in v)


def mutations(v):
    """The kinds of mutation that fit reply v (wrong-type and huge-length
    fit every reply)."""
    out = ["wrong-type", "huge-length"]
    if _ints(v) and v[0] == GRANTED and len(v) >= 2:
        out.append("hold-gone")
    if isinstance(v, list) and any(isinstance(x, int) for x in v):
        out.append("huge-number")
    if (isinstance(v, list) and len(v) == 2 and v[0] == b"0" and isinstance(v[1], list)):
        out.append("scan-loop")
    return out


def mutate(v, kind, rnd):
    """Reply v mangled by kind, as bytes."""
    if kind == "hold-gone":
        return dump([HOLD_GONE, 0] if len(v) == 2 else [HOLD_GONE, 0, 1])
    if kind == "huge-number":
        at = rnd.choice([i for i, x in enumerate(v) if isinstance(x, int)])
        return dump(v[:at] + [rnd.choice((I64_MAX, I64_MIN))] + v[at + 1:])
    if kind == "scan-loop":
        return dump([b"1", v[1]])
    if kind == "huge-length":
        return rnd.choice((b"*%d\r\n" % HUGE_LEN, b"$%d\r\n" % HUGE_LEN,
                           b"*2\r\n*%d\r\n" % HUGE_LEN))
    return rnd.choice(WRONG_TYPES)


class _Pipe(object):
    """One link connection's replies, reassembled."""

    def __init__(self, m):
        self.m = m
        self.buf = b""
        self.raw = False          # unparseable: pass everything as it is

    def __call__(self, data):
        if self.raw:
            return data
        self.buf += data
        out = []
        while self.buf:
            try:
                r = parse(self.buf)
            except ValueError:
                self.raw = True
                out.append(self.buf)
                self.buf = b""
                break
            if r is None:
                break
            v, end = r
            out.append(self.m.reply(v, self.buf[:end]))
            self.buf = self.buf[end:]
        return b"".join(out)


class Mangler(object):
    def __init__(self, rnd, rate=0.03, kinds=KINDS):
        self.rnd = rnd
        self.rate = rate
        self.kinds = kinds
        self.counts = {}
        self.replies = 0
        self.mu = threading.Lock()

    def pipe(self):
        return _Pipe(self)

    def reply(self, v, raw):
        with self.mu:
            self.replies += 1
            if self.rate <= 0 or self.rnd.random() >= self.rate:
                return raw
            fit = [k for k in mutations(v) if k in self.kinds]
            if not fit:
                return raw
            # a grant's own mutation first: the rarest reply, the likeliest bug
            kind = "hold-gone" if "hold-gone" in fit and self.rnd.random() < 0.5 else \
                self.rnd.choice(fit)
            self.counts[kind] = self.counts.get(kind, 0) + 1
            return mutate(v, kind, self.rnd)
