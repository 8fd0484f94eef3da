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

    def test_store_rule(self):
        h = H()
        h.write("a", 1, 10, True)
        h.write("b", 2, 9, True)       # a lower fence accepted: a store bug
        self.assertIn("the store accepted", history.check(h.ops).first())
        h = H()
        h.write("a", 1, 10, True)
        h.write("b", 2, 11, False)     # the highest refused
        self.assertIn("the store rejected", history.check(h.ops).first())


if __name__ == "__main__":
    unittest.main(verbosity=1)
