#!/usr/bin/env python3
"""fuzz_state.py's own judgement, without daemons: a walk's bookkeeping fed
the replies a kept failing walk saw, in its order, and what its checks make
of them.

    python3 tests/fuzz/test_fuzz_state_limits.py
"""
# SPDX-License-Identifier: MIT

import argparse
import contextlib
import io
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fuzz_state import Daemon, Failed, Walk  # noqa: E402


class Proc(object):
    """A daemon's process that takes signals and does nothing."""

    def send_signal(self, sig):
        pass


class Picks(object):
    """An rng whose picks are set: every daemon is reloaded, keys are the
    keys drawn and value each key's new value."""

    def __init__(self, keys, value):
        self.keys, self.value = keys, value

    def random(self):
        return 0.99

    def randint(self, a, b):
        return len(self.keys)

    def sample(self, population, k):
        return list(self.keys)

    def choice(self, seq):
        return self.value


class WalkTest(unittest.TestCase):
    def setUp(self):
        args = argparse.Namespace(no=None, quiet=True, keep_going=False, daemons=2,
                                  mangle_rate=0.0, mangle_kinds=None)
        self.w = Walk(args, 1, "normal", 1.0, "stale")
        self.w.write_conf = lambda d: None
        for i in range(2):
            d = Daemon(i, self.w.tmp)
            d.proc = Proc()
            d.conf = {k: v[-1] for k, v in self.w.knob("conf").items()}
            d.conf.update(lease_ms=12000, command_timeout_ms=400)
            d.timeouts.append((0.0, d.conf["command_timeout_ms"]))
            d.judge_conf()
            self.w.daemons.append(d)

    def tearDown(self):
        for h in self.w.hist.values():
            h.close()
        self.w.walklog.close()
        shutil.rmtree(self.w.tmp, ignore_errors=True)

    def fails(self, fn, *args):
        """fn(*args) fails the walk (said quietly)."""
        with contextlib.redirect_stdout(io.StringIO()), self.assertRaises(Failed):
            fn(*args)


class TestLimitAfterLowering(WalkTest):
    """A reload lowers max_locks_per_uid below the holds a daemon has: they
    stay (nothing takes a hold back), and the bound holds again for each
    measure once that measure is at or under it."""

    def lower(self, d, value):
        self.w.rng = Picks(["max_locks_per_uid"], value)
        self.w.a_reload()
        d.reloads_seen = d.reloads_sent   # its log said 'reloaded'

    def test_holds_in_redis_under_the_bound_first(self):
        # /work/fz/limit7, d1: 8 holds when max_locks_per_uid went 1000 -> 6;
        # one released (7 left, none granted since), a FORCEUNLOCK from d0
        # took p1 out of Redis, heard of at d1's next renewal: Redis had 6
        # of d1's holds while INFO still said 7
        d = self.w.daemons[1]
        self.lower(d, 6)
        key = "max_locks_per_uid"
        self.w.limit(d, key, 8, "INFO locks_held")
        self.w.limit(d, key, 7, "INFO locks_held")
        self.w.limit(d, key, 6, "holds in Redis")
        self.w.limit(d, key, 7, "INFO locks_held")
        self.w.limit(d, key, 5, "holds in Redis")
        self.w.limit(d, key, 7, "INFO locks_held")
        self.w.limit(d, key, 7, "INFO locks_held")
        self.assertEqual(self.w.failures, [])

    def test_a_hold_past_the_bound_once_under_it(self):
        d = self.w.daemons[1]
        self.lower(d, 6)
        key = "max_locks_per_uid"
        self.w.limit(d, key, 7, "INFO locks_held")
        self.w.limit(d, key, 6, "INFO locks_held")
        self.w.limit(d, key, 7, "INFO locks_held")
        self.fails(self.w.limit, d, key, 7, "INFO locks_held")

    def test_redis_past_the_bound_once_under_it(self):
        d = self.w.daemons[1]
        self.lower(d, 6)
        key = "max_locks_per_uid"
        self.w.limit(d, key, 5, "holds in Redis")
        self.w.limit(d, key, 7, "holds in Redis")
        self.fails(self.w.limit, d, key, 7, "holds in Redis")

    def test_a_raise_judges_at_once(self):
        d = self.w.daemons[1]
        key = "max_locks_per_uid"
        self.lower(d, 6)
        self.w.limit(d, key, 5, "INFO locks_held")
        self.lower(d, 10)
        self.w.limit(d, key, 11, "INFO locks_held")
        self.fails(self.w.limit, d, key, 11, "INFO locks_held")


if __name__ == "__main__":
    unittest.main()
