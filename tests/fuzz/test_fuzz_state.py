#!/usr/bin/env python3
"""fuzz_state.py's pure part: which FORCEUNLOCK may have removed a hold
between two grants (forced_between, in grant_order), as the mutexes' and
read/write locks' history checkers excuse two holders at once with it;
which queue's places have all ended (places_ended), as the hostile end
lets them stay.

    python3 tests/fuzz/test_fuzz_state.py
"""
# SPDX-License-Identifier: MIT

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "chaos"))

import history  # noqa: E402
from fuzz_state import forced_between, grant_order, places_ended  # noqa: E402


class Force(object):
    def __init__(self, t_sent, ran_by=None, removed=True):
        self.t_sent = t_sent
        self.ran_by = ran_by
        self.removed = removed


# A short run's walk (seed 1, profile queues, on a busy machine): c39 (d1)
# sent LOCK p3 at 5.200 and was granted fence ...2580; c38 (d0) sent
# FORCEUNLOCK p3 at 6.344, answered OK 1 at 6.503, which removed c39's
# hold before its answer was read; c7 (d0), waiting since 1.407, was
# granted ...4535 after it. d1 hears of the force at c39's lease's end, so
# c39 held on: both answers were read at 6.504-6.505, after the force was
# sent, so forced_now could not end c39's section.
C7 = ("c7", 1795945556004535, 1.407, 6.504, 6.540)
C39 = ("c39", 1795945556002580, 5.200, 6.505, 6.530)


def lock_ops(*holds):
    ops = []
    for proc, fence, t0, t1, unlock in holds:
        ops.append(dict(proc=proc, name="p3", op="lock", t0=t0, t1=t1, res="ok", fence=fence,
                        i=len(ops)))
        ops.append(dict(proc=proc, name="p3", op="unlock", t0=unlock, t1=unlock, res="OK",
                        i=len(ops)))
    return ops


def excuser(forces):
    def excuse(name, a, b):
        x, y = sorted((a, b), key=grant_order)
        f = forced_between(forces, x["i0"], y["c0"])
        return "forced at %.3f" % f.t_sent if f is not None else None
    return excuse


def check(ops, forces):
    return history.check(ops, excuse=excuser(forces))


def rw_ops():
    """c1 writes (fence 10), c2 reads after it (a read returns the
    counter: 10 too) while c1 still holds, as after a force that removed
    c1's write unseen."""
    return [dict(proc="c1", name="r0", op="wlock", t0=1.0, t1=1.1, res="ok", fence=10, i=0),
            dict(proc="c2", name="r0", op="rlock", t0=1.5, t1=2.0, res="ok", fence=10, i=1),
            dict(proc="c2", name="r0", op="runlock", t0=2.5, t1=2.5, res="OK", i=2),
            dict(proc="c1", name="r0", op="wunlock", t0=3.0, t1=3.0, res="OK", i=3)]


class TestForcedBetween(unittest.TestCase):
    def test_the_walk_is_excused_by_its_force(self):
        ops = lock_ops(C7, C39)
        self.assertEqual(len(history.check(ops).violations), 1)
        res = check(ops, [Force(6.344, 6.503)])
        self.assertEqual(res.violations, [])
        self.assertEqual(len(res.excused), 1)

    def test_in_flight_excuses(self):
        self.assertEqual(check(lock_ops(C7, C39), [Force(6.344)]).violations, [])

    def test_no_force_no_excuse(self):
        self.assertEqual(len(check(lock_ops(C7, C39), []).violations), 1)

    def test_a_force_that_ran_before_the_first_was_sent(self):
        # answered before c39 asked: it removed someone else's hold
        self.assertEqual(len(check(lock_ops(C7, C39), [Force(5.0, 5.1)]).violations), 1)

    def test_a_force_sent_after_the_second_grant(self):
        self.assertEqual(len(check(lock_ops(C7, C39), [Force(6.51, 6.52)]).violations), 1)

    def test_a_force_that_removed_nothing(self):
        f = Force(6.344, 6.503, removed=False)
        self.assertEqual(len(check(lock_ops(C7, C39), [f]).violations), 1)

    def test_a_force_never_sent(self):
        self.assertEqual(len(check(lock_ops(C7, C39), [Force(None)]).violations), 1)

    def test_the_latest_of_several(self):
        fs = [Force(1.0, 1.1), Force(6.3, 6.4), Force(6.344, 6.503), Force(7.0)]
        self.assertIs(forced_between(fs, 5.2, 6.504), fs[2])
        self.assertIsNone(forced_between(fs, 6.6, 6.9))
        self.assertIs(forced_between(fs, 6.6, 7.1), fs[3])


class TestReadWrite(unittest.TestCase):
    def test_no_force_no_excuse(self):
        self.assertEqual(len(history.check_rwlock(rw_ops()).violations), 1)
        self.assertEqual(len(history.check_rwlock(rw_ops(), excuse=excuser([])).violations), 1)

    def test_a_force_between_the_write_and_the_read(self):
        # sent after the read was (1.95), before it was answered: the write
        # (the same fence, so first) may have been removed before it
        res = history.check_rwlock(rw_ops(), excuse=excuser([Force(1.95, 1.97)]))
        self.assertEqual(res.violations, [])
        self.assertEqual(len(res.excused), 1)

    def test_a_force_before_the_write(self):
        res = history.check_rwlock(rw_ops(), excuse=excuser([Force(0.8, 0.9)]))
        self.assertEqual(len(res.violations), 1)

    def test_grant_order(self):
        w = dict(fence=10, mode="W")
        r = dict(fence=10, mode="R")
        self.assertEqual(sorted((r, w), key=grant_order), [w, r])
        self.assertEqual(sorted((dict(fence=11, mode="W"), r), key=grant_order)[0], r)


class TestPlacesEnded(unittest.TestCase):
    # the hostile short run's end: FAIRLOCK f1's reply mangled, its place
    # d0:5 stayed in redisson_lock_queue:{fz:f1}, ended 1812 ms before
    NOW = 1795948650000

    def test_an_ended_place(self):
        self.assertTrue(places_ended(["d0:5"], {"d0:5": self.NOW - 1812}, self.NOW))

    def test_a_place_not_ended(self):
        self.assertFalse(places_ended(["d0:5"], {"d0:5": self.NOW + 8972}, self.NOW))
        self.assertFalse(places_ended(["d0:5", "d1:3"], {"d0:5": self.NOW - 1, "d1:3": self.NOW + 1},
                                      self.NOW))

    def test_a_place_without_its_time(self):
        self.assertFalse(places_ended(["d0:5"], {}, self.NOW))
        self.assertFalse(places_ended([], {"d0:5": self.NOW + 5}, self.NOW))
        self.assertTrue(places_ended([], {"d0:5": self.NOW - 5}, self.NOW))


if __name__ == "__main__":
    unittest.main()
