#!/usr/bin/env python3
"""Tests of history.py's checker over hand-made histories: each rule of the
model is broken once. Run: python3 tests/chaos/test_history.py"""
# SPDX-License-Identifier: MIT

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import history  # noqa: E402


class H(object):
    """Builds a history: lock(proc, t0, t1, fence), unlock(proc, t0, t1), ..."""

    def __init__(self):
        self.ops = []

    def _add(self, **r):
        r.setdefault("name", "n")
        r["i"] = len(self.ops)
        self.ops.append(r)

    def lock(self, p, t0, t1, fence=None, res="ok"):
        self._add(proc=p, op="lock", t0=t0, t1=t1, res=res, fence=fence)

    def unlock(self, p, t0, t1):
        self._add(proc=p, op="unlock", t0=t0, t1=t1, res="OK 0")

    def lost(self, p, t):
        self._add(proc=p, op="lost", t0=t, t1=t, res="backend")

    def write(self, p, t, fence, accepted):
        self._add(proc=p, op="write", t0=t, t1=t, fence=fence,
                  res="accepted" if accepted else "rejected")


class CheckTest(unittest.TestCase):
    def test_clean_history(self):
        h = H()
        h.lock("a", 0, 1, 10)
        h.write("a", 1.5, 10, True)
        h.unlock("a", 2, 2.1)
        h.lock("b", 1.8, 2.2, 11)      # invoked before a's UNLOCK: fine
        h.write("b", 2.3, 11, True)
        h.unlock("b", 3, 3.1)
        r = history.check(h.ops)
        self.assertEqual(r.violations, [])
        self.assertEqual((r.ops, r.names, r.sections), (6, 1, 2))

    def test_overlap(self):
        h = H()
        h.lock("a", 0, 1, 10)
        h.lock("b", 1.2, 1.5, 11)
        h.unlock("a", 2, 2.1)
        h.unlock("b", 3, 3.1)
        r = history.check(h.ops)
        self.assertIn("two holders at once", r.first())

    def test_lost_ends_the_section_when_it_arrives(self):
        h = H()
        h.lock("a", 0, 1, 10)
        h.lost("a", 2.0)
        h.lock("b", 1.5, 2.2, 11)
        self.assertEqual(history.check(h.ops).violations, [])
        h = H()
        h.lock("a", 0, 1, 10)
        h.lock("b", 1.5, 1.8, 11)      # granted before a heard !LOST
        h.lost("a", 2.0)
        self.assertIn("two holders at once", history.check(h.ops).first())

    def test_fence_twice(self):
        h = H()
        h.lock("a", 0, 1, 10)
        h.unlock("a", 2, 2.1)
        h.lock("b", 3, 4, 10)
        self.assertIn("granted twice", history.check(h.ops).first())

    def test_fence_must_rise(self):
        h = H()
        h.lock("a", 0, 1, 10)
        h.unlock("a", 2, 2.1)
        h.lock("b", 3, 4, 9)
        self.assertIn("do not rise", history.check(h.ops).first())

    def test_indeterminate_lock_explains_nothing_and_breaks_nothing(self):
        h = H()
        h.lock("a", 0, 5, res="info")
        h.lock("b", 1, 2, 10)
        h.unlock("b", 3, 3.1)
        r = history.check(h.ops)
        self.assertEqual(r.violations, [])
        self.assertEqual(r.indeterminate, 1)

    def test_waiting_while_free(self):
        h = H()
        h._add(proc="a", op="lock", t0=0, t1=0.01, res="cancelled")
        h.lock("b", 0.02, 1.5, 10)      # nothing held it from 0.51 on
        h.unlock("b", 2, 2.1)
        waits = dict(names={"n"}, bound_s=0.5, cancel_s=0.5, lease_s=2.0)
        self.assertIn("free for certain", history.check(h.ops, waits=waits).first())
        h = H()
        h._add(proc="a", op="lock", t0=0, t1=0.01, res="cancelled")
        h.lock("b", 0.02, 0.6, 10)
        h.unlock("b", 2, 2.1)
        h.lock("c", 1.0, 2.2, 11)       # waited for b's UNLOCK
        h.unlock("c", 3, 3.1)
        self.assertEqual(history.check(h.ops, waits=waits).violations, [])
        h = H()
        h.lock("a", 0, 0.01, 9)
        h.lost("a", 0.5)                 # its key may outlive the !LOST by a lease
        h.lock("b", 0.1, 2.0, 10)
        self.assertEqual(history.check(h.ops, waits=waits).violations, [])

    def test_free_with_waiters(self):
        # a's release answered at 1.1; b waited from 0.5; granted at 1.2:
        # a hand-off of 0.1 s
        h = H()
        h.lock("a", 0, 0.1, 10)
        h.lock("b", 0.5, 1.3, 11)
        h.unlock("a", 1.0, 1.1)
        h.unlock("b", 2, 2.1)
        r = history.free_with_waiters(h.ops, 0.5)
        self.assertEqual((r.violations, r.judged), ([], 1))
        self.assertAlmostEqual(r.longest, 0.2)
        # with the grant's moment known (the fence): 1.2, not the reply's 1.3
        r = history.free_with_waiters(h.ops, 0.5, grant_at=lambda s: s["fence"] / 10.0 + 0.1)
        self.assertAlmostEqual(r.longest, 0.1)
        # granted 2 s after the release while b waited: the name sat free
        h = H()
        h.lock("a", 0, 0.1, 10)
        h.lock("b", 0.5, 3.1, 11)
        h.unlock("a", 1.0, 1.1)
        h.unlock("b", 4, 4.1)
        r = history.free_with_waiters(h.ops, 0.5)
        self.assertIn("free for 2.000 s with 1 waiting", r.violations[0])
        # ... unless b's daemon could not act (paused), or a window excuses it
        r = history.free_with_waiters(h.ops, 0.5, live=lambda p, t0, t1: p != "b")
        self.assertEqual((r.violations, r.judged), ([], 0))
        r = history.free_with_waiters(h.ops, 0.5, excused=lambda name, t0, t1: True)
        self.assertEqual((r.violations, r.excused), ([], 1))
        # but a live waiter elsewhere still counts: c waited while b's daemon slept
        h = H()
        h.lock("a", 0, 0.1, 10)
        h.lock("b", 0.5, 3.1, 11)
        h.lock("c", 0.6, 3.3, 12)
        h.unlock("a", 1.0, 1.1)
        h.unlock("b", 4, 4.1)
        h.unlock("c", 5, 5.1)
        r = history.free_with_waiters(h.ops, 0.5, live=lambda p, t0, t1: p != "b")
        self.assertIn("free for 2.000 s with 1 waiting", r.violations[0])
        # nobody waiting when it was released: a free name is no hang (the
        # gap runs from b's LOCK)
        h = H()
        h.lock("a", 0, 0.1, 10)
        h.unlock("a", 1.0, 1.1)
        h.lock("b", 3.0, 3.1, 11)
        h.unlock("b", 4, 4.1)
        r = history.free_with_waiters(h.ops, 0.5)
        self.assertEqual(r.violations, [])
        self.assertAlmostEqual(r.longest, 0.1)
        # a release not answered OK (the section ended otherwise) judges nothing
        h = H()
        h.lock("a", 0, 0.1, 10)
        h.lock("b", 0.5, 3.1, 11)
        h.lost("a", 1.0)
        h.unlock("b", 4, 4.1)
        self.assertEqual(history.free_with_waiters(h.ops, 0.5).judged, 0)

    def test_store_rule(self):
        h = H()
        h.write("a", 1, 10, True)
        h.write("b", 2, 9, True)       # a lower fence accepted: a store bug
        self.assertIn("the store accepted", history.check(h.ops).first())
        h = H()
        h.write("a", 1, 10, True)
        h.write("b", 2, 11, False)     # the highest refused
        self.assertIn("the store rejected", history.check(h.ops).first())


def ops(*rows):
    """Records from (proc, op, t0, t1, extra dict) rows, in order."""
    out = []
    for i, (p, op, t0, t1, kw) in enumerate(rows):
        out.append(dict(dict(proc=p, name="n", op=op, t0=t0, t1=t1, res="ok", i=i), **kw))
    return out


class RwlockTest(unittest.TestCase):
    def test_readers_share_writers_exclusive(self):
        h = ops(("a", "rlock", 0, 1, dict(fence=5)),
                ("b", "rlock", 0.5, 1.2, dict(fence=5)),      # readers share a fence
                ("a", "runlock", 2, 2.1, {}),
                ("b", "runlock", 2.2, 2.3, {}),
                ("c", "wlock", 1.5, 2.4, dict(fence=7)),
                ("c", "wunlock", 3, 3.1, {}),
                ("a", "rlock", 3.2, 3.3, dict(fence=7)))
        r = history.check_rwlock(h)
        self.assertEqual(r.violations, [])
        self.assertEqual((r.ops, r.names, r.sections), (7, 1, 4))

    def test_writer_alongside_reader(self):
        h = ops(("a", "rlock", 0, 1, dict(fence=5)),
                ("c", "wlock", 0.5, 1.5, dict(fence=7)),
                ("a", "runlock", 2, 2.1, {}))
        self.assertIn("a writer alongside", history.check_rwlock(h).first())

    def test_two_writers(self):
        h = ops(("a", "wlock", 0, 1, dict(fence=5)),
                ("c", "wlock", 0.5, 1.5, dict(fence=7)),
                ("a", "wunlock", 2, 2.1, {}))
        self.assertIn("a writer alongside", history.check_rwlock(h).first())

    def test_fences(self):
        h = ops(("a", "wlock", 0, 1, dict(fence=5)),
                ("a", "wunlock", 2, 2.1, {}),
                ("b", "rlock", 3, 4, dict(fence=4)))          # below the write before it
        self.assertIn("do not rise", history.check_rwlock(h).first())
        h = ops(("a", "rlock", 0, 1, dict(fence=5)),
                ("a", "runlock", 2, 2.1, {}),
                ("b", "wlock", 3, 4, dict(fence=5)))          # a write raises the counter
        self.assertIn("not above an earlier read", history.check_rwlock(h).first())
        h = ops(("a", "wlock", 0, 1, dict(fence=5)),
                ("a", "wunlock", 2, 2.1, {}),
                ("b", "wlock", 3, 4, dict(fence=5)))
        self.assertIn("granted twice", " ".join(history.check_rwlock(h).violations))

    def test_lost_ends_a_write(self):
        h = ops(("a", "wlock", 0, 1, dict(fence=5)),
                ("a", "lost", 2, 2, dict(res="backend")),
                ("b", "rlock", 1.5, 2.2, dict(fence=5)))
        self.assertEqual(history.check_rwlock(h).violations, [])


class SemaphoreTest(unittest.TestCase):
    def test_within_size(self):
        h = ops(("a", "acquire", 0, 0.1, dict(permits=2)),
                ("b", "acquire", 0, 0.2, dict(permits=1)),
                ("a", "release", 0.3, 0.3, dict(permits=1)),   # part of it
                ("c", "acquire", 0.1, 0.4, dict(permits=1)),
                ("b", "release", 0.5, 0.5, dict(permits=None)),
                ("d", "acquire", 0.2, 0.6, dict(permits=1, lease=300)),
                ("d", "acquire", 1.0, 1.1, dict(permits=1)))   # its lease ran out at 0.5
        r = history.check_semaphore(h, 3)
        self.assertEqual(r.violations, [])
        self.assertEqual((r.sections, r.peak["n"]), (5, 3))

    def test_over_granted(self):
        h = ops(("a", "acquire", 0, 0.1, dict(permits=2)),
                ("b", "acquire", 0, 0.2, dict(permits=2)))
        self.assertIn("4 permits held of 3", history.check_semaphore(h, 3).first())

    def test_orphans_count_until_their_lease(self):
        h = ops(("a", "acquire", 0, 0.1, dict(permits=2, wlease=1000)),
                ("a", "orphaned", 0.5, 0.5, {}),
                ("b", "acquire", 0.2, 0.8, dict(permits=2)))
        self.assertIn("held of 3", history.check_semaphore(h, 3).first())
        h = ops(("a", "acquire", 0, 0.1, dict(permits=2, wlease=1000)),
                ("a", "orphaned", 0.5, 0.5, {}),
                ("b", "acquire", 0.2, 1.2, dict(permits=2)))
        self.assertEqual(history.check_semaphore(h, 3).violations, [])
        h = ops(("a", "acquire", 0, 0.1, dict(permits=2)),
                ("a", "closed", 0.5, 0.5, {}),                 # a killed holder: ends at once
                ("b", "acquire", 0.2, 0.6, dict(permits=2)))
        self.assertEqual(history.check_semaphore(h, 3).violations, [])


class ElectionTest(unittest.TestCase):
    def test_clean(self):
        h = ops(("a", "elect", 0, 1, dict(fence=5)),
                ("o", "observe", 1.1, 1.1, dict(fence=5)),
                ("a", "resign", 2, 2.1, {}),
                ("o", "observe", 2.1, 2.1, dict(fence=0)),
                ("b", "elect", 0.5, 2.2, dict(fence=6)),
                ("o", "observe", 2.3, 2.3, dict(fence=6)),
                ("o", "observe", 2.4, 2.4, dict(fence=-1)),    # a new connection
                ("o", "observe", 2.5, 2.5, dict(fence=6)))
        r = history.check_election(h)
        self.assertEqual(r.violations, [])
        self.assertEqual((r.ops, r.sections, r.told), (8, 2, 3))

    def test_two_leaders(self):
        h = ops(("a", "elect", 0, 1, dict(fence=5)),
                ("b", "elect", 0.5, 1.5, dict(fence=6)),
                ("a", "resign", 2, 2.1, {}))
        self.assertIn("two holders at once", history.check_election(h).first())
        # excused where a fault explains it and the later fence is greater
        r = history.check_election(h, lambda name, a, b: "a fault")
        self.assertEqual((r.violations, len(r.excused)), ([], 1))

    def test_fence_repeated_or_falling(self):
        h = ops(("a", "elect", 0, 1, dict(fence=5)),
                ("a", "resign", 2, 2.1, {}),
                ("b", "elect", 3, 4, dict(fence=5)))
        self.assertIn("granted twice", history.check_election(h).first())
        h = ops(("o", "observe", 1, 1, dict(fence=6)),
                ("o", "observe", 2, 2, dict(fence=6)))
        self.assertIn("with no NONE between", history.check_election(h).first())
        h = ops(("o", "observe", 1, 1, dict(fence=6)),
                ("o", "observe", 2, 2, dict(fence=0)),
                ("o", "observe", 3, 3, dict(fence=5)))
        self.assertIn("told fence 5 after 6", history.check_election(h).first())


if __name__ == "__main__":
    unittest.main(verbosity=1)
