"""A TCP fault proxy for the chaos suite: one listening port per link
(daemon -> Redis node), bytes passed through until a fault is set, at run
time, on that link.

    px = FaultProxy()                        # its own asyncio loop, in a thread
    ln = px.link(("127.0.0.1", redis_port))  # ln.port: point the daemon here
    px.link(("127.0.0.1", sentinel_port), ports={node_port: its_link_port})
    px.link(("127.0.0.1", redis_port), mangle=factory)   # factory() per connection:
                          # a callable given each chunk from Redis, returning the bytes to pass on
    ln.blackhole()        # keep every connection, drop every byte both ways (no FIN, no RST)
    ln.drop("up")         # drop daemon -> Redis only ("down": Redis -> daemon only)
    ln.latency(200, 50)   # every byte 200 ms late each way, plus 0..50 ms of jitter
    ln.reset()            # RST every open connection now (SO_LINGER 0)
    ln.refuse()           # new connections are refused (the port stops listening)
    ln.heal()             # all of the above undone
    px.counts             # faults injected so far, per kind
    px.close()

A link may also rewrite node addresses in what it passes to the daemon
(link(target, ports={real: proxied})), so that a daemon led to a node by a
Sentinel (get-master-addr-by-name, +switch-master) or by a Cluster (CLUSTER
SHARDS/SLOTS, MOVED, ASK) is led to its own link to that node instead: the
ports are replaced in their RESP contexts only (an integer reply, a bulk
string, "127.0.0.1 P", "127.0.0.1:P"), keeping lengths (both ports have the
same number of digits: ephemeral ports do). A port split across two reads
is not rewritten; replies on a local link are read whole in practice.

A dropped direction swallows its end of stream too: a black hole sends no
FIN. Connections whose end of stream was swallowed are closed (RST) when the
link heals, as the kernel would after the partition. Latency keeps the order
of bytes (a chunk is never delivered before the one read before it).
The pure part (what to do with a chunk read in one direction) is
LinkFaults.plan(), tested in test_faultproxy.py.

Standard library only.
"""
# SPDX-License-Identifier: MIT

import asyncio
import random
import socket
import struct
import threading
import time

UP, DOWN = "up", "down"         # daemon -> Redis, Redis -> daemon
READ_CHUNK = 65536
CONNECT_TIMEOUT_S = 2.0         # the proxy's own connect to the node
CONTROL_TIMEOUT_S = 5.0         # an API call waits this long for the loop


def port_patterns(ports, host=b"127.0.0.1"):
    """The byte replacements for {real port: proxied port}, each pair the
    same length."""
    out = []
    for real, prox in sorted(ports.items()):
        r, p = str(real).encode(), str(prox).encode()
        if len(r) != len(p):
            raise ValueError("ports %s and %s differ in length" % (real, prox))
        for fmt in (b":%s\r\n", b"$%d\r\n%%s\r\n" % len(r), host + b" %s",
                    host + b":%s"):
            out.append((fmt % r, fmt % p))
    return out


def rewrite(data, patterns):
    for old, new in patterns:
        if old in data:
            data = data.replace(old, new)
    return data


class LinkFaults(object):
    """The faults set on one link, and what they do to a chunk of bytes."""

    def __init__(self):
        self.dropped = set()        # directions whose bytes (and end of stream) vanish
        self.delay_ms = 0
        self.jitter_ms = 0
        self.refusing = False

    def healthy(self):
        return not self.dropped and self.delay_ms == 0 and not self.refusing

    def plan(self, direction, now, last_due, rnd):
        """A chunk read at `now` (seconds) in `direction`: None to drop it,
        else the time it is due at the other side, never before `last_due`
        (the previous chunk's due time in that direction: order is kept)."""
        if direction in self.dropped:
            return None
        if self.delay_ms <= 0:
            return max(now, last_due)
        extra = rnd.uniform(0, self.jitter_ms) if self.jitter_ms > 0 else 0.0
        return max(now + (self.delay_ms + extra) / 1000.0, last_due)


def _rst(writer):
    """Closes a stream's socket with an RST (SO_LINGER on, 0 s)."""
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


class _Pipe(object):
    """One proxied connection: the daemon's side and the node's."""

    def __init__(self, link, cr, cw, sr, sw):
        self.link = link
        self.mangler = link.mangle() if link.mangle else None
        self.cr, self.cw, self.sr, self.sw = cr, cw, sr, sw
        self.eof_swallowed = False
        self.closed = False
        self.tasks = []

    def start(self, loop):
        for d, r, w in ((UP, self.cr, self.sw), (DOWN, self.sr, self.cw)):
            q = asyncio.Queue()
            self.tasks.append(loop.create_task(self._read(d, r, q)))
            self.tasks.append(loop.create_task(self._send(w, q)))

    async def _read(self, d, r, q):
        last = 0.0
        try:
            while True:
                data = await r.read(READ_CHUNK)
                if d == DOWN and self.link.patterns:
                    data = rewrite(data, self.link.patterns)
                if data and d == DOWN and self.mangler is not None:
                    data = self.mangler(data)       # may hold bytes back
                    if not data:
                        continue
                now = time.monotonic()
                due = self.link.faults.plan(d, now, last, self.link.rnd)
                if not data:
                    if due is None:
                        self.eof_swallowed = True    # no FIN through a black hole
                        return
                    q.put_nowait((due, None))
                    return
                if due is None:
                    continue
                last = due
                q.put_nowait((due, data))
        except (OSError, asyncio.IncompleteReadError):
            if self.link.faults.dropped:
                self.eof_swallowed = True
            else:
                self.close(rst=True)

    async def _send(self, w, q):
        try:
            while True:
                due, data = await q.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if data is None:
                    self.close(rst=False)
                    return
                w.write(data)
                await w.drain()
        except OSError:
            self.close(rst=True)

    def close(self, rst):
        if self.closed:
            return
        self.closed = True
        for w in (self.cw, self.sw):
            if rst:
                _rst(w)
            else:
                w.close()
        for t in self.tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self.link.pipes.discard(self)


class Link(object):
    """One listening port forwarding to one node; the fault controls are
    called from any thread."""

    def __init__(self, proxy, target, seed, ports=None, mangle=None):
        self.proxy = proxy
        self.target = target
        self.patterns = port_patterns(ports) if ports else []
        self.mangle = mangle
        self.faults = LinkFaults()
        self.rnd = random.Random(seed)
        self.pipes = set()
        self.server = None
        self.port = None

    # -- on the loop --
    async def _listen(self):
        self.server = await asyncio.start_server(self._on_client, "127.0.0.1", self.port or 0,
                                                 reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _on_client(self, cr, cw):
        if self.faults.refusing:
            _rst(cw)
            return
        try:
            sr, sw = await asyncio.wait_for(asyncio.open_connection(*self.target),
                                            CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError):
            _rst(cw)        # the node is down: so is the link
            return
        p = _Pipe(self, cr, cw, sr, sw)
        self.pipes.add(p)
        p.start(asyncio.get_running_loop())

    async def _refuse(self):
        self.faults.refusing = True
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None

    async def _heal(self):
        self.faults.dropped = set()
        self.faults.delay_ms = self.faults.jitter_ms = 0
        for p in list(self.pipes):
            if p.eof_swallowed:
                p.close(rst=True)
        if self.faults.refusing:
            self.faults.refusing = False
            await self._listen()

    async def _reset(self):
        for p in list(self.pipes):
            p.close(rst=True)

    # -- the API --
    def _on_loop(self, kind, fn):
        self.proxy.counts[kind] = self.proxy.counts.get(kind, 0) + 1
        return self.proxy.run(fn)

    def blackhole(self):
        async def f():
            self.faults.dropped = {UP, DOWN}
        return self._on_loop("blackhole", f)

    def drop(self, direction):
        assert direction in (UP, DOWN)

        async def f():
            self.faults.dropped = {direction}
        return self._on_loop("drop-" + direction, f)

    def latency(self, ms, jitter_ms=0):
        async def f():
            self.faults.delay_ms, self.faults.jitter_ms = ms, jitter_ms
        return self._on_loop("latency", f)

    def reset(self):
        return self._on_loop("reset", self._reset)

    def refuse(self):
        return self._on_loop("refuse", self._refuse)

    def heal(self):
        return self.proxy.run(self._heal)

    def connections(self):
        async def f():
            return len(self.pipes)
        return self.proxy.run(f)


class FaultProxy(object):
    """The links of one run, served by one asyncio loop in a daemon thread."""

    def __init__(self, seed=0):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="faultproxy",
                                       daemon=True)
        self.thread.start()
        self.links = []
        self.counts = {}
        self.rnd = random.Random(seed)

    def run(self, coro_fn):
        """Runs coro_fn() on the loop and returns its result."""
        fut = asyncio.run_coroutine_threadsafe(coro_fn(), self.loop)
        return fut.result(CONTROL_TIMEOUT_S)

    def link(self, target, ports=None, mangle=None):
        ln = Link(self, target, self.rnd.randrange(1 << 30), ports, mangle)
        self.run(ln._listen)
        self.links.append(ln)
        return ln

    def close(self):
        async def f():
            for ln in self.links:
                if ln.server is not None:
                    ln.server.close()
                for p in list(ln.pipes):
                    p.close(rst=True)
        try:
            self.run(f)
        except Exception:
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(CONTROL_TIMEOUT_S)
        if not self.thread.is_alive():
            self.loop.close()
