"""The fenced store of the chaos suite: a counter behind a Unix socket that
refuses writes carrying a fence lower than the highest it has seen.

It runs as threads inside the orchestrator and is also its event log: every
grant (reported with the first read), write, end of critical section and
worker note is recorded with the store's own time.monotonic() (CLOCK_MONOTONIC
is system-wide, so workers' and the orchestrator's times compare directly).

Line protocol (one request, one reply):
  H <wid> <inc> <pid> <daemon>                    -> OK
  R <wid> <inc> <it> <daemon> <fence> <t_grant> <t_req>
                                                  -> V <value> | Q (stop: unlock and exit)
  W <wid> <inc> <it> <fence> <read> <new>         -> OK | REJ <highest>
  E <wid> <inc> <it> <t_end> <outcome> [<t_done>] -> OK
  N <wid> <inc> <kind> <t>                        -> OK

A read registers its fence too (the highest fence seen rises on reads as
well as on writes): that is what makes a read-modify-write safe, since a
holder whose lease ran out and who read before the next holder can no longer
write after the next holder has read. A write is accepted when its fence is
>= the highest seen (a holder's own read registered the same fence) and
then sets the value blindly to what the writer computed.
"""
# SPDX-License-Identifier: MIT

import os
import socket
import threading
import time


class Hook(object):
    """Holds back the reply to the next read matching (wid, daemon)."""

    def __init__(self, wid=None, daemon=None, exclude=()):
        self.wid = wid
        self.daemon = daemon
        self.exclude = frozenset(exclude)
        self.arrived = threading.Event()
        self.release = threading.Event()
        self.grant = None

    def matches(self, g):
        return ((self.wid is None or g["wid"] == self.wid) and
                (self.daemon is None or g["daemon"] == self.daemon) and
                g["wid"] not in self.exclude and not g["stopped"])


class FencedStore(object):
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.value = 0
        self.highest = 0
        self.seq = 0                 # order of every store operation
        self.grants = {}             # (wid, inc, it) -> grant record
        self.grant_order = []        # grant records in order of arrival
        self.accepted = []           # write records, in acceptance order
        self.rejected = []
        self.notes = []              # (t, wid, inc, kind)
        self.hello = {}              # (wid, inc) -> pid
        self.hooks = []
        self.stopping = False
        self.errors = []             # malformed requests etc.
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(128)
        self._conns = []
        self._closed = False
        t = threading.Thread(target=self._accept_loop, name="store-accept", daemon=True)
        t.start()

    # ---- server plumbing ----

    def close(self):
        self._closed = True
        with self.lock:
            for h in self.hooks:
                h.release.set()
            self.hooks = []
        for s in [self._sock] + self._conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def _accept_loop(self):
        while not self._closed:
            try:
                c, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(c)
            threading.Thread(target=self._serve, args=(c,), name="store-conn",
                             daemon=True).start()

    def _serve(self, c):
        buf = b""
        try:
            while True:
                i = buf.find(b"\n")
                if i < 0:
                    data = c.recv(65536)
                    if not data:
                        return
                    buf += data
                    continue
                line, buf = buf[:i].decode("ascii", "replace"), buf[i + 1:]
                reply = self._handle(line)
                c.sendall(reply.encode("ascii") + b"\n")
        except OSError:
            return
        finally:
            try:
                c.close()
            except OSError:
                pass

    def _handle(self, line):
        w = line.split()
        try:
            op = w[0]
            if op == "R":
                return self._read(int(w[1]), int(w[2]), int(w[3]), int(w[4]), int(w[5]),
                                  float(w[6]), float(w[7]))
            if op == "W":
                return self._write(int(w[1]), int(w[2]), int(w[3]), int(w[4]), int(w[5]),
                                   int(w[6]))
            if op == "E":
                return self._end(int(w[1]), int(w[2]), int(w[3]), float(w[4]), w[5],
                                 float(w[6]) if len(w) > 6 else None)
            if op == "N":
                with self.lock:
                    self.notes.append((float(w[4]), int(w[1]), int(w[2]), w[3]))
                return "OK"
            if op == "H":
                with self.lock:
                    self.hello[(int(w[1]), int(w[2]))] = int(w[3])
                return "OK"
        except (IndexError, ValueError) as e:
            with self.lock:
                self.errors.append("bad request %r: %s" % (line, e))
            return "ERR"
        with self.lock:
            self.errors.append("unknown request %r" % line)
        return "ERR"

    # ---- operations ----

    def _read(self, wid, inc, it, daemon, fence, t_grant, t_req):
        hook = None
        with self.lock:
            now = time.monotonic()
            self.seq += 1
            g = {"wid": wid, "inc": inc, "it": it, "daemon": daemon, "fence": fence,
                 "t_start": t_grant, "t_req": t_req, "t_read": now, "read_seq": self.seq,
                 "read_value": self.value, "stale_read": fence < self.highest,
                 "write": None, "t_end": None, "t_done": None, "outcome": None,
                 "stopped": self.stopping,
                 "idx": len(self.grant_order)}
            key = (wid, inc, it)
            if key in self.grants:
                self.errors.append("grant %r reported twice" % (key,))
            self.grants[key] = g
            self.grant_order.append(g)
            if fence > self.highest:
                self.highest = fence
            value = self.value
            for h in self.hooks:
                if h.matches(g):
                    hook = h
                    self.hooks.remove(h)
                    break
            self.cond.notify_all()
        if hook is not None:
            hook.grant = g
            hook.arrived.set()
            hook.release.wait(120)
        return "Q" if g["stopped"] else "V %d" % value

    def _write(self, wid, inc, it, fence, read, new):
        with self.lock:
            now = time.monotonic()
            self.seq += 1
            rec = {"wid": wid, "inc": inc, "it": it, "fence": fence, "t": now,
                   "seq": self.seq, "read": read, "written": new,
                   "value_before": self.value, "highest_before": self.highest}
            g = self.grants.get((wid, inc, it))
            if g is None:
                self.errors.append("write without a recorded grant %r" % ((wid, inc, it),))
            if fence >= self.highest:
                self.highest = fence
                self.value = new
                rec["accepted"] = True
                self.accepted.append(rec)
                reply = "OK"
            else:
                rec["accepted"] = False
                self.rejected.append(rec)
                reply = "REJ %d" % self.highest
            if g is not None:
                g["write"] = rec
            self.cond.notify_all()
            return reply

    def _end(self, wid, inc, it, t_end, outcome, t_done=None):
        with self.lock:
            g = self.grants.get((wid, inc, it))
            if g is None:
                self.errors.append("end without a recorded grant %r" % ((wid, inc, it),))
            else:
                g["t_end"] = t_end
                g["outcome"] = outcome
                g["t_done"] = t_done     # UNLOCK's reply (or its failure) came
            self.cond.notify_all()
        return "OK"

    # ---- for the orchestrator ----

    def hook(self, wid=None, daemon=None, exclude=()):
        h = Hook(wid, daemon, exclude)
        with self.lock:
            self.hooks.append(h)
        return h

    def unhook(self, h):
        with self.lock:
            if h in self.hooks:
                self.hooks.remove(h)
        h.release.set()

    def wait_for(self, pred, timeout):
        """Waits until pred() (called with the lock held) is true; returns its
        value, or None after timeout seconds."""
        with self.cond:
            return self.cond.wait_for(pred, timeout)

    def stop_workers(self):
        with self.lock:
            self.stopping = True
            self.cond.notify_all()

    def resume_workers(self):
        """After stop_workers(): reads answer values again (new workers)."""
        with self.lock:
            self.stopping = False

    def counts(self):
        with self.lock:
            return len(self.grant_order), len(self.accepted), len(self.rejected)


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


if __name__ == "__main__":  # pragma: no cover - a quick manual check
    import tempfile
    d = tempfile.mkdtemp()
    st = FencedStore(os.path.join(d, "s.sock"))
    print(st._handle("R 1 1 1 0 5 1.0 0.9"), st._handle("W 1 1 1 5 0 1"),
          st._handle("R 2 1 1 0 4 1.0 0.9"), st._handle("W 2 1 1 4 1 2"))
