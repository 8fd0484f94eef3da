#!/usr/bin/env python3
"""mangle.py's pure part: RESP2 parsing and dumping, which mutation fits
which reply, and a connection's replies reassembled across chunks.

    python3 tests/fuzz/test_mangle.py
"""
# SPDX-License-Identifier: MIT

import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mangle  # noqa: E402
from mangle import Error, Mangler, Status, dump, mutate, mutations, parse  # noqa: E402

GRANT = b"*2\r\n:0\r\n:1795809956350449\r\n"
MGRANT = b"*3\r\n:0\r\n:17\r\n:18\r\n"
SCAN_END = b"*2\r\n$1\r\n0\r\n*1\r\n$5\r\nfz:p0\r\n"
PUSH = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n"


class TestParse(unittest.TestCase):
    def test_values(self):
        self.assertEqual(parse(b"+OK\r\n"), (Status(b"OK"), 5))
        self.assertEqual(parse(b"-ERR x\r\n"), (Error(b"ERR x"), 8))
        self.assertEqual(parse(b":-12\r\n"), (-12, 6))
        self.assertEqual(parse(b"$3\r\na\r\n\r\n"), (b"a\r\n", 9))
        self.assertEqual(parse(b"$-1\r\n"), (None, 5))
        self.assertEqual(parse(b"*-1\r\n"), (None, 5))
        self.assertEqual(parse(GRANT), ([0, 1795809956350449], len(GRANT)))
        self.assertEqual(parse(SCAN_END)[0], [b"0", [b"fz:p0"]])

    def test_incomplete(self):
        for whole in (GRANT, SCAN_END, PUSH, b"$3\r\nabc\r\n"):
            for cut in range(len(whole)):
                self.assertIsNone(parse(whole[:cut]), whole[:cut])

    def test_not_resp(self):
        with self.assertRaises(ValueError):
            parse(b"?what\r\n")

    def test_dump_round_trip(self):
        for whole in (GRANT, MGRANT, SCAN_END, PUSH, b"+OK\r\n", b"-ERR x\r\n", b":5\r\n",
                      b"$0\r\n\r\n", b"*0\r\n"):
            v, end = parse(whole)
            self.assertEqual(end, len(whole))
            self.assertEqual(dump(v), whole)


class TestMutations(unittest.TestCase):
    def test_fit(self):
        self.assertIn("hold-gone", mutations(parse(GRANT)[0]))
        self.assertIn("hold-gone", mutations(parse(MGRANT)[0]))
        self.assertNotIn("hold-gone", mutations([2, 100]))         # TAKEN
        self.assertIn("scan-loop", mutations(parse(SCAN_END)[0]))
        self.assertNotIn("scan-loop", mutations(parse(PUSH)[0]))
        self.assertEqual(sorted(mutations(Status(b"OK"))), ["huge-length", "wrong-type"])

    def test_hold_gone(self):
        rnd = random.Random(1)
        self.assertEqual(mutate(parse(GRANT)[0], "hold-gone", rnd), b"*2\r\n:4\r\n:0\r\n")
        self.assertEqual(mutate(parse(MGRANT)[0], "hold-gone", rnd),
                         b"*3\r\n:4\r\n:0\r\n:1\r\n")

    def test_huge_number(self):
        rnd = random.Random(1)
        v = parse(mutate([0, 2], "huge-number", rnd))[0]
        self.assertEqual(len(v), 2)
        self.assertTrue(mangle.I64_MAX in v or mangle.I64_MIN in v)

    def test_scan_loop(self):
        v = parse(mutate(parse(SCAN_END)[0], "scan-loop", random.Random(1)))[0]
        self.assertEqual(v, [b"1", [b"fz:p0"]])

    def test_huge_length(self):
        out = mutate([0, 1], "huge-length", random.Random(1))
        self.assertIn(b"2147483647", out)
        self.assertIsNone(parse(out))       # it claims more than there is


class TestPipe(unittest.TestCase):
    def test_passes_whole_replies_across_chunks(self):
        m = Mangler(random.Random(1), rate=0)
        p = m.pipe()
        stream = GRANT + SCAN_END + PUSH + b"+OK\r\n"
        out = b"".join(p(stream[i:i + 3]) for i in range(0, len(stream), 3))
        self.assertEqual(out, stream)
        self.assertEqual(m.replies, 4)

    def test_mangles_at_its_rate(self):
        m = Mangler(random.Random(2), rate=1.0, kinds=("hold-gone",))
        p = m.pipe()
        self.assertEqual(p(GRANT + b"+OK\r\n"), b"*2\r\n:4\r\n:0\r\n+OK\r\n")
        self.assertEqual(m.counts, {"hold-gone": 1})

    def test_unparseable_passes(self):
        m = Mangler(random.Random(1), rate=1.0)
        p = m.pipe()
        self.assertEqual(p(b"?x\r\n"), b"?x\r\n")
        self.assertEqual(p(GRANT), GRANT)


if __name__ == "__main__":
    unittest.main()
